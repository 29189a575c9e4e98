"""Histograms on finite computers (Balcer & Vadhan, Sections 1 and 5).

Two registered mechanisms built on the counting-query samplers of
:mod:`privhist.mechanisms.finite.geometric`:

* ``basic-geometric`` — :class:`BasicHistogram`, Algorithm 3 over a public key set ``A``
  (Theorem 5.1; with ``A = X`` the bounded geometric mechanism of Theorem 1.2);
* ``stability-geometric`` — :class:`StabilityGeometricHistogram`, the stability-based histogram
  with bounded geometric noise (Theorem 1.3).

From the paper's counting-query parameter to a histogram budget
--------------------------------------------------------------
The paper's datasets have exactly ``n`` rows and neighbours replace one row, which moves two bins
by one; a counting query that is ``(eps/2, 0)``-DP then gives an ``(eps, 0)``-DP histogram
(Theorem 5.1). Here the relation is any :class:`~privhist.core.neighbouring.Neighbouring`: one step
touches at most ``l0`` keys and moves each count by at most ``c`` (``l1 = l0 c``). Keys are
released independently, so (basic composition, as in :mod:`privhist.mechanisms.base`) the
histogram is ``(eps, 0)``-DP when every key is ``(eps / l0, 0)``-DP for counts ``c`` apart, which
holds when the per-step ratio ``1 + 2**-K`` of the sampler satisfies
``c ln(1 + 2**-K) <= eps / l0``. We take ``K = ceil(log2(l1 / eps))`` (Theorem 4.5's rule with the
counting parameter ``2 eps / l1``; for replace neighbours, ``l1 = 2``, this is exactly the paper's
``GeoSample_{n, eps}``); then ``c ln(1 + 2**-K) <= c 2**-K <= eps / l0``. As in Theorems 1.2 and
1.3, ``eps`` must lie in ``(0, 1]``; ``K = 0`` (ratio 2) occurs only for ``l1 = 1`` and
``eps = 1``, still ``ln 2 <= 1``.

The public bound ``n`` (``count_bound``)
---------------------------------------
Outputs lie in ``[0, n]``. In the paper ``n`` is the (public) number of rows; here it is a public
bound on every count. Counts above it are clamped to ``n`` before noise is added: ``min(c, n)``
moves by at most as much as ``c``, so the guarantee is unchanged (only accuracy suffers, and the
number of clamped keys is reported in the release's non-private ``diagnostics``). Raising an error
instead would let the error itself depend on the data.

Running time
------------
``strict_time=True`` runs every sampler loop to its public bound (see
:mod:`privhist.mechanisms.finite.geometric`, "Running time (strict)"): BasicHistogram then does a
fixed amount of work for each of the ``|A|`` keys; the stability histogram does it for each key
present in the data, whose number is at most the number of records (``n`` rows in the paper's
model, where Theorem 1.3's bound ``Õ((n/eps) log(1/delta))`` counts the same work).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from privhist.accounting.profile import NOT_RELEASED
from privhist.core.data import Counts
from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import RandomSource
from privhist.core.validation import Constraint
from privhist.io.release import Release
from privhist.mechanisms._domain import check_domain, counts_on_domain
from privhist.mechanisms.base import KeyDistribution, Mechanism, Option
from privhist.mechanisms.finite._exact import ceil_log2, fraction_str
from privhist.mechanisms.finite.geometric import (
    CountingSampler,
    FastSample,
    GeoSample,
    _check_int,
    _gallop,
    _gamma,
)
from privhist.mechanisms.registry import register

__all__ = [
    "DEFAULT_COUNT_BOUND",
    "DEFAULT_GAMMA",
    "BasicHistogram",
    "StabilityGeometricHistogram",
    "histogram_k",
    "keep_heavy",
]

#: default public bound on every count (outputs lie in [0, n])
DEFAULT_COUNT_BOUND = 1 << 20
#: default mixing probability of FastSample
DEFAULT_GAMMA = 2.0**-40
#: key distributions list every output up to this n, else a window around the count
_LIST_ALL = 2048
#: the window leaves out at most this mass of the noise (2**-160)
_WINDOW_TAIL = Fraction(1, 1 << 160)

_COUNT_BOUND = Option(
    "count_bound",
    int,
    DEFAULT_COUNT_BOUND,
    "public bound n on every count: outputs lie in [0, n], larger counts are clamped to n",
    constraint=Constraint.integer(
        1, 1 << 62, open_high=True, note=" (with n = 0 every count is 0: nothing to release)"
    ),
)
#: the counting-query sampler options shared by basic-geometric and pure-sparse
_COUNTING = (
    Option(
        "counting",
        str,
        "geosample",
        "counting-query sampler: GeoSample (Thm 4.5) or FastSample (Thm 4.6)",
        ("geosample", "fastsample"),
    ),
    Option(
        "fast_gamma",
        float,
        DEFAULT_GAMMA,
        "FastSample's mixing probability gamma",
        constraint=Constraint.rational(0, 1, open_low=True, open_high=True),
    ),
)
_STRICT = Option(
    "strict_time",
    bool,
    False,
    "run every sampling loop to its public bound (exact uniform u in [1, d] per key)",
)


#: why the finite histograms take epsilon <= 1, stated in their messages
_EPSILON_NOTE = (
    " (Theorems 1.2 and 1.3 assume epsilon <= 1); the nearest valid setting is epsilon=1"
)


def histogram_k(epsilon: Any, neighbouring: Neighbouring, function: str = "histogram") -> int:
    """``K = ceil(log2(l1 / epsilon))`` for ``epsilon in (0, 1]`` (module notes).

    >>> histogram_k(1.0, Neighbouring.replace()), histogram_k(0.1, Neighbouring.add_remove())
    (1, 4)
    """
    eps = Constraint.rational(0, 1, open_low=True, note=_EPSILON_NOTE).check(
        epsilon, "epsilon", function
    )
    return ceil_log2(neighbouring.l1_sensitivity * eps.denominator, eps.numerator)


def largest_ratio_k(epsilon: Any, neighbouring: Neighbouring, k_max: int) -> int:
    """The smallest ``K`` in ``[0, k_max]`` whose per-record ratio ``1 + 2**-K`` spends at most
    ``epsilon``: ``l1 ln(1 + 2**-K) <= epsilon`` (the module notes' condition
    ``c ln(1 + 2**-K) <= epsilon / l0``), decided exactly as
    ``(2**K + 1)**l1 * b <= a * 2**(K l1)`` for a rational ``a / b <= e**epsilon``.

    :func:`histogram_k` uses ``2**-K <= epsilon / l1`` (from ``ln(1 + x) <= x``), which can leave
    a factor of two on the table: at ``epsilon = 0.45`` it gives ``K = 2`` (``ln 1.25 = 0.22``)
    where ``K = 1`` (``ln 1.5 = 0.41``) is allowed. ``k_max = histogram_k(...)`` always qualifies.

    >>> nb = Neighbouring.add_remove()
    >>> largest_ratio_k(0.45, nb, 2), largest_ratio_k(0.9, nb, 1), largest_ratio_k(1.0, nb, 0)
    (1, 0, 0)
    """
    from privhist.noise import exp_rational_bounds

    l1 = neighbouring.l1_sensitivity
    lower = exp_rational_bounds(Fraction(epsilon))[0]
    a, b = lower.numerator, lower.denominator
    for k in range(k_max):
        if ((1 << k) + 1) ** l1 * b <= a << (k * l1):
            return k
    return k_max


#: stability-geometric's grid for the ratio: ``1 + s 2**-(K + FINE_BITS)`` (module notes of
#: :mod:`privhist.mechanisms.finite.geometric`, "Finer ratios")
FINE_BITS = 4


def finest_ratio(
    epsilon: Any, neighbouring: Neighbouring, k: int, bits: int = FINE_BITS
) -> tuple[int, int]:
    """``(K', s)`` with the largest per-record ratio ``1 + s 2**-K'`` on the grid
    ``K' = k + bits`` whose spend ``l1 ln(1 + s 2**-K') <= epsilon``, decided exactly as
    ``(2**K' + s)**l1 * b <= a * 2**(K' l1)`` for a rational ``a / b <= e**epsilon`` (binary
    search over ``s``; the ratio ``1 + 2**-k`` of :func:`largest_ratio_k`, ``s = 2**bits``,
    always qualifies). ``s`` is then reduced by common factors of two.

    >>> finest_ratio(1.0, Neighbouring.add_remove(), 0)  # 43/16 = 2.6875 <= e
    (4, 27)
    """
    from privhist.noise import exp_rational_bounds

    l1 = neighbouring.l1_sensitivity
    lower = exp_rational_bounds(Fraction(epsilon))[0]
    a, b = lower.numerator, lower.denominator
    fine = k + bits
    p = 1 << fine

    def spends_at_most(step: int) -> bool:
        return bool((p + step) ** l1 * b <= a << (fine * l1))

    lo, hi = 1 << bits, 1 << bits  # lo qualifies; find the first step that does not
    if not spends_at_most(lo):
        return k, 1
    while spends_at_most(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if spends_at_most(mid) else (lo, mid)
    step = lo
    while fine > 0 and step % 2 == 0:
        fine, step = fine - 1, step // 2
    return fine, step


class _FiniteHistogram(Mechanism):
    """Shared parts: the epsilon range, ``K``, the bound ``n`` and the strict-time switch."""

    default_candidate = False  # chosen explicitly, never as the default mechanism
    epsilon_constraint = Constraint.real(0, 1, open_low=True, note=_EPSILON_NOTE)
    sampler: CountingSampler

    def _setup(self, count_bound: Any, strict_time: Any) -> None:
        self.n: int = self.check_option("count_bound", count_bound)
        self.strict_time: bool = self.check_option("strict_time", strict_time)
        self.k = histogram_k(self.epsilon, self.neighbouring, self.function_name())

    def _geo_sample(self, step: int = 1) -> GeoSample:
        """GeoSample at ``(n, K)``; a denominator too large is reported against ``count_bound``."""
        try:
            return GeoSample.from_k(self.n, self.k, step)
        except ValidationError as err:
            raise ValidationError(
                "count_bound", self.function_name(), err.expected, self.n
            ) from None

    @property
    def ratio(self) -> Fraction:
        """The per-record probability ratio ``1 + 2**-K``."""
        return self.sampler.ratio

    def _common_parameters(self) -> dict[str, Any]:
        c = self.neighbouring.linf_sensitivity
        l0 = self.neighbouring.l0_sensitivity
        return {
            "count_bound": self.n,
            "K": self.k,
            "ratio": fraction_str(self.ratio),
            "epsilon_tilde": self.sampler.epsilon_tilde,
            # what the per-key ratio (1 + s 2**-K)**c composes to over l0 keys (<= epsilon)
            "epsilon_effective": l0 * c * math.log1p(self.sampler.noise.step / 2.0**self.k),
            "log2_denominator": round(self.sampler.log2_denominator, 3),
            "strict_time": self.strict_time,
        }

    def noise_std(self) -> float:
        return self.sampler.noise.std()

    def _window(self, c: int) -> tuple[dict[int, Fraction], Fraction]:
        if self.n < _LIST_ALL:
            return dict(enumerate(self.sampler.pmf(c))), Fraction(0)
        radius = self.sampler.noise.half_width_for_tail(_WINDOW_TAIL)
        return self.sampler.pmf_window(c, radius)

    def _half_width(self) -> int:
        return self.sampler.half_width_for_tail(Fraction(1 - self.confidence))


@register
class BasicHistogram(_FiniteHistogram):
    """``BasicHistogram_{M, A}`` (Algorithm 3, Theorem 5.1): a noisy count in ``[0, n]`` for every
    key of the public set ``A``, each drawn independently by the counting sampler ``M``.

    ``M`` is GeoSample (Theorem 4.5; default) or FastSample (Theorem 4.6, ``counting=
    "fastsample"``, mixing probability ``fast_gamma``). Both are ``(ln(1 + 2**-K), 0)``-DP for
    counts one apart, so (module notes) the histogram is ``(eps, 0)``-DP for the neighbouring
    relation; ``delta`` is not spent. Accuracy: every count is within
    :meth:`~privhist.mechanisms.finite.geometric.CountingSampler.half_width_for_tail` of the
    (clamped) true count with the stated confidence. Keys of the data outside ``A`` are dropped. The
    privacy guarantee needs ``A`` fixed independently of the data.

    Running time: ``O(|A|)`` draws of ``M`` plus the mapping of the data onto ``A``; each draw one
    64-bit word by default, or the strict bound of ``M`` with ``strict_time=True``
    (``Õ(n log(1/eps))`` for GeoSample, ``Õ((1/eps) log n log(n/gamma))`` for FastSample).

    >>> from privhist import SeededRandom
    >>> m = BasicHistogram(0.5, domain=["a", "b", "c"], count_bound=100)
    >>> m.parameters()["K"], m.parameters()["ratio"]
    (1, '3/2')
    >>> r = m.release(Counts.from_arrays(["a", "z"], [10, 3]), SeededRandom(0))
    >>> r.keys.tolist(), bool(((r.values >= 0) & (r.values <= 100)).all())
    (['a', 'b', 'c'], True)
    """

    name = "basic-geometric"
    summary = "bounded geometric count in [0, n] for every key of a public domain (pure DP)"
    sparse = False
    needs_domain = True
    options: ClassVar[tuple[Option, ...]] = (
        _COUNT_BOUND,
        *_COUNTING,
        _STRICT,
    )

    def __init__(
        self,
        epsilon: float,
        delta: float = 0.0,
        neighbouring: Neighbouring | None = None,
        *,
        domain: npt.ArrayLike | None = None,
        count_bound: int = DEFAULT_COUNT_BOUND,
        counting: str = "geosample",
        noise: str | None = None,
        fast_gamma: float | Fraction | str = DEFAULT_GAMMA,
        strict_time: bool = False,
        confidence: float = 0.95,
    ) -> None:
        """``noise`` is an alias of ``counting`` (the name ``dense`` uses for its noise)."""
        super().__init__(epsilon, delta, neighbouring, confidence=confidence)
        fn = self.function_name()
        self.domain = check_domain(domain, fn)
        self._setup(count_bound, strict_time)
        kind = self.check_option("counting", counting if noise is None else noise)
        self.check_option("fast_gamma", fast_gamma)
        self.noise_kind = kind
        self.delta_spent = 0.0  # pure DP: a requested delta is not spent
        if kind == "geosample":
            self.sampler: CountingSampler = self._geo_sample()
        else:
            gamma = _gamma(fast_gamma, fn, "fast_gamma")
            if gamma >= Fraction(1 - self.confidence):
                raise ValidationError(
                    "fast_gamma",
                    fn,
                    f"below 1 - confidence = {1 - self.confidence:g} (a fraction gamma of the "
                    "counts is uniform on [0, n], so no interval reaches the confidence)",
                    fast_gamma,
                )
            self.sampler = FastSample.from_k(self.n, self.k, gamma)
        self.width = self._half_width()

    def parameters(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "domain_size": int(self.domain.shape[0]),
            "counting": self.noise_kind,
            **self._common_parameters(),
            "half_width": self.width,
        }
        if isinstance(self.sampler, FastSample):
            out["gamma"] = fraction_str(self.sampler.gamma)
            out["noise_width"] = self.sampler.width
        return out

    def reporting_probability(self, max_count: int) -> npt.NDArray[np.float64]:
        return np.ones(max_count + 1, dtype=np.float64)

    def key_distribution(self, units: int, count: int) -> KeyDistribution:
        probs, tail = self._window(min(count, self.n))
        return KeyDistribution(dict(probs), tail)

    def _draw(self, counts: Counts, rng: RandomSource) -> tuple[npt.NDArray[Any], dict[str, Any]]:
        dom = self.domain
        true, outside = counts_on_domain(dom, counts, self.function_name())
        above = int((true > self.n).sum())
        values = self.sampler.sample(np.minimum(true, self.n), rng, strict=self.strict_time)
        return dom, {
            "values": values,
            "lower": np.maximum(values - self.width, 0),
            "upper": values + self.width,
            "info": {"keys_outside_domain": outside, "counts_above_bound": above},
        }

    @classmethod
    def test_instances(cls) -> list[Mechanism]:
        dom = ["a", "b", "c"]
        return [
            cls(0.4, domain=dom, count_bound=12),
            cls(0.6, 0.0, Neighbouring.user(2, 2), domain=dom, count_bound=9),
            cls(0.9, 0.0, Neighbouring.replace(), domain=dom, count_bound=10, strict_time=True),
            cls(0.3, domain=dom, count_bound=15, counting="fastsample", fast_gamma="1/64"),
            cls(0.45, domain=dom, count_bound=3000),
        ]


@register
class StabilityGeometricHistogram(_FiniteHistogram):
    """Stability-based histogram with bounded geometric noise (Theorem 1.3).

    Every key present in the data (count at least 1) gets ``y = GeoSample(min(count, n))``
    (Theorem 4.5 at the ``K`` of the module notes) and is released, with ``y``, iff ``y >= T``.
    Keys absent from the data are never released.

    Threshold. A key present in only one of two neighbours has count at most ``c`` there; it is
    released with probability ``Pr[j + Z >= T] = alpha**(T - j) / (1 + alpha) <= alpha**(T - c) /
    (1 + alpha)`` for ``j <= c < T <= n`` (``Z`` the bounded geometric noise, ``alpha = 2**K / (2**K
    + 1)``). ``T`` is the smallest integer ``> c`` with ``alpha**(T - c) / (1 + alpha) <= delta /
    l0``, found in exact rational arithmetic; ``T <= n`` is required.

    Ratio. ``K`` is the smallest with ``l1 ln(1 + 2**-K) <= eps`` (:func:`largest_ratio_k`), then
    the ratio is refined on the grid ``1 + s 2**-(K + 4)`` (:func:`finest_ratio`; the bounded
    geometric noise with ``q - p = s``, module notes of
    :mod:`privhist.mechanisms.finite.geometric`, "Finer ratios"): the largest
    ``1 + s 2**-(K + 4)`` with ``l1 ln(1 + s 2**-(K + 4)) <= eps``. Its denominator has about
    ``K + 5`` bits per unit of ``count_bound`` instead of ``K + 1``; when that exceeds GeoSample's
    limit the coarse ratio ``1 + 2**-K`` is kept. The epsilon spent, ``l1 ln(ratio)``, is stated as
    ``epsilon_effective`` in the parameters (plan and release metadata) and printed by the CLI
    when it is below the request: at ``eps = 1`` (add/remove) the ratio is ``43/16`` and the
    spend ``ln(43/16) = 0.989`` (``ln 2`` with the coarse grid).

    Guarantee ``(eps, delta)`` (Theorem 1.3's argument; the proof of
    :mod:`privhist.mechanisms.stability` with the bounded geometric noise): per key, counts present
    on both sides are ``(eps / l0, 0)``-DP (the noisy count's ratio is at most ``ratio**c``;
    thresholding is post-processing); a key present on one side only has hockey-stick
    divergence at most its release probability, ``<= delta / l0`` in both directions; basic
    composition over the ``l0`` touched keys.

    Accuracy: released counts are within :attr:`width` of the clamped true count with the stated
    confidence; keys with count at least ``T + width`` are released with at least that
    probability. Running time: one GeoSample draw per present key.

    >>> from privhist import SeededRandom
    >>> m = StabilityGeometricHistogram(0.5, 1e-6, count_bound=1000)
    >>> # threshold: 1 + the smallest m with (8/13)**m / (21/13) <= 1e-6
    >>> m.parameters()["ratio"], m.parameters()["threshold"]
    ('13/8', 29)
    >>> r = m.release(Counts.from_arrays(["a", "b"], [400, 1]), SeededRandom(1))
    >>> r.keys.tolist()
    ['a']
    """

    name = "stability-geometric"
    summary = "bounded geometric counts of present keys, released above a threshold set by delta"
    requires_delta = True
    options = (_COUNT_BOUND, _STRICT)

    def __init__(
        self,
        epsilon: float,
        delta: float,
        neighbouring: Neighbouring | None = None,
        *,
        count_bound: int = DEFAULT_COUNT_BOUND,
        strict_time: bool = False,
        confidence: float = 0.95,
    ) -> None:
        super().__init__(epsilon, delta, neighbouring, confidence=confidence)
        fn = self.function_name()
        self._setup(count_bound, strict_time)
        # the largest per-record ratio 1 + 2**-K within the request (not only 2**-K <= eps / l1),
        # then the largest 1 + s 2**-(K + FINE_BITS); the finer one only if count_bound allows
        # its larger denominator
        self.k = largest_ratio_k(self.epsilon, self.neighbouring, self.k)
        coarse = self.k
        self.k, step = finest_ratio(self.epsilon, self.neighbouring, coarse)
        try:
            self.sampler = self._geo_sample(step)
        except ValidationError:
            self.k = coarse
            self.sampler = self._geo_sample()
        self.delta_key = Fraction(self.delta) / self.neighbouring.l0_sensitivity
        self.threshold = self._threshold(fn)
        self.width = self._half_width()

    def _threshold(self, fn: str) -> int:
        c = self.neighbouring.linf_sensitivity
        noise = self.sampler.noise
        # smallest m >= 1 with tail(m) <= delta_key (tail(m) = 0 beyond n)
        m = 1 + _gallop(self.n, lambda j: noise.tail(j + 1) > self.delta_key)
        threshold = c + m
        if threshold > self.n:
            raise ValidationError(
                "count_bound",
                fn,
                f">= {threshold} (the threshold for delta={self.delta:g}; with a smaller bound "
                "no key could ever be released)",
                self.n,
            )
        return threshold

    def parameters(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            **self._common_parameters(),
            "half_width": self.width,
        }

    def reporting_probability(self, max_count: int) -> npt.NDArray[np.float64]:
        alpha = self.sampler.noise.p / self.sampler.noise.q
        i = np.minimum(np.arange(max_count + 1, dtype=np.float64), self.n)
        gap = self.threshold - i  # released iff noise >= gap
        with np.errstate(over="ignore", under="ignore"):
            upper = np.power(alpha, np.maximum(gap, 1)) / (1 + alpha)
            lower = 1 - np.power(alpha, np.maximum(1 - gap, 1)) / (1 + alpha)
        out = np.where(gap >= 1, upper, lower)
        out[0] = 0.0
        return np.asarray(out, dtype=np.float64)

    def key_distribution(self, units: int, count: int) -> KeyDistribution:
        if count <= 0:
            return KeyDistribution({NOT_RELEASED: Fraction(1)})
        c = min(count, self.n)
        probs, _ = self._window(c)
        out: dict[Any, Fraction] = {y: p for y, p in probs.items() if y >= self.threshold}
        not_released = self.sampler.cdf(c, self.threshold - 1)
        out[NOT_RELEASED] = not_released
        tail = 1 - sum(out.values(), start=Fraction(0))
        return KeyDistribution(out, tail)

    def _draw(self, counts: Counts, rng: RandomSource) -> tuple[npt.NDArray[Any], dict[str, Any]]:
        present = counts.counts > 0
        keys, c = counts.keys[present], counts.counts[present]
        above = int((c > self.n).sum())
        noisy = self.sampler.sample(np.minimum(c, self.n), rng, strict=self.strict_time)
        keep = noisy >= self.threshold
        values = noisy[keep]
        return keys[keep], {
            "values": values,
            "lower": np.maximum(values - self.width, 0),
            "upper": values + self.width,
            "info": {"counts_above_bound": above},
        }

    @classmethod
    def test_instances(cls) -> list[Mechanism]:
        return [
            cls(0.5, 1e-3, count_bound=60),
            cls(0.9, 1e-3, count_bound=50),  # K = 0 (ratio 2, ln 2 <= 0.9), once K = 1
            cls(1.0, 1e-2, Neighbouring.replace(), count_bound=40),
            cls(0.8, 1e-3, Neighbouring.user(2, 2), count_bound=80, strict_time=True),
            cls(0.4, 1e-4, count_bound=5000),
        ]


def keep_heavy(release: Release, keep: int) -> Release:
    """Steps 2-3 of ``KeepHeavy`` (Algorithm 4) on a ``basic-geometric`` release over the whole
    domain: keep the keys whose noisy count is strictly above the ``(keep + 1)``-th largest.

    ``keep`` is the paper's ``n`` (the public number of rows); at most ``keep`` keys remain, and
    ties at the cut are all dropped, so the result does not depend on how ties are ordered
    (footnote 3 of Algorithm 5). With at most ``keep`` keys every key is kept. This is
    post-processing of the release, so its guarantee is unchanged (Theorem 6.1, privacy); the
    accuracy statements of Theorem 6.1 need the domain to be all of ``X``.

    This is not a registered mechanism: whether a key is kept depends on every other key's noisy
    count, so it has no per-key output distribution for the mechanism contract; its exact privacy
    check enumerates the joint output on small domains instead (tests). Running time
    ``O(|A|)`` (a selection, not a sort).

    >>> from privhist import SeededRandom
    >>> m = BasicHistogram(0.5, domain=list("abcdefgh"), count_bound=100)
    >>> r = m.release(Counts.from_arrays(["a", "b"], [90, 60]), SeededRandom(3))
    >>> keep_heavy(r, 2).keys.tolist()
    ['a', 'b']
    """
    fn = "keep_heavy"
    if not isinstance(release, Release) or release.values is None:
        raise ValidationError("release", fn, "a Release with counts (basic-geometric)", release)
    keep = _check_int(keep, fn, "keep", 1)
    values = release.values
    if values.shape[0] <= keep:
        mask = np.ones(values.shape[0], dtype=np.bool_)
    else:
        cut = np.partition(values, values.shape[0] - keep - 1)[values.shape[0] - keep - 1]
        mask = values > cut

    def pick(column: npt.NDArray[Any] | None) -> npt.NDArray[Any] | None:
        return None if column is None else column[mask]

    meta = dict(release.metadata)
    meta["post_processing"] = {"keep_heavy": int(keep), "reference": "Algorithm 4"}
    meta["released_keys"] = int(mask.sum())
    return Release(
        keys=release.keys[mask],
        values=pick(release.values),
        estimates=pick(release.estimates),
        lower=pick(release.lower),
        upper=pick(release.upper),
        metadata=meta,
        diagnostics=dict(release.diagnostics),
    )
