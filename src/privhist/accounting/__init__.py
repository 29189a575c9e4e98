"""Privacy accounting: exact privacy profiles, composition and the durable budget ledger."""

from privhist.accounting.ledger import (
    BudgetAmount,
    Ledger,
    LedgerStatus,
    SpendRecord,
    SpendTransaction,
    UnknownDatasetError,
    default_ledger_path,
)
from privhist.accounting.profile import (
    NOT_RELEASED,
    PRECISION,
    LogRational,
    ProfileCheck,
    check_dp,
    delta_for_epsilon,
    epsilon_for_delta,
    hockey_stick,
    privacy_profile,
    product_distribution,
)

__all__ = [
    "NOT_RELEASED",
    "PRECISION",
    "BudgetAmount",
    "Ledger",
    "LedgerStatus",
    "LogRational",
    "ProfileCheck",
    "SpendRecord",
    "SpendTransaction",
    "UnknownDatasetError",
    "check_dp",
    "default_ledger_path",
    "delta_for_epsilon",
    "epsilon_for_delta",
    "hockey_stick",
    "privacy_profile",
    "product_distribution",
]
