"""What the command line needs to know about the registered mechanisms, without importing them.

Building the ``privhist`` parser from the live registry imports every mechanism (NumPy, SciPy,
mpmath: about a second), which ``privhist --help`` and an argument error do not need. The
parser is built from this table instead; the mechanisms are imported only when a command runs.
``tests/cli/test_startup.py`` checks that the table equals the live registry (names, first
docstring lines, domains and every option with its declared constraint; the weighted selectors
with theirs), so a mechanism registered without an entry here fails that test, which prints the
entry to add.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from privhist.core.constraints import Constraint


class Spec(NamedTuple):
    """One mechanism option (the fields of :class:`privhist.mechanisms.base.Option`, its
    declared constraint included: ``--help`` states what each option accepts)."""

    name: str
    kind: type
    default: Any
    help: str
    choices: tuple[str, ...] | None
    constraint: Constraint | None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


#: former spellings of choice values that the command line still accepts, by option name
CHOICE_ALIASES: dict[str, dict[str, str]] = {"calibration": {"theorem1": "chernoff"}}


class Entry(NamedTuple):
    """One registered mechanism: its docstring's first line, domain needs and options."""

    help: str
    needs_domain: bool
    takes_domain: bool
    options: tuple[Spec, ...]


def names() -> list[str]:
    """Registered mechanism names, sorted (as :func:`privhist.mechanisms.registry.names`)."""
    return sorted(MECHANISMS)


# options shared by several mechanisms (the same Option objects in the mechanism modules)
_COUNT_BOUND = Spec(
    "count_bound",
    int,
    1048576,
    "public bound n on every count: outputs lie in [0, n], larger counts are clamped to n",
    None,
    Constraint.integer(
        1, 1 << 62, open_high=True, note=" (with n = 0 every count is 0: nothing to release)"
    ),
)
_ROWS = _COUNT_BOUND._replace(
    default=1000,
    help="public number of rows n: outputs lie in [0, n] (larger counts are clamped to n), "
    "at most n bins are released",
)
_COUNTING = Spec(
    "counting",
    str,
    "geosample",
    "counting-query sampler: GeoSample (Thm 4.5) or FastSample (Thm 4.6)",
    ("geosample", "fastsample"),
    Constraint.one_of("geosample", "fastsample"),
)
_FAST_GAMMA = Spec(
    "fast_gamma",
    float,
    9.094947017729282e-13,
    "FastSample's mixing probability gamma",
    None,
    Constraint.rational(0, 1, open_low=True, open_high=True),
)
_STRICT = Spec(
    "strict_time",
    bool,
    False,
    "run every sampling loop to its public bound (exact uniform u in [1, d] per key)",
    None,
    Constraint.flag(),
)
_UNIVERSE_BITS = Spec(
    "universe_bits",
    int,
    64,
    "the universe is the integers [0, 2**B) (default 64)",
    None,
    Constraint.integer(1, 64, optional=True),
)
_BETA1 = Spec(
    "beta1",
    str,
    "1/100",
    "KH'' failure probability 1/k (sequence Q of (4n+2)k)",
    None,
    Constraint.reciprocal(),
)
_TV_DELTA = Spec(
    "tv_delta",
    str,
    None,
    "statistical distance 1/k to exact order statistics (Theorem 6.5); default: from --delta",
    None,
    Constraint.reciprocal(optional=True),
)
_SHARE = Constraint.real(0, 1, open_low=True, open_high=True)

