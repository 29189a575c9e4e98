"""What the command line needs to know about the registered mechanisms, without importing them.

Building the ``privhist`` parser from the live registry imports every mechanism (NumPy, SciPy,
mpmath: about a second), which ``privhist --help`` and an argument error do not need. The
parser is built from this table instead; the mechanisms are imported only when a command runs.
``tests/cli/test_startup.py`` checks that the table equals the live registry (names, first
docstring lines, domains and every option), so a mechanism registered without an entry here fails
that test, which prints the entry to add.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Spec(NamedTuple):
    """One mechanism option (the fields of :class:`privhist.mechanisms.base.Option`)."""

    name: str
    kind: type
    default: Any
    help: str
    choices: tuple[str, ...] | None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


class Entry(NamedTuple):
    """One registered mechanism: its docstring's first line, domain needs and options."""

    help: str
    needs_domain: bool
    takes_domain: bool
    options: tuple[Spec, ...]


def names() -> list[str]:
    """Registered mechanism names, sorted (as :func:`privhist.mechanisms.registry.names`)."""
    return sorted(MECHANISMS)


# in registration order (the first mechanism declaring a shared option names it in --help)
MECHANISMS: dict[str, Entry] = {
    "dense": Entry(
        "Noisy counts for every key of a public domain.",
        needs_domain=True,
        takes_domain=True,
        options=(Spec("noise", str, "laplace", "noise distribution", ("laplace", "gaussian")),),
    ),
    "basic-geometric": Entry(
        "``BasicHistogram_{M, A}`` (Algorithm 3, Theorem 5.1): a "
        "noisy count in ``[0, n]`` for every",
        needs_domain=True,
        takes_domain=True,
        options=(
            Spec(
                "count_bound",
                int,
                1048576,
                "public bound n on every count: outputs lie in [0, n], "
                "larger counts are clamped to n",
                None,
            ),
            Spec(
                "counting",
                str,
                "geosample",
                "counting-query sampler: GeoSample (Thm 4.5) or FastSample (Thm 4.6)",
                ("geosample", "fastsample"),
            ),
            Spec(
                "fast_gamma",
                float,
                9.094947017729282e-13,
                "FastSample's mixing probability gamma",
                None,
            ),
            Spec(
                "strict_time",
                bool,
                False,
                "run every sampling loop to its public bound (exact uniform u in [1, d] per key)",
                None,
            ),
        ),
    ),
    "stability-geometric": Entry(
        "Stability-based histogram with bounded geometric noise (Theorem 1.3).",
        needs_domain=False,
        takes_domain=False,
        options=(
            Spec(
                "count_bound",
                int,
                1048576,
                "public bound n on every count: outputs lie in [0, n], "
                "larger counts are clamped to n",
                None,
            ),
            Spec(
                "strict_time",
                bool,
                False,
                "run every sampling loop to its public bound (exact uniform u in [1, d] per key)",
                None,
            ),
        ),
    ),
    "keep-heavy": Entry(
        "``KeepHeavy_M`` (Algorithm 4, Theorem 6.1): BasicHistogram over the public domain, then",
        needs_domain=True,
        takes_domain=True,
        options=(
            Spec(
                "count_bound",
                int,
                1048576,
                "public bound n on every count: outputs lie in [0, n], "
                "larger counts are clamped to n",
                None,
            ),
            Spec(
                "counting",
                str,
                "geosample",
                "counting-query sampler: GeoSample (Thm 4.5) or FastSample (Thm 4.6)",
                ("geosample", "fastsample"),
            ),
            Spec(
                "fast_gamma",
                float,
                9.094947017729282e-13,
                "FastSample's mixing probability gamma",
                None,
            ),
            Spec(
                "strict_time",
                bool,
                False,
                "run every sampling loop to its public bound (exact uniform u in [1, d] per key)",
                None,
            ),
            Spec(
                "keep", int, None, "release at most this many bins (the paper's n; default n)", None
            ),
        ),
    ),
    "sparse": Entry(
        "``KH''_{M, beta1}`` (Algorithm 7, Theorem 6.4) and its efficient approximation",
        needs_domain=False,
        takes_domain=True,
        options=(
            Spec(
                "universe_bits",
                int,
                64,
                "the universe is the integers [0, 2**B) (default 64)",
                None,
            ),
            Spec(
                "beta1", str, "1/100", "KH'' failure probability 1/k (sequence Q of (4n+2)k)", None
            ),
            Spec(
                "tv_delta",
                str,
                None,
                "statistical distance 1/k to exact order statistics (Theorem "
                "6.5); default: from --delta",
                None,
            ),
            Spec(
                "counting",
                str,
                "geosample",
                "counting-query sampler: GeoSample (Thm 4.5) or FastSample (Thm 4.6)",
                ("geosample", "fastsample"),
            ),
            Spec(
                "fast_gamma",
                float,
                9.094947017729282e-13,
                "FastSample's mixing probability gamma",
                None,
            ),
            Spec(
                "count_bound",
                int,
                1048576,
                "public bound n on every count: outputs lie in [0, n], "
                "larger counts are clamped to n",
                None,
            ),
            Spec(
                "strict_time",
                bool,
                False,
                "run every sampling loop to its public bound (exact uniform u in [1, d] per key)",
                None,
            ),
        ),
    ),
    "kh-prime": Entry(
        "``KH'_M`` (Algorithm 5, Proposition 6.2): KeepHeavy (Algorithm 4) with the empty bins",
        needs_domain=False,
        takes_domain=True,
        options=(
            Spec(
                "universe_bits",
                int,
                64,
                "the universe is the integers [0, 2**B) (default 64)",
                None,
            ),
            Spec(
                "tv_delta",
                str,
                None,
                "statistical distance 1/k to exact order statistics (Theorem "
                "6.5); default: from --delta",
                None,
            ),
            Spec(
                "counting",
                str,
                "geosample",
                "counting-query sampler: GeoSample (Thm 4.5) or FastSample (Thm 4.6)",
                ("geosample", "fastsample"),
            ),
            Spec(
                "fast_gamma",
                float,
                9.094947017729282e-13,
                "FastSample's mixing probability gamma",
                None,
            ),
            Spec(
                "count_bound",
                int,
                1048576,
                "public bound n on every count: outputs lie in [0, n], "
                "larger counts are clamped to n",
                None,
            ),
            Spec(
                "strict_time",
                bool,
                False,
                "run every sampling loop to its public bound (exact uniform u in [1, d] per key)",
                None,
            ),
        ),
    ),
    "pure-sparse": Entry(
        "``PureSparseHistogram_{M, eps, beta1, beta2}`` (Algorithm 8, Theorem 6.6): pure",
        needs_domain=False,
        takes_domain=True,
        options=(
            Spec(
                "universe_bits",
                int,
                64,
                "the universe is the integers [0, 2**B) (default 64)",
                None,
            ),
            Spec(
                "beta1", str, "1/100", "KH'' failure probability 1/k (sequence Q of (4n+2)k)", None
            ),
            Spec("beta2", str, "1/1000", "mixing probability 1/k of the random histogram", None),
            Spec(
                "counting",
                str,
                "geosample",
                "counting-query sampler: GeoSample (Thm 4.5) or FastSample (Thm 4.6)",
                ("geosample", "fastsample"),
            ),
            Spec(
                "fast_gamma",
                float,
                9.094947017729282e-13,
                "FastSample's mixing probability gamma",
                None,
            ),
            Spec(
                "count_bound",
                int,
                1048576,
                "public bound n on every count: outputs lie in [0, n], "
                "larger counts are clamped to n",
                None,
            ),
            Spec(
                "strict_time",
                bool,
                False,
                "run every sampling loop to its public bound (exact uniform u in [1, d] per key)",
                None,
            ),
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
            ),
            Spec(
                "key_encoding",
                str,
                "int",
                "compact: keys are integers in [0, 2**B) (int) or UTF-8 "
                "strings of < B/8 bytes (utf8)",
                ("int", "utf8"),
            ),
            Spec(
                "max_keys",
                int,
                1000,
                "public bound D on the number of keys with a positive count (polynomial degree)",
                None,
            ),
            Spec(
                "count_bound",
                int,
                1048576,
                "public bound n on every count: outputs lie in [0, n], "
                "larger counts are clamped to n",
                None,
            ),
            Spec(
                "strict_time",
                bool,
                False,
                "run every sampling loop to its public bound (exact uniform u in [1, d] per key)",
                None,
            ),
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
            ),
            Spec(
                "selection_fraction",
                float,
                0.5,
                "share of epsilon spent on selection when counts are released (rest: count noise)",
                None,
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
            ),
            Spec("threshold", int, None, "release keys whose sampled count is at least this", None),
            Spec(
                "alpha",
                float,
                None,
                "rate p = alpha (1 - e^-eps) when no rate is given (1/6)",
                None,
            ),
            Spec(
                "calibration",
                str,
                None,
                "how (p, tau) are chosen: exact (default), theorem1, c_alpha, optimised",
                ("exact", "theorem1", "c_alpha", "optimised"),
            ),
            Spec(
                "population",
                int,
                None,
                "number of units N: optimised calibration, error report",
                None,
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
            ),
        ),
    ),
}
WEIGHTED: tuple[str, ...] = ("dp-sips", "wgm")
