"""The privacy-critical areas, the functions mutated in each, and the tests each mutant runs.

Every entry is ``module (relative to src/) -> (functions, tests)``: the functions whose code
decides a noise parameter, a threshold, a cap, a charge or a check, and the test files (pytest
node ids, relative to the repository) that test that module. A mutant runs only its module's
tests (and the module's own doctests), so each run stays short; ``-x`` stops at the first
failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Target:
    functions: tuple[str, ...]
    tests: tuple[str, ...]
    operators: tuple[str, ...] | None = None  # None: every operator
    #: a pytest ``-k`` expression narrowing ``tests`` to the module's own (None: all of them)
    keyword: str | None = None


@dataclass(frozen=True)
class Area:
    name: str
    summary: str
    targets: dict[str, Target] = field(default_factory=dict)
    #: mutants run by default (a deterministic sample, see run.py); 0: all
    sample: int = 30


def _noise(*names: str) -> tuple[str, ...]:
    """Test files of ``tests/noise`` (fast exact ones first: ``-x`` stops at the first kill)."""
    return tuple(f"tests/noise/test_noise_{n}.py" for n in names)


_EXACT_FIRST = ("exact", "rare_paths", "validation", "branches")

AREAS: dict[str, Area] = {}


def _area(name: str, summary: str, targets: dict[str, Target], sample: int = 30) -> None:
    AREAS[name] = Area(name, summary, targets, sample)


_area(
    "samplers",
    "exact integer samplers (privhist.noise)",
    {
        "privhist/noise/laplace.py": Target(
            ("discrete_laplace", "sample_laplace"), _noise(*_EXACT_FIRST, "laplace", "gaussian")
        ),
        "privhist/noise/geometric.py": Target(
            ("geometric", "table_fits", "sample_geometric"),
            _noise(*_EXACT_FIRST, "geometric", "laplace"),
        ),
        "privhist/noise/_tables.py": Target(
            (
                "invert",
                "count_exact",
                "_finish",
                "_count_bound",
                "_powers",
                "_floors",
                "geometric_table",
                "laplace_table",
                "truncated_table",
                "exp_power_floors",
            ),
            _noise(*_EXACT_FIRST, "geometric", "laplace"),
        ),
        "privhist/noise/gaussian.py": Target(
            ("discrete_gaussian", "_plan", "_acceptance_table", "_accept", "_accept_arithmetic"),
            _noise(*_EXACT_FIRST, "gaussian"),
        ),
        "privhist/noise/bernoulli.py": Target(
            (
                "compare_word",
                "compare_table",
                "bernoulli_rational",
                "bernoulli_exp",
                "bernoulli_exp_array",
                "exp_fraction_parts",
            ),
            _noise(*_EXACT_FIRST, "bernoulli", "lazy_tiny"),
        ),
        "privhist/noise/binomial.py": Target(
            ("_split_digits", "finish_trials", "binomial_half", "binomial_half_popcount"),
            _noise("rare_paths", "validation", "branches", "binomial", "binomial_direct"),
        ),
        "privhist/noise/_exact.py": Target(
            (
                "_exp_pos_fixed",
                "exp_bounds",
                "exp_rational_bounds",
                "floor_from_bounds",
                "rational_oracle",
                "exp_neg_oracle",
                "capped",
                "LazyUniform.prefix",
                "LazyUniform.less",
            ),
            _noise(*_EXACT_FIRST, "bernoulli", "laplace", "geometric"),
        ),
        "privhist/noise/_binomial_large.py": Target(
            ("block_width", "geometric_quarter", "binomial_half_large", "accept_exact"),
            _noise("rare_paths", "branches", "binomial"),
        ),
        "privhist/noise/_binomial_direct.py": Target(
            ("eligible", "binomial_direct", "_propose", "accept_exact", "_mode_and_rest"),
            _noise("rare_paths", "branches", "binomial_direct"),
        ),
        "privhist/noise/rational.py": Target(("_best",), _noise("rational", "validation")),
        "privhist/noise/exponential.py": Target(
            (
                "_Weights.__init__",
                "_Weights.cumulative",
                "ExponentialLevels.cdf_bounds",
                "ExponentialLevels.sample_level",
                "_less",
                "exponential_blocks",
            ),
            _noise("exponential"),
        ),
        "privhist/noise/permute_flip.py": Target(
            ("_word", "binomial_exp", "permute_and_flip_blocks"), _noise("permute_flip")
        ),
    },
    sample=40,
)

_MECH_TESTS = (
    "tests/contracts",
    "tests/mechanisms",
)
_area(
    "mechanisms",
    "central mechanisms: noise parameters, thresholds and their events",
    {
        "privhist/mechanisms/_noise.py": Target(
            ("LaplaceCountNoise.__init__", "LaplaceCountNoise.sample"),
            _MECH_TESTS,
            keyword="dense or stability or optimal or laplace or noise or edges",
        ),
        "privhist/mechanisms/dense.py": Target(
            (
                "calibrate_discrete_gaussian_sigma",
                "DenseHistogram.__init__",
                "DenseHistogram.event",
                "DenseHistogram._draw",
            ),
            _MECH_TESTS,
            keyword="dense or edges",
        ),
        "privhist/mechanisms/stability.py": Target(
            ("stability_threshold", "StabilityHistogram.__init__", "StabilityHistogram._draw"),
            _MECH_TESTS,
            keyword="stability or edges",
        ),
        "privhist/mechanisms/user_level/gaussian_threshold.py": Target(
            (
                "GaussianThresholdHistogram.__init__",
                "GaussianThresholdHistogram.certified_delta",
                "GaussianThresholdHistogram._draw",
            ),
            _MECH_TESTS,
            keyword="gaussian or edges",
        ),
        "privhist/mechanisms/sampling/sample_threshold.py": Target(
            ("sample_units", "SampleAndThreshold.__init__", "SampleAndThreshold._draw"),
            (*_MECH_TESTS, "tests/sampling/test_st_mechanism.py"),
            keyword="sample or st_mechanism or edges",
        ),
        "privhist/mechanisms/optimal_selection.py": Target(
            ("optimal_reporting_numerators", "OptimalSelection._draw", "OptimalSelection._pi"),
            _MECH_TESTS,
            keyword="optimal or pws or edges",
        ),
        "privhist/mechanisms/_grid.py": Target(
            ("grid_bits", "LazyBernoulliTable.draw", "LazyInversion.draw"),
            _MECH_TESTS,
            keyword="optimal or pws or grid or edges",
        ),
    },
)

_USER_TESTS = (
    "tests/contracts",
    "tests/user_level",
)
_area(
    "selectors",
    "user-level weighted selectors (WGM, DP-SIPS, cumulative-sips) and their caps",
    {
        "privhist/mechanisms/user_level/selectors.py": Target(
            (
                "WeightedSelector.__init__",
                "WeightedSelector._finish_calibration",
                "WeightedSelector.event",
                "WeightedSelector.zcdp_rho",
                "WeightedSelector.private_key_bound",
                "WeightedSelector.release_weighted",
                "WeightedSelector._select",
            ),
            _USER_TESTS,
            keyword="wgm or sips or weighted or selector or edges",
        ),
        "privhist/mechanisms/user_level/cumulative.py": Target(
            (
                "combination_weights",
                "round_targets",
                "gaussian_profile_upper",
                "sum_tail_upper",
                "CumulativeSIPS._finish_calibration",
                "CumulativeSIPS._sigma2s_for",
                "CumulativeSIPS._profile_parts",
                "CumulativeSIPS.round_bound",
                "CumulativeSIPS._threshold",
                "CumulativeSIPS._select",
            ),
            _USER_TESTS,
            keyword="cumulative or weighted or selector or edges",
        ),
        "privhist/mechanisms/user_level/caps.py": Target(
            ("cap_from_histogram", "dp_degree_cap", "auto_selector", "auto_count_cap"),
            _USER_TESTS,
            keyword="cap or edges",
        ),
        "privhist/mechanisms/user_level/_gauss.py": Target(
            (
                "calibrate_rho",
                "sigma2_for",
                "tail_upper",
                "release_bound",
                "unit_weights",
                "calibrate",
            ),
            _USER_TESTS,
            keyword="gauss or wgm or sips or weighted or selector or tail or calibrat or edges",
        ),
    },
)

_BOUND_TESTS = (
    "tests/engines/test_bounding_paths.py",
    "tests/engines/test_local_engine.py",
    "tests/user_level/test_user_level_engine.py",
)
_SPARK_TESTS = (
    "tests/engines/test_bounding_paths.py",
    "tests/engines/test_spark_engine.py",
    "tests/engines/test_spark_held_sums.py",
)
_area(
    "bounding",
    "per-user contribution bounding (local and Spark engines, weighted sources)",
    {
        "privhist/engines/local/counting.py": Target(
            ("_bound", "_keep_mask", "count_user_codes", "bound_contributions", "_count_users"),
            _BOUND_TESTS,
        ),
        "privhist/engines/local/weighting.py": Target(
            ("_exclude", "_kept_degrees", "_sums", "weighted_sums", "unit_counts", "wanted_keys"),
            _BOUND_TESTS,
        ),
        "privhist/engines/spark/bounding.py": Target(
            ("bound_table", "_count_int_pairs", "_count_pairs", "keep_mask"), _SPARK_TESTS
        ),
    },
)

_ACC_TESTS = (
    "tests/accounting/test_accountant_rules.py",
    "tests/accounting/test_accountant.py",
    "tests/accounting/test_composition.py",
    "tests/accounting/test_accountant_edges.py",
    "tests/accounting/test_release_guarantees.py",
    "tests/contracts/test_rounding_direction.py",
)
_area(
    "accountant",
    "the accountant: composition rules and conversions to (epsilon, delta)",
    {
        "privhist/accounting/accountant.py": Target(
            (
                "_stated",
                "_basic",
                "_advanced",
                "threshold_parts",
                "threshold_delta",
                "_zcdp_threshold",
                "account",
                "guarantee_of",
            ),
            _ACC_TESTS,
        ),
        "privhist/accounting/zcdp.py": Target(
            ("zcdp_delta", "with_threshold_failure", "certified_delta", "threshold_epsilon"),
            _ACC_TESTS,
        ),
        "privhist/accounting/composition.py": Target(
            (
                "basic_composition",
                "advanced_composition",
                "optimal_composition_delta",
                "PLDAccount.delta_for_epsilon",
                "PLDAccount.epsilon_for_delta",
                "PLDAccount._margin",
            ),
            _ACC_TESTS,
        ),
        "privhist/accounting/renyi.py": Target(
            ("RdpCurve.epsilon", "rdp_to_dp", "certified_rdp_to_dp", "sequential_exact"),
            _ACC_TESTS,
        ),
    },
)

_LEDGER_TESTS = (
    "tests/accounting/test_ledger_boundaries.py",
    "tests/accounting/test_ledger.py",
    "tests/accounting/test_events_filters.py",
)
_area(
    "ledger",
    "the durable budget ledger and its filters",
    {
        "privhist/accounting/ledger.py": Target(
            (
                "PrivacyUnit.admits",
                "LedgerStatus.admission",
                "LedgerStatus.allows",
                "LedgerStatus.check",
                "_exact_sums",
                "_fits",
                "Ledger.init_dataset",
                "Ledger.spend",
                "Ledger._status",
                "SpendTransaction.__enter__",
                "SpendTransaction.__exit__",
            ),
            _LEDGER_TESTS,
        ),
        "privhist/accounting/filters.py": Target(
            ("basic_admits", "renyi_budget", "renyi_admission"), _LEDGER_TESTS
        ),
    },
)

_SESSION_TESTS = ("tests/session/test_session_charging.py", "tests/session")
_area(
    "session",
    "session charging: what is spent, when, and what is published",
    {
        "privhist/session/__init__.py": Target(
            (
                "Session.release",
                "Session._prepare",
                "Session._charged",
                "Session._charge",
                "Session._check_output",
            ),
            _SESSION_TESTS,
        ),
        "privhist/session/build.py": Target(("_auto_cap",), _SESSION_TESTS),
        "privhist/session/releases.py": Target(
            (
                "AutoCapSelector.event",
                "AutoCapSelector.draw",
                "AutoCapMechanism.event",
                "AutoCapMechanism.draw",
            ),
            _SESSION_TESTS,
        ),
        "privhist/session/_support.py": Target(("check_output", "_same_file"), _SESSION_TESTS),
    },
)

_AGG_TESTS = (
    "tests/analytics/test_aggregate_metrics_dp.py",
    "tests/contracts/test_noise_spy.py",
    "tests/analytics/test_aggregate.py",
    "tests/contracts/test_rounding_direction.py",
)
_AGG_KEYWORD = "aggregat or metric or count or sum or mean or variance or quantiles"
_area(
    "aggregations",
    "aggregation metrics: sensitivities, budget split, noise and bounding per group",
    {
        "privhist/analytics/aggregate.py": Target(
            (
                "Aggregation._calibrate",
                "Aggregation.components",
                "Aggregation._shares",
                "Aggregation.noise_parameters",
                "Aggregation._auto_noise",
                "Aggregation._noisy",
                "_sigma2",
                "_sqrt_up",
                "Aggregation._flip",
                "Aggregation._em_epsilon",
                "em_blocks",
                "_em_quantiles",
            ),
            _AGG_TESTS,
            keyword=_AGG_KEYWORD,
        ),
        "privhist/engines/local/aggregate.py": Target(
            (
                "with_units",
                "bound",
                "partial_rows",
                "aggregates",
                "_one_pass",
                "GroupCoder.expr",
                "GroupCoder.keys",
                "GroupCoder.key_codes",
                "GroupCoder.mapped",
                "group_coder",
                "count_group_codes",
            ),
            (*_AGG_TESTS, "tests/engines/test_local_group_tallies.py"),
            keyword=_AGG_KEYWORD + " or group or passes",
        ),
    },
)

_SECAGG_TESTS = (
    "tests/federated/secagg/test_secagg_protocol.py",
    "tests/federated/secagg/test_secagg_primitives.py",
    "tests/federated/secagg/test_secagg_plugin.py",
    "tests/federated/test_secure_sum.py",
    "tests/federated/secagg/test_secagg_checks.py",
)
_area(
    "secagg",
    "secure aggregation: the ideal sum, SecAgg(+) protocol checks, Shamir sharing",
    {
        "privhist/federated/secure_sum.py": Target(
            (
                "SecureAggregator.__init__",
                "SecureAggregator._check_batch",
                "IdealSecureSum.aggregate",
                "centred",
            ),
            _SECAGG_TESTS,
        ),
        "privhist/federated/secagg/protocol.py": Target(
            (
                "default_threshold",
                "RoundConfig.__post_init__",
                "SecAggClient._on_roster",
                "SecAggClient._on_forward",
                "SecAggClient._on_survivors",
                "SecAggClient._on_unmask_req",
                "SecAggServer._check_shares",
                "SecAggServer._check_unmask",
                "SecAggServer.close_stage",
                "SecAggServer._unmask",
            ),
            _SECAGG_TESTS,
        ),
        "privhist/federated/secagg/shamir.py": Target(("*",), _SECAGG_TESTS),
    },
)

_INTEGRITY_TESTS = (
    "tests/io/test_integrity_checks.py",
    "tests/io",
    "tests/hardening/test_regressions.py",
)
_area(
    "integrity",
    "integrity seals of written releases and their verification on read",
    {
        "privhist/io/integrity.py": Target(("*",), _INTEGRITY_TESTS),
        "privhist/io/samples.py": Target(("*",), _INTEGRITY_TESTS),
    },
)

_COMPOSE_TESTS = (
    "tests/analytics/test_hierarchy_composition.py",
    "tests/analytics/test_range.py",
    "tests/accounting/test_accountant.py",
    "tests/analytics/test_quantiles.py",
)
_PAIR_TESTS = (
    "tests/accounting/test_dominating_pair.py",
    "tests/accounting/test_certified.py",
    "tests/federated/test_triehh.py",
    "tests/accounting/test_accountant.py",
    "tests/sampling/test_st_profile.py",
    "tests/analytics/test_range.py",
)
_PAIR_KEYWORD = "pair or pld or compos or event or guarantee or certified or triehh or exact_dp"
_area(
    "composition",
    "composed sample-and-threshold releases: budget split, dominating pair, guarantee charged",
    {
        "privhist/analytics/hierarchy.py": Target(
            (
                "split_budget",
                "split_sample_and_threshold",
                "pld_epsilon",
                "compose",
                "certified_composition",
                "ReleasesComposition.guarantee",
                "ReleasesComposition.guarantee_rule",
                "compose_releases",
            ),
            _COMPOSE_TESTS,
            keyword="compos or pld or exact_dp or hierarch or quantile or ledger",
        ),
        "privhist/mechanisms/sampling/pair.py": Target(
            ("profile_points", "threshold_pair_event"), _PAIR_TESTS, keyword=_PAIR_KEYWORD
        ),
        "privhist/accounting/pairs.py": Target(
            ("dominating_pair",), _PAIR_TESTS, keyword=_PAIR_KEYWORD
        ),
    },
)