# in registration order (the first mechanism declaring a shared option names it in --help)
MECHANISMS: dict[str, Entry] = {
    "dense": Entry(
        "Noisy counts for every key of a public domain.",
        needs_domain=True,
        takes_domain=True,
        options=(
            Spec(
                "noise",
                str,
                "laplace",
                "noise distribution",
                ("laplace", "gaussian"),
                Constraint.one_of("laplace", "gaussian"),
            ),
        ),
    ),
    "basic-geometric": Entry(
        "``BasicHistogram_{M, A}`` (Algorithm 3, Theorem 5.1): a "
        "noisy count in ``[0, n]`` for every",
        needs_domain=True,
        takes_domain=True,
        options=(_COUNT_BOUND, _COUNTING, _FAST_GAMMA, _STRICT),
    ),
    "stability-geometric": Entry(
        "Stability-based histogram with bounded geometric noise (Theorem 1.3).",
        needs_domain=False,
        takes_domain=False,
        options=(_COUNT_BOUND, _STRICT),
    ),
    "keep-heavy": Entry(
        "``KeepHeavy_M`` (Algorithm 4, Theorem 6.1): BasicHistogram over the public domain, then",
        needs_domain=True,
        takes_domain=True,
        options=(
            _COUNT_BOUND,
            _COUNTING,
            _FAST_GAMMA,
            _STRICT,
            Spec(
                "keep",
                int,
                None,
                "release at most this many bins (the paper's n; default n)",
                None,
                Constraint.integer(1, optional=True),
            ),
        ),
    ),
    "sparse": Entry(
        "``KH''_{M, beta1}`` (Algorithm 7, Theorem 6.4) and its efficient approximation",
        needs_domain=False,
        takes_domain=True,
        options=(
            _UNIVERSE_BITS,
            _BETA1,
            _TV_DELTA,
            _COUNTING,
            _FAST_GAMMA,
            _ROWS,
            _STRICT,
        ),
    ),
    "kh-prime": Entry(
        "``KH'_M`` (Algorithm 5, Proposition 6.2): KeepHeavy (Algorithm 4) with the empty bins",
        needs_domain=False,
        takes_domain=True,
        options=(_UNIVERSE_BITS, _TV_DELTA, _COUNTING, _FAST_GAMMA, _ROWS, _STRICT),
    ),
    "pure-sparse": Entry(
        "``PureSparseHistogram_{M, eps, beta1, beta2}`` (Algorithm 8, Theorem 6.6): pure",
        needs_domain=False,
        takes_domain=True,
        options=(
            _UNIVERSE_BITS,
            _BETA1,
            Spec(
                "beta2",
                str,
                "1/1000",
                "mixing probability 1/k of the random histogram",
                None,
                Constraint.reciprocal(),
            ),
            _COUNTING,
            _FAST_GAMMA,
            _ROWS,
            _STRICT,
        ),
    ),
    "compact": Entry(
        "``CompactHistogram_{M, M0}`` (Algorithm 9, Theorem 7.2): a degree-``D`` polynomial over",
        needs_domain=False,
        takes_domain=False,
        options=(
            Spec(
                "universe_bits",
                int,
                64,
                "keys are the integers in [0, 2**B) (pure-sparse, compact)",
                None,
                Constraint.integer(1, 406),
            ),
            Spec(
                "key_encoding",
                str,
                "int",
                "compact: keys are integers in [0, 2**B) (int) or UTF-8 "
                "strings of < B/8 bytes (utf8)",
                ("int", "utf8"),
                Constraint.one_of("int", "utf8"),
            ),
            Spec(
                "max_keys",
                int,
                1000,
                "public bound D on the number of keys with a positive count (polynomial degree)",
                None,
                Constraint.integer(1, 1 << 16),
            ),
            _COUNT_BOUND,
            _STRICT,
        ),
    ),
    "optimal-selection": Entry(
        "Optimal key selection (keys only, or with noisy counts from a stated budget split).",
        needs_domain=False,
        takes_domain=False,
        options=(
            Spec(
                "keys_only",
                bool,
                False,
                "release keys only; all of epsilon goes to selection",
                None,
                Constraint.flag(),
            ),
            Spec(
                "selection_fraction",
                float,
                0.5,
                "share of epsilon spent on selection when counts are released (rest: count noise)",
                None,
                _SHARE,
            ),
        ),
    ),
    "sample-and-threshold": Entry(
        "Poisson-sample the units; release keys whose sampled count reaches the threshold.",
        needs_domain=False,
        takes_domain=False,
        options=(
            Spec(
                "sampling_rate",
                float,
                None,
                "Poisson sampling rate p in (0, 1 - e^-eps] (exact binary value of the float)",
                None,
                Constraint.rational(0, 1, open_low=True, open_high=True, optional=True),
            ),
            Spec(
                "threshold",
                int,
                None,
                "release keys whose sampled count is at least this",
                None,
                Constraint.integer(1, optional=True),
            ),
            Spec(
                "alpha",
                float,
                None,
                "rate p = alpha (1 - e^-eps) when no rate is given (1/6)",
                None,
                Constraint.rational(0, 1, open_low=True, optional=True),
            ),
            Spec(
                "calibration",
                str,
                None,
                "how (p, tau) are chosen: exact (default), chernoff, c_alpha, optimised",
                ("exact", "chernoff", "c_alpha", "optimised"),
                Constraint.one_of("exact", "chernoff", "c_alpha", "optimised", optional=True),
            ),
            Spec(
                "population",
                int,
                None,
                "number of units N: optimised calibration, error report",
                None,
                Constraint.integer(1, optional=True),
            ),
        ),
    ),
    "pws": Entry(
        "Optimal key reporting with sanitized counts (PWS with ``q = 1``).",
        needs_domain=False,
        takes_domain=False,
        options=(),
    ),
    "stability": Entry(
        "Stability-based sparse histogram: discrete Laplace counts, keep those >= T.",
        needs_domain=False,
        takes_domain=False,
        options=(),
    ),
    "gaussian-threshold": Entry(
        "Discrete Gaussian counts of present keys, released at or above a threshold.",
        needs_domain=False,
        takes_domain=False,
        options=(
            Spec(
                "threshold_share",
                float,
                0.5,
                "share of delta spent on keys one user holds alone",
                None,
                _SHARE,
            ),
        ),
    ),
}


