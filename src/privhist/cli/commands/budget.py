"""``privhist budget``: the budget ledger.

    privhist budget init --dataset ID --epsilon E [--delta D] [--unit record|user]
        [--regime basic|renyi] [--ledger FILE]
    privhist budget show [--dataset ID] [--ledger FILE] [--json]
    privhist budget upgrade [--ledger FILE]

``init`` registers a dataset with its total budget; ``show`` prints what each dataset has spent
and what remains, as the dataset's filter sees it (:mod:`privhist.accounting.filters`): in the
basic regime the sums of the releases' epsilons and deltas, in the Renyi regime the Renyi filter's
room for a further release; ``upgrade`` takes a ledger written by an older privhist to the current
schema, which hash-chains the spends (:meth:`privhist.accounting.ledger.Ledger.upgrade`). Amounts
are printed as :func:`privhist.accounting.ledger_schema.show_amount` prints them everywhere.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

    from privhist.accounting.ledger import LedgerStatus


def register(sub: Any) -> None:
    from privhist.cli.common import LEDGER_HELP

    b = sub.add_parser("budget", help="the budget ledger")
    bsub = b.add_subparsers(dest="budget_command", metavar="ACTION", required=True)
    bi = bsub.add_parser("init", help="register a dataset with its total budget")
    bi.add_argument(
        "--dataset",
        required=True,
        help="id of the dataset to register (releases charge it with --dataset ID)",
    )
    bi.add_argument(
        "--epsilon",
        type=float,
        required=True,
        help="total epsilon of the dataset: all its releases together may spend no more",
    )
    bi.add_argument(
        "--delta", type=float, default=0.0, help="total delta of the dataset (default 0)"
    )
    bi.add_argument(
        "--unit",
        choices=["record", "user"],
        default="record",
        help="what the total protects: one record, or one user (then only user-level releases "
        "may be charged)",
    )
    bi.add_argument(
        "--regime",
        choices=["basic", "renyi"],
        default="basic",
        help="how releases compose: basic (epsilons and deltas add; any release) or renyi "
        "(releases with Renyi curves, e.g. Gaussian noise, composed by a Renyi filter); fixed "
        "before the first release",
    )
    bi.add_argument("--ledger", help=f"{LEDGER_HELP}; created if missing")
    bi.set_defaults(run=_init)
    bs = bsub.add_parser("show", help="total, spent and remaining budget")
    bs.add_argument("--dataset", help="one dataset (default: all)")
    bs.add_argument("--ledger", help=LEDGER_HELP)
    bs.add_argument(
        "--json", action="store_true", help="print one JSON list, one object per dataset"
    )
    bs.set_defaults(run=_show)
    bu = bsub.add_parser(
        "upgrade",
        help="upgrade a ledger written by an older privhist (checks it, then hash-chains its "
        "spends as they stand)",
    )
    bu.add_argument("--ledger", help=f"{LEDGER_HELP}; upgraded in place")
    bu.set_defaults(run=_upgrade)


def _init(args: argparse.Namespace) -> int:
    from privhist.accounting.ledger import default_ledger_path, init_ledger
    from privhist.core.budget import Budget

    total = Budget(args.epsilon, args.delta)  # checked before any file is touched
    ledger = init_ledger(
        args.ledger or default_ledger_path(),
        args.dataset,
        total,
        unit=args.unit,
        regime=args.regime,
    )
    regime = "" if args.regime == "basic" else " (Renyi regime)"
    print(
        f"dataset '{args.dataset}' registered with total budget {total}{regime} in {ledger.path}",
        file=sys.stderr,
    )
    return 0


def _show(args: argparse.Namespace) -> int:
    from privhist.accounting.ledger import Ledger, default_ledger_path

    ledger = Ledger(args.ledger or default_ledger_path(), create=False)
    ids = [args.dataset] if args.dataset is not None else list(ledger.datasets())
    statuses = [ledger.show(ds) for ds in ids]
    if args.json:
        print(json.dumps([_row(st) for st in statuses]))
        return 0
    if not statuses:
        print("no datasets in the ledger")
    for st in statuses:
        print(_line(st))
    return 0


def _upgrade(args: argparse.Namespace) -> int:
    from privhist.accounting.ledger import SCHEMA_VERSION, Ledger, default_ledger_path
    from privhist.cli.common import counted

    ledger, found = Ledger.upgrade(args.ledger or default_ledger_path())
    if found == SCHEMA_VERSION:
        print(f"ledger {ledger.path} is already at schema version {found}", file=sys.stderr)
    else:
        spends = sum(len(ledger.show(ds).spends) for ds in ledger.datasets())
        print(
            f"ledger {ledger.path} upgraded from schema version {found} to {SCHEMA_VERSION}: "
            f"integrity checked, {counted(spends, 'spend')} hash-chained as they stood",
            file=sys.stderr,
        )
    return 0


def _row(st: LedgerStatus) -> dict[str, Any]:
    row: dict[str, Any] = {
        "dataset": st.dataset,
        "unit": st.unit.value,
        "regime": st.regime,
        "total": {"epsilon": st.total.epsilon, "delta": st.total.delta},
        "releases": len(st.spends),
    }
    view = st.renyi_view()
    if view is None:
        row["spent"] = {"epsilon": st.spent.epsilon, "delta": st.spent.delta}
        row["remaining"] = {"epsilon": st.remaining.epsilon, "delta": st.remaining.delta}
    else:
        row["filter"] = {
            "order": view.order,
            "renyi_used": float(view.used),
            "renyi_budget": float(view.budget),
            "rho_remaining": float(view.rho_left),
            "gaussian_sigma_needed": view.sigma_needed,
            "pure_epsilon_remaining": (None if view.pure_left is None else float(view.pure_left)),
        }
        # what the releases state, for the record; the filter does not add these
        row["stated_sum"] = {"epsilon": st.spent.epsilon, "delta": st.spent.delta}
    return row


def _line(st: LedgerStatus) -> str:
    from privhist.accounting.ledger_schema import show_amount
    from privhist.cli.common import counted

    total = show_amount(st.total.epsilon, st.total.delta)
    releases = counted(len(st.spends), "release")
    view = st.renyi_view()
    if view is None:
        return (
            f"{st.dataset}: total {total}, spent {st.spent} in {releases}, remaining {st.remaining}"
        )
    text = f"{st.dataset}: total {total}, Renyi filter, {releases}: "
    if view.budget <= 0:
        text += "no order of the filter has a positive Renyi budget at this total; "
    elif view.releases:
        share = float(view.used / view.budget)
        text += f"order {view.order:g} has used {share:.1%} of its Renyi budget; "
    if view.rho_left > 0:
        text += (
            f"a further release fits if it is rho-zCDP with rho <= {float(view.rho_left):.4g} "
            f"(a Gaussian of sigma >= {view.sigma_needed:.4g} at L2 sensitivity 1)"
        )
    else:
        text += "no further release with a Renyi curve fits"
    if view.pure_left is not None and view.pure_left > 0:
        text += f", or a pure release of epsilon <= {float(view.pure_left):.6g}"
    return text