class Selector(NamedTuple):
    """One registered weighted user-level selector (:mod:`privhist.mechanisms.user_level`): its
    docstring's first line and every declared parameter constraint, in declaration order. The
    command line reaches ``epsilon``, ``delta``, ``confidence``, ``max_keys`` (as
    ``--max-partitions``) and ``counts`` (as the negation of ``--keys-only``)."""

    help: str
    constraints: tuple[tuple[str, Constraint], ...]


_POSITIVE = Constraint.real(0, open_low=True)
_AT_LEAST_ONE = Constraint.integer(1)
_SELECTOR_CONSTRAINTS: tuple[tuple[str, Constraint], ...] = (
    ("epsilon", _POSITIVE),
    ("delta", Constraint.real(0, 1, open_low=True, open_high=True)),
    ("max_keys", _AT_LEAST_ONE),
    ("scale", Constraint.integer(1, 2**24)),
    ("rounds", Constraint.integer(1, optional=True)),
    ("ratio", Constraint.real(0, open_low=True, optional=True)),
    ("threshold_share", _SHARE),
    ("counts", Constraint.flag()),
    ("count_share", Constraint.real(0, 1, open_low=True, open_high=True, optional=True)),
    ("count_max_keys", _AT_LEAST_ONE),
    ("spent_rho", Constraint.rational(0)),
    ("confidence", _SHARE),
)
#: the weighted selectors by name, sorted (the names
#: :func:`~privhist.mechanisms.registry.weighted_registry` registers)
WEIGHTED: dict[str, Selector] = {
    "cumulative-sips": Selector(
        "Cumulative-evidence DP-SIPS: each key's noisy weights of all rounds so far, combined by",
        _SELECTOR_CONSTRAINTS,
    ),
    "dp-sips": Selector(
        "DP-SIPS: rounds of weighted Gaussian selection, released keys removed between rounds",
        _SELECTOR_CONSTRAINTS,
    ),
    "wgm": Selector(
        "WGM: one round of weighted Gaussian selection (Gopi et al. 2020, Thm 5.1).",
        _SELECTOR_CONSTRAINTS,
    ),
}

#: the user-level key selectors that are not weighted, by name, with their docstring's first line
#: (:class:`~privhist.mechanisms.user_level.votes.VoteSelection`; the command line reaches
#: ``epsilon``, ``delta``, ``confidence`` and ``counts`` as the negation of ``--keys-only``)
VOTES: dict[str, str] = {
    "vote-selection": (
        "One vote per user, cast in turn for the user's first key below a cap in a public random"
    ),
}
