"""Sparse histograms on finite computers (Balcer & Vadhan, Section 6).

* ``keep-heavy`` — :class:`KeepHeavy`, Algorithm 4 over a public domain: BasicHistogram over the
  whole domain, then only the bins strictly above the ``(n + 1)``-th largest noisy count
  (Theorem 6.1). Post-processing of ``basic-geometric``, so ``(eps, 0)``-DP for the same relation.
* :class:`SparseHistogram` — ``KH''`` (Algorithm 7, Theorem 6.4) with exact order statistics
  (``precision=None``), or Theorem 6.5's approximation within statistical distance ``delta`` of
  ``KH''`` (truncated repeated squaring, :mod:`privhist.mechanisms.finite.ordsample`).
* ``pure-sparse`` — :class:`PureSparseHistogram`, Algorithm 8 (Theorem 6.6): SparseHistogram with
  the ``delta`` below, mixed with a random histogram with probability ``beta2`` (Lemma 3.1), pure
  ``(eps, 0)``-DP with output length ``O(n (log|X| + log n))`` for universes up to ``2**64``.

The universe ``X``
------------------
Either ``universe_bits = B`` (``X`` = the integers ``[0, 2**B)``, ``1 <= B <= 64``; keys must be
integers in that range) or an explicit ``domain`` (``X`` = its distinct keys). Data keys outside
``X`` are an error (:class:`~privhist.core.errors.InputDataError`). Released bins are sorted by key
(the canonical order of footnote 1). Algorithms 7 and 8 need ``|X| >= 4n``; for a smaller universe
the mechanism falls back to BasicHistogram over ``X`` (Algorithm 3, also ``(eps, 0)``-DP), says so
in ``metadata["fallback"]`` and warns at construction.

The public bound ``n``
----------------------
As in the paper, ``n`` (``count_bound``) is the public number of rows: released counts lie in
``[0, n]`` (larger counts are clamped, as in ``basic-geometric``) and at most ``n`` bins are
released. In the paper's model (exactly ``n`` rows, replace neighbours) at most ``n`` keys have a
positive count. Here the relation may add or remove records, so the data can have more than ``n``
such keys, and refusing it would not be private: one added record can move a dataset across the
line, and "refused" against "released" is an event of probability 1 against 0. The release is
therefore defined for every dataset, as KeepHeavy (Algorithm 4) is: with ``|A| > n`` the same
steps run (``Q`` is completed with further uniform empty elements when it holds fewer than
``n + 1`` outside ``A``; if ``|X \\ A| < n + 1`` the universe is small and KeepHeavy is run over
all of it). The output law is KeepHeavy's in every case (tests enumerate it), so the guarantee
holds for every pair of neighbours. Only the running-time bound below assumes ``|A| <= n``.

Reading of Algorithm 7 used here
--------------------------------
1. ``Q``: ``L = (4n + 2) / beta1`` uniform draws from ``X`` (``beta1 = 1/k``, so ``L`` is an
   integer); if they hold fewer than ``2n + 1`` distinct elements, release the empty histogram
   (probability depending on ``|X|, n, beta1`` only).
2. ``A`` = keys with positive count, ``m = |X| - |A| >= 3n``.
3. BasicHistogram over ``A`` with the counting sampler ``M`` (GeoSample or FastSample at the
   ``K`` of :mod:`privhist.mechanisms.finite.histograms`).
4. ``q_0..q_n``: the first ``n + 1`` distinct elements of ``Q`` (in order of first appearance) not
   in ``A``; when ``|A| <= n`` they exist. With more keys they may not: the sequence is then
   completed by uniform draws from the empty elements not yet chosen (rejection from ``X`` when
   at least half of ``X`` is free, else from the enumerated remainder, which is then small).
   The law of the whole procedure is invariant under permutations of ``X \\ A``, so the result
   is a uniformly random sequence of distinct elements of ``X \\ A``, as Algorithm 5 (KH')
   requires. If ``|X \\ A| < n + 1`` there is no such sequence: KeepHeavy runs over ``X``.
5. ``(c_q0, ..., c_qn)`` = the top ``n + 1`` order statistics of ``m`` i.i.d. ``M(0, U)``
   (:class:`~privhist.mechanisms.finite.ordsample.OrdSample`; our tie-correct reading of
   Algorithm 6).
6-7. Release the bins of ``A ∪ {q_i}`` whose noisy count is strictly above the ``(n + 1)``-th
   largest (ties at the cut are all dropped, footnote 3).

Given step 1 succeeds this is distributed exactly as KeepHeavy (Proposition 6.2); the tests check
it by enumeration on tiny universes.

Algorithm 8's ``delta``
-----------------------
Lemma 3.1 needs ``Delta(SparseHistogram, KH'') <= tanh(eps/2) * beta2 / (1 - beta2) * min_h
Pr[D = h]`` where ``D`` is step 2's random histogram. For any ``h`` with ``k <= n`` bins, the
draws ``x_1..x_n`` being distinct and containing ``h``'s keys has probability
``[n! / (n - k)!] prod_{j=k}^{n-1} (|X| - j) / |X|**n``, which decreases in ``k`` (ratio
``(n - k) / (|X| - k) < 1``), and each of the ``n`` distinct draws then gets its count with
probability ``1 / (n + 1)``; so ``min_h Pr[D = h] >= n! / (|X| (n + 1))**n``. With
``tanh(eps/2) >= eps/3`` on ``(0, 1]`` we use::

    delta = (eps / 3) * beta2 / (1 - beta2) * n! / (|X| (n + 1))**n

(the paper's ``(eps/3) beta2 (1 / (6|X|))**n`` has the same shape). ``log2(1/delta)`` is about
``n (log2 |X| + log2(e (n+1)/n))``, and the order-statistic sampler's precision follows from it
(:func:`~privhist.mechanisms.finite.ordsample.precision_for`).

Running time bounds (public quantities only)
--------------------------------------------
* KeepHeavy: ``|A|`` draws of ``M`` plus an ``O(|A|)`` selection, ``A`` the public domain.
* SparseHistogram / KH'': ``L = (4n + 2) / beta1`` universe draws and a sort of them; at most
  ``n`` draws of ``M`` (``|A|`` draws, and a completion of ``Q``, for data with more keys than
  the model's ``n`` rows allow: time then grows with ``|A|``, like the time to read the data);
  OrdSample's at most ``n + 1`` steps, each ``bit_length(n + 1)`` boundary evaluations
  (powers with exponent ``<= |X|`` by ``O(log |X|)`` squarings of ``P``-bit numbers) and at
  most ``n`` further terms. ``strict_time=True`` runs all of them (and pads OrdSample to
  ``n + 1`` steps, and draws every sampler's ``u`` in full).
* PureSparseHistogram: the above plus ``n`` universe draws and ``n`` uniform counts; with
  ``strict_time=True`` both branches are computed and the coin only chooses which is released.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import warnings
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from privhist.core.data import Counts
from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import RandomSource
from privhist.core.validation import Constraint, float_up
from privhist.mechanisms.base import KeyDistribution, Mechanism, Option
from privhist.mechanisms.finite._exact import fraction_str, uniform_int
from privhist.mechanisms.finite.geometric import CountingSampler, FastSample, _gamma
from privhist.mechanisms.finite.histograms import (
    _COUNT_BOUND,
    _COUNTING,
    _STRICT,
    DEFAULT_GAMMA,
    BasicHistogram,
    _FiniteHistogram,
)
from privhist.mechanisms.finite.mixing import mixing_delta, mixing_delta_parts
from privhist.mechanisms.finite.ordsample import OrdSample, precision_for
from privhist.mechanisms.finite.universe import Universe
from privhist.mechanisms.registry import register

__all__ = [
    "KHPrime",
    "KeepHeavy",
    "PureSparseHistogram",
    "SparseHistogram",
    "Universe",
    "mixing_delta",
    "one_over_k",
]

#: default public number of rows for the sparse mechanisms: ``n`` sets ``L = (4n + 2) / beta1``
#: universe draws and ``n + 1`` order statistics, so the basic histograms' count bound (``2**20``)
#: would cost about 4 * 10**8 draws per release
DEFAULT_ROWS = 1000
#: ``count_bound`` of the sparse mechanisms: the public number of rows, default :data:`DEFAULT_ROWS`
_ROWS = dataclasses.replace(
    _COUNT_BOUND,
    default=DEFAULT_ROWS,
    help="public number of rows n: outputs lie in [0, n] (larger counts are clamped to n), "
    "at most n bins are released",
)
#: exact order statistics (delta = 0, no tv_delta) only when |X| (n + 1) is at most this
EXACT_WORK = 1 << 21
_UNIVERSE_BITS = Option(
    "universe_bits",
    int,
    64,
    "the universe is the integers [0, 2**B) (default 64)",
    constraint=Constraint.integer(1, 64, optional=True),  # None: the domain is the universe
)
_BETA1 = Option(
    "beta1",
    str,
    "1/100",
    "KH'' failure probability 1/k (sequence Q of (4n+2)k)",
    constraint=Constraint.reciprocal(),
)
_TV_DELTA = Option(
    "tv_delta",
    str,
    None,
    "statistical distance 1/k to exact order statistics (Theorem 6.5); default: from --delta",
    constraint=Constraint.reciprocal(optional=True),
)


def one_over_k(value: Any, function: str, name: str) -> Fraction:
    """``value`` as ``1/k`` for an integer ``k >= 2`` (the paper's ``N^-1``); floats are read by
    their decimal form (``0.01`` is ``1/100``). Otherwise a ValidationError names ``1/ceil(1/x)``,
    the nearest smaller valid setting (:meth:`Constraint.reciprocal`)."""
    x: Fraction = Constraint.reciprocal().check(value, name, function)
    return x


#: above this count bound the precision comes from rigorous logarithm bounds, not exact integers
_EXACT_PRECISION_MAX_N = 1 << 14


def pure_sparse_precision(
    epsilon: Fraction, beta2: Fraction, n: int, size: int
) -> tuple[int, float]:
    """``(P, log2 tv_delta)``: the order-statistics precision of :class:`PureSparseHistogram` for
    the :func:`mixing_delta` target, and that target's ``log2`` (for display).

    Up to ``n = 2**14`` this is exact (:func:`precision_from_parts`). Beyond, ``n!`` and
    ``(|X| (n + 1))**n`` have tens of millions of bits (minutes to form at ``n = 10**6``), so ``P``
    is bounded from above with logarithms: Robbins' bound ``ln n! >= n ln n - n +
    ln(2 pi n) / 2 + 1 / (12 n + 1)`` (a lower bound on ``tv_delta``), every other factor exactly
    in floating point, plus two bits against rounding (the float terms are below ``2**27`` in
    size, so their rounding errors are below ``2**-20``). A larger ``P`` only tightens the
    statistical distance (Theorem 6.5), so the guarantee holds; ``P`` is at most 3 bits above
    the exact value.

    >>> pure_sparse_precision(Fraction(1), Fraction(1, 1000), 12, 2**64)[0]
    871
    """
    if n <= _EXACT_PRECISION_MAX_N:
        num, den = mixing_delta_parts(epsilon, beta2, n, size)
        return precision_from_parts(n, size, num, den), math.log2(num) - math.log2(den)
    log2_fact = (n * math.log(n) - n + math.log(2 * math.pi * n) / 2 + 1 / (12 * n + 1)) / math.log(
        2
    )
    log2_num = math.log2(epsilon.numerator) + math.log2(beta2.numerator) + log2_fact
    log2_den = (
        math.log2(3 * epsilon.denominator * (beta2.denominator - beta2.numerator))
        + n * math.log2(n + 1)
        + n * math.log2(size)
    )
    c = 3 * size + 2 * n + 2
    log2_a = math.log2((n + 1) * (2 * n + 1) * (2 * c + 1)) + log2_den
    return max(8, math.ceil(log2_a - log2_num) + 2), log2_num - log2_den


def precision_from_parts(n: int, m: int, num: int, den: int) -> int:
    """:func:`~privhist.mechanisms.finite.ordsample.precision_for` for ``delta = num / den``
    given unreduced: the smallest ``P >= 8`` with ``(n + 1)(2n + 1)(2C + 1) den <= num 2**P``.

    With ``a`` the left side and ``K = bitlen(a) - bitlen(num)``, ``num 2**K`` and ``a`` have the
    same bit length, so the smallest power is ``K`` or ``K + 1`` (one comparison; no division).

    >>> precision_from_parts(10, 2**64, 1, 2**40) == precision_for(10, 2**64, Fraction(1, 2**40))
    True
    """
    c = 3 * m + 2 * n + 2
    a = (n + 1) * (2 * n + 1) * (2 * c + 1) * den
    k = max(0, a.bit_length() - num.bit_length())
    if (num << k) < a:
        k += 1
    return max(8, k)


@register
class KeepHeavy(BasicHistogram):
    """``KeepHeavy_M`` (Algorithm 4, Theorem 6.1): BasicHistogram over the public domain, then
    only the bins strictly above the ``(keep + 1)``-th largest noisy count (``keep`` is the
    paper's ``n``, by default ``count_bound``; at most ``keep`` bins remain; with at most ``keep``
    domain keys every bin is kept).

    ``(eps, 0)``-DP for the relation, as post-processing of ``basic-geometric`` (Theorem 6.1).
    Accuracy (Theorem 6.1): if BasicHistogram over ``X`` has ``(a1, beta)``-per-query and
    ``(a2, beta)``-simultaneous accuracy, KeepHeavy has ``(a1, 2 beta)``-per-query accuracy on
    counts larger than ``2 a2`` and ``(2 a2, beta)``-simultaneous accuracy (a dropped bin counts
    as 0).

    :meth:`key_distribution` is the distribution of a key's noisy count *before* the selection
    (step 1), on which the privacy proof rests; the kept set depends on every key jointly, and
    ``tests/finite/test_finite_keep_heavy.py`` checks the joint release exactly on small domains.
    Running time: that of BasicHistogram plus an ``O(|A|)`` selection.

    >>> from privhist import SeededRandom
    >>> m = KeepHeavy(0.5, domain=list("abcdefgh"), count_bound=100, keep=2)
    >>> r = m.release(Counts.from_arrays(["a", "b"], [90, 60]), SeededRandom(3))
    >>> r.keys.tolist()
    ['a', 'b']
    """

    name = "keep-heavy"
    summary = "bounded geometric counts over a public domain, only the n heaviest bins (pure DP)"
    options: ClassVar[tuple[Option, ...]] = (
        *BasicHistogram.options,
        Option(
            "keep",
            int,
            None,
            "release at most this many bins (the paper's n; default n)",
            constraint=Constraint.integer(1, optional=True),
        ),
    )

    def __init__(
        self,
        epsilon: float,
        delta: float = 0.0,
        neighbouring: Neighbouring | None = None,
        *,
        domain: npt.ArrayLike | None = None,
        keep: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(epsilon, delta, neighbouring, domain=domain, **kwargs)
        checked: int | None = self.check_option("keep", keep)
        self.keep = self.n if checked is None else checked

    def parameters(self) -> dict[str, Any]:
        return {**super().parameters(), "keep": self.keep}

    def _draw(self, counts: Counts, rng: RandomSource) -> tuple[npt.NDArray[Any], dict[str, Any]]:
        keys, cols = super()._draw(counts, rng)
        values = cols["values"]
        if values.shape[0] <= self.keep:
            return keys, cols
        cut = np.partition(values, values.shape[0] - self.keep - 1)[values.shape[0] - self.keep - 1]
        mask = values > cut
        out = {k: (v[mask] if isinstance(v, np.ndarray) else v) for k, v in cols.items()}
        return keys[mask], out

    @classmethod
    def test_instances(cls) -> list[Mechanism]:
        dom = ["a", "b", "c"]
        return [
            cls(0.4, domain=dom, count_bound=12, keep=3),
            cls(0.6, 0.0, Neighbouring.user(2, 2), domain=dom, count_bound=9),
            cls(0.3, domain=dom, count_bound=15, counting="fastsample", fast_gamma="1/64"),
        ]


@register
class SparseHistogram(_FiniteHistogram):
    """``KH''_{M, beta1}`` (Algorithm 7, Theorem 6.4) and its efficient approximation
    ``SparseHistogram_{M, beta1, delta}`` (Theorem 6.5); module notes give our reading.

    ``delta = 0`` and no ``tv_delta`` samples the order statistics exactly (``KH''``:
    ``(eps, 0)``-DP; numbers of ``O(|X| log d)`` bits, so only universes with
    ``|X| (n + 1) <= 2**21`` are accepted). A rational ``tv_delta`` (``1/k``) gives Theorem
    6.5: within statistical distance ``tv_delta`` of ``KH''`` for every input, hence
    ``(eps, (e**eps + 1) tv_delta)``-DP. Given ``delta > 0`` and no ``tv_delta``, ``tv_delta`` is
    the largest ``1/k`` whose stated delta ``(2 + eps + eps**2) / k`` (``e**eps <= 1 + eps +
    eps**2`` on ``(0, 1]``) is at most ``delta``; the stated delta is then that value.
    Accuracy (Theorem 6.4): with BasicHistogram over ``X`` ``(a1, beta3)``-per-query and
    ``(a2, beta3)``-simultaneously accurate, ``(a1, beta1 + 2 beta3)`` per query on counts above
    ``2 a2`` and ``(2 a2, beta1 + beta3)`` simultaneously (plus ``tv_delta``).

    Registered as ``sparse`` (``privhist histogram --mechanism sparse``, ``Session.histogram(...,
    mechanism="sparse")``); ``pure-sparse`` (Algorithm 8) is its pure-DP form for large universes.

    >>> from privhist import SeededRandom
    >>> s = SparseHistogram(1.0, universe_bits=64, count_bound=200, tv_delta="1/1000000")
    >>> r = s.release(Counts.from_arrays([7, 2**40], [200, 150]), SeededRandom(2))
    >>> r.keys.tolist()[:2], r.values.tolist()[:2]  # then about n empty bins with noise near 57
    ([7, 1099511627776], [200, 151])
    >>> small = SparseHistogram(1.0, universe_bits=64, count_bound=20, tv_delta="1/1000000")
    >>> len(small.release(Counts.from_arrays([7], [20]), SeededRandom(2)))  # see the note
    0

    Note the last example: with ``n`` below ``log(|X|) / eps~`` the largest of ``2**64`` empty
    bins' noisy counts all reach ``n``, so nothing is strictly above the ``(n+1)``-th largest:
    Theorem 6.6's accuracy is for counts above ``2 a2 = O(log(|X|/beta)/eps)`` and needs
    ``n`` at least that large.
    """

    name = "sparse"
    summary = (
        "KH'' / SparseHistogram (Algorithm 7, Theorems 6.4-6.5): the n heaviest noisy bins of a "
        "universe up to 2**64 keys (delta > 0: approximate order statistics)"
    )
    sparse = False  # noise-only bins of the universe are released
    options: ClassVar[tuple[Option, ...]] = (
        _UNIVERSE_BITS,
        _BETA1,
        _TV_DELTA,
        *_COUNTING,
        _ROWS,
        _STRICT,
    )
    #: the release is a joint function of all keys (no per-key output distribution); the exact
    #: joint checks are in tests/finite/test_finite_sparse.py and test_finite_pure_sparse.py
    joint_release: ClassVar[bool] = True

    def __init__(
        self,
        epsilon: float,
        delta: float = 0.0,
        neighbouring: Neighbouring | None = None,
        *,
        universe_bits: int | None = 64,
        domain: npt.ArrayLike | None = None,
        count_bound: int = DEFAULT_ROWS,
        beta1: Any = "1/100",
        tv_delta: Any = None,
        counting: str = "geosample",
        fast_gamma: Any = DEFAULT_GAMMA,
        strict_time: bool = False,
        confidence: float = 0.95,
    ) -> None:
        super().__init__(epsilon, delta, neighbouring, confidence=confidence)
        fn = self.function_name()
        self._setup(count_bound, strict_time)
        self.check_option("universe_bits", universe_bits)
        self.beta1: Fraction = self.check_option("beta1", beta1)
        self.check_option("tv_delta", tv_delta)
        self.noise_kind: str = self.check_option("counting", counting)
        self.check_option("fast_gamma", fast_gamma)
        self.universe = Universe(None if domain is not None else universe_bits, domain, fn)
        if counting == "geosample":
            self.sampler: CountingSampler = self._geo_sample()
        else:
            self.sampler = FastSample.from_k(self.n, self.k, _gamma(fast_gamma, fn, "fast_gamma"))
        self.width = self._half_width()
        self.fallback: str | None = None
        if self.universe.size < 4 * self.n:
            self.fallback = (
                f"the universe has {self.universe.size} < 4n = {4 * self.n} elements "
                "(Algorithms 7 and 8 need |X| >= 4n): BasicHistogram (Algorithm 3) over the "
                "whole universe is released instead"
            )
            warnings.warn(self.fallback, stacklevel=2)
        self._set_tv(tv_delta, fn)
        self._cdf_cache: dict[int, int] = {}

    def _set_tv(self, tv_delta: Any, fn: str) -> None:
        e = Fraction(self.epsilon)
        factor = 2 + e + e * e  # (e**eps + 1) <= 2 + eps + eps**2 on (0, 1]
        requested = Fraction(self.delta)
        if tv_delta is None and requested > 0:
            # the largest 1/k with factor / k <= delta (module notes of Theorem 6.5)
            k = max(2, math.ceil(factor / requested))
            tv_delta = Fraction(1, k)
        self.tv_delta = None if tv_delta is None else one_over_k(tv_delta, fn, "tv_delta")
        if self.tv_delta is None:
            self.precision: int | None = None
            work = self.universe.size * (self.n + 1)
            if self.fallback is None and work > EXACT_WORK:
                raise ValidationError(
                    "delta",
                    fn,
                    "> 0 (Theorem 6.5's approximate order statistics) or a universe with "
                    f"|X| (n + 1) <= 2**21 (here {self.universe.size} x {self.n + 1}): exact "
                    "order statistics use numbers of about |X| log2(d) bits; pure-sparse is the "
                    "pure-DP choice for large universes",
                    self.delta,
                )
        else:
            self.precision = precision_for(self.n, self.universe.size, self.tv_delta)
        if self.tv_delta is not None:
            total = factor * self.tv_delta
            if total >= 1:
                raise ValidationError(
                    "tv_delta",
                    fn,
                    f"below 1/(2 + eps + eps**2) = {float(1 / factor):.4g} (the stated "
                    "delta (e**eps + 1) tv_delta must stay below 1)",
                    tv_delta,
                )
            if requested > 0 and total > requested:
                raise ValidationError(
                    "tv_delta",
                    fn,
                    f"at most delta / (2 + eps + eps**2) = {float(requested / factor):.4g} "
                    "(the stated delta (e**eps + 1) tv_delta must not exceed the delta asked "
                    "for)",
                    tv_delta,
                )
            self.delta_spent = float_up(total)

    # -- parameters -----------------------------------------------------------------------------

    @property
    def draws(self) -> int:
        """``L = (4n + 2) / beta1``, the length of the sequence ``Q`` (step 1)."""
        return (4 * self.n + 2) * self.beta1.denominator

    def parameters(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "universe": self.universe.describe(),
            "universe_size": self.universe.size,
            "counting": self.noise_kind,
            **self._common_parameters(),
            "half_width": self.width,
            "beta1": fraction_str(self.beta1),
            "draws": self.draws,
            "precision_bits": self.precision,
        }
        if self.fallback:
            out["fallback"] = "basic-geometric"
        return out

    def noise_std(self) -> float:
        return self.sampler.noise.std()

    def reporting_probability(self, max_count: int) -> npt.NDArray[np.float64]:
        # depends on the other keys; a lone key is released when above every empty bin's noise
        return np.full(max_count + 1, np.nan)

    def key_distribution(self, units: int, count: int) -> KeyDistribution:
        probs, tail = self._window(min(count, self.n))
        return KeyDistribution(dict(probs), tail)

    # -- sampling ---------------------------------------------------------------------------------

    def _cdf0(self, z: int) -> int:
        v = self._cdf_cache.get(z)
        if v is None:
            v = self.sampler.scaled_cdf(0, z)
            self._cdf_cache[z] = v
        return v

    def _input(self, counts: Counts) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64], int]:
        fn = self.function_name()
        present = counts.counts > 0
        elems = self.universe.elements(counts.keys[present], fn)
        c = counts.counts[present].astype(np.int64)
        above = int((c > self.n).sum())
        return elems, np.minimum(c, self.n), above

    def _fallback(
        self, elems: npt.NDArray[np.uint64], c: npt.NDArray[np.int64], rng: RandomSource
    ) -> tuple[npt.NDArray[Any], npt.NDArray[np.int64]]:
        true = np.zeros(self.universe.size, dtype=np.int64)
        true[elems.astype(np.int64)] = c
        values = self.sampler.sample(true, rng, strict=self.strict_time)
        return self.universe.key_array(np.arange(self.universe.size, dtype=np.uint64)), values

    def _kh(
        self, elems: npt.NDArray[np.uint64], c: npt.NDArray[np.int64], rng: RandomSource
    ) -> tuple[npt.NDArray[Any], npt.NDArray[np.int64], dict[str, Any]]:
        """Algorithm 7 (module notes), returning sorted keys, values and facts."""
        n = self.n
        q = self.universe.draw(rng, self.draws)
        uniq, first = np.unique(q, return_index=True)
        noisy = self.sampler.sample(c, rng, strict=self.strict_time)
        if uniq.shape[0] < 2 * n + 1:
            empty = self.universe.key_array(np.zeros(0, dtype=np.uint64))
            return empty, np.zeros(0, dtype=np.int64), {"q_failed": True}
        m = self.universe.size - elems.shape[0]
        ords: OrdSample | None = None
        if m < n + 1:
            # |X| < |A| + n + 1 (more keys than n): KeepHeavy over the whole, small, universe
            fresh = np.setdiff1d(np.arange(self.universe.size, dtype=np.uint64), elems)
            tops = self.sampler.sample(np.zeros(m, dtype=np.int64), rng, strict=self.strict_time)
        else:
            order = uniq[np.argsort(first, kind="stable")]
            fresh = self._empty_bins(order, elems, rng)
            ords = OrdSample(self._cdf0, m, n, precision=self.precision)
            tops = np.array(ords.sample(rng, strict=self.strict_time), dtype=np.int64)
        keys, values = self._keep_heaviest(elems, noisy, fresh, tops)
        evaluations = 0 if ords is None else ords.full_evaluations
        facts = {"q_failed": False, "full_precision_evaluations": evaluations}
        return keys, values, facts

    def _keep_heaviest(
        self,
        elems: npt.NDArray[np.uint64],
        noisy: npt.NDArray[np.int64],
        fresh: npt.NDArray[np.uint64],
        tops: npt.NDArray[np.int64],
    ) -> tuple[npt.NDArray[Any], npt.NDArray[np.int64]]:
        """Steps 6-7 of Algorithm 7 (5-6 of Algorithm 5): the bins of ``A ∪ {q_i}`` strictly
        above the ``(n + 1)``-th largest noisy count, sorted by key."""
        values = np.concatenate([noisy, tops])
        items = np.concatenate([elems, fresh])
        cut = np.partition(values, values.shape[0] - self.n - 1)[values.shape[0] - self.n - 1]
        keep = values > cut
        items, values = items[keep], values[keep]
        idx = np.argsort(items, kind="stable")
        return self.universe.key_array(items[idx]), values[idx]

    def _empty_bins(
        self, order: npt.NDArray[np.uint64], elems: npt.NDArray[np.uint64], rng: RandomSource
    ) -> npt.NDArray[np.uint64]:
        """Step 4 (module notes): ``q_0..q_n``, the first ``n + 1`` elements of ``order`` (``Q``'s
        distinct elements by first appearance) outside ``A``, completed by uniform draws from
        the empty elements not yet chosen when ``Q`` holds fewer (possible only if ``|A| > n``;
        requires ``|X \\ A| >= n + 1``)."""
        fresh = order[~np.isin(order, elems)][: self.n + 1]
        need = self.n + 1 - int(fresh.shape[0])
        if need == 0:
            return fresh
        taken = set(elems.tolist()) | set(fresh.tolist())
        extra: list[int] = []
        if self.universe.size >= 2 * (len(taken) + need):
            while len(extra) < need:  # each draw is free with probability >= 1/2
                for x in self.universe.draw(rng, need).tolist():
                    if x not in taken and len(extra) < need:
                        taken.add(x)
                        extra.append(x)
        else:  # |X| < 2 (|A| + 2n + 2): the free elements are few enough to list
            pool = sorted(set(range(self.universe.size)) - taken)
            for _ in range(need):
                j = uniform_int(rng, len(pool))
                extra.append(pool[j])
                pool[j] = pool[-1]
                pool.pop()
        return np.concatenate([fresh, np.array(extra, dtype=np.uint64)])

    def _columns(
        self, keys: npt.NDArray[Any], values: npt.NDArray[np.int64], info: dict[str, Any]
    ) -> tuple[npt.NDArray[Any], dict[str, Any]]:
        return keys, {
            "values": values,
            "lower": np.maximum(values - self.width, 0),
            "upper": values + self.width,
            "info": info,
        }

    def _draw(self, counts: Counts, rng: RandomSource) -> tuple[npt.NDArray[Any], dict[str, Any]]:
        elems, c, above = self._input(counts)
        if self.fallback is not None:
            keys, values = self._fallback(elems, c, rng)
            return self._columns(keys, values, {"counts_above_bound": above})
        keys, values, facts = self._kh(elems, c, rng)
        return self._columns(keys, values, {"counts_above_bound": above, **facts})

    def metadata(self, rng: RandomSource | None = None) -> dict[str, Any]:
        meta = super().metadata(rng)
        if self.fallback is not None:
            meta["fallback"] = self.fallback
        return meta

    @classmethod
    def test_instances(cls) -> list[Mechanism]:
        # exact order statistics on small universes (delta = 0: the per-key law is exact and
        # pure), K >= 2 everywhere so the power checks have a sampler two K-steps weaker
        return [
            cls(0.3, universe_bits=10, count_bound=12),
            cls(0.5, 0.0, Neighbouring.replace(), universe_bits=8, count_bound=16),
            cls(0.2, universe_bits=10, count_bound=10, counting="fastsample", fast_gamma=1e-6),
        ]


@register
class KHPrime(SparseHistogram):
    """``KH'_M`` (Algorithm 5, Proposition 6.2): KeepHeavy (Algorithm 4) with the empty bins
    represented by the order statistics of their noisy counts.

    1. ``A`` = keys with positive count, ``m = |X| - |A|``.
    2. BasicHistogram over ``A`` with the counting sampler ``M``.
    3. ``(q_0, ..., q_n)``: a uniformly random sequence of distinct elements of ``X \\ A``
       (:meth:`distinct_empty_elements`: ``n + 1`` steps of a sparse Fisher-Yates shuffle of the
       ranks ``0..m-1`` of ``X \\ A``, each one exact uniform integer below ``m - i``).
    4. ``(c_q0, ..., c_qn)``: the top ``n + 1`` order statistics of ``m`` i.i.d. ``M(0, U)``
       (:class:`~privhist.mechanisms.finite.ordsample.OrdSample`).
    5-6. Release the bins of ``A ∪ {q_i}`` strictly above the ``(n + 1)``-th largest noisy count.

    It differs from ``KH''`` (:class:`SparseHistogram`, Algorithm 7) only in step 3: no sequence
    ``Q`` and so no ``beta1`` failure. By Proposition 6.2 the release is distributed exactly as
    KeepHeavy over ``X`` (``tests/finite/test_finite_sparse.py`` checks it against the
    enumerated KeepHeavy law), so it is ``(eps, 0)``-DP for the relation with ``tv_delta=None``
    and ``(eps, (e**eps + 1) tv_delta)``-DP with Theorem 6.5's approximate order statistics.
    Accuracy is KeepHeavy's (Theorem 6.1). If ``|X \\ A| < n + 1`` KeepHeavy runs over the whole
    (then small) universe; below ``|X| = 4n`` BasicHistogram over ``X`` is released, as for
    ``KH''``.

    Running time (public bound): ``|A|`` draws of ``M`` (``|A| <= n`` in the paper's model),
    exactly ``n + 1`` uniform integers below ``|X|`` for step 3 (each the project's exact
    rejection draw, acceptance ``> 1/2`` per try) and ``n + 1`` binary searches over ``A``, and
    OrdSample's bound (module notes); ``strict_time=True`` runs every bound. Integers only.

    >>> from privhist import SeededRandom
    >>> kh = KHPrime(1.0, universe_bits=64, count_bound=200, tv_delta="1/1000000")
    >>> r = kh.release(Counts.from_arrays([7, 2**40], [200, 150]), SeededRandom(2))
    >>> r.keys.tolist()[:2], r.values.tolist()[:2]
    ([7, 1099511627776], [200, 150])
    """

    name = "kh-prime"
    summary = (
        "KH' (Algorithm 5, Proposition 6.2): KeepHeavy over a universe up to 2**64 keys with "
        "order statistics of the empty bins (delta > 0: approximate order statistics)"
    )
    options: ClassVar[tuple[Option, ...]] = (
        _UNIVERSE_BITS,
        _TV_DELTA,
        *_COUNTING,
        _ROWS,
        _STRICT,
    )

    def __init__(
        self,
        epsilon: float,
        delta: float = 0.0,
        neighbouring: Neighbouring | None = None,
        *,
        universe_bits: int | None = 64,
        domain: npt.ArrayLike | None = None,
        count_bound: int = DEFAULT_ROWS,
        tv_delta: Any = None,
        counting: str = "geosample",
        fast_gamma: Any = DEFAULT_GAMMA,
        strict_time: bool = False,
        confidence: float = 0.95,
    ) -> None:
        super().__init__(
            epsilon,
            delta,
            neighbouring,
            universe_bits=universe_bits,
            domain=domain,
            count_bound=count_bound,
            tv_delta=tv_delta,
            counting=counting,
            fast_gamma=fast_gamma,
            strict_time=strict_time,
            confidence=confidence,
        )

    def parameters(self) -> dict[str, Any]:
        out = super().parameters()
        del out["beta1"], out["draws"]  # no sequence Q in Algorithm 5
        return out

    def distinct_empty_elements(
        self, elems: npt.NDArray[np.uint64], rng: RandomSource
    ) -> npt.NDArray[np.uint64]:
        """Step 3 of Algorithm 5: a uniformly random sequence of ``n + 1`` distinct elements of
        ``X \\ A`` (``A`` = ``elems``, requires ``|X \\ A| >= n + 1``).

        A sparse Fisher-Yates shuffle of the ranks ``0..m-1`` (``m = |X \\ A|``): step ``i``
        draws ``j`` uniform in ``[i, m)`` and swaps positions ``i`` and ``j`` of the virtual
        array (only moved positions are stored), so the first ``n + 1`` positions are a uniform
        sequence of distinct ranks after exactly ``n + 1`` draws. Rank ``r`` is the ``r``-th
        smallest element outside ``A``: ``r + #{t : a_t - t <= r}`` for ``a_0 < a_1 < ...`` the
        sorted elements of ``A`` (``a_t - t`` counts the free elements below ``a_t``).
        """
        m = self.universe.size - int(elems.shape[0])
        moved: dict[int, int] = {}
        ranks: list[int] = []
        for i in range(self.n + 1):
            j = i + uniform_int(rng, m - i)
            ranks.append(moved.get(j, j))
            moved[j] = moved.get(i, i)
        a = sorted(int(v) for v in elems.tolist())
        below = [v - t for t, v in enumerate(a)]
        out = [r + bisect.bisect_right(below, r) for r in ranks]
        return np.array(out, dtype=np.uint64)

    def _kh(
        self, elems: npt.NDArray[np.uint64], c: npt.NDArray[np.int64], rng: RandomSource
    ) -> tuple[npt.NDArray[Any], npt.NDArray[np.int64], dict[str, Any]]:
        """Algorithm 5 (class notes), returning sorted keys, values and facts."""
        n = self.n
        noisy = self.sampler.sample(c, rng, strict=self.strict_time)
        m = self.universe.size - elems.shape[0]
        ords: OrdSample | None = None
        if m < n + 1:  # KeepHeavy over the whole, small, universe
            fresh = np.setdiff1d(np.arange(self.universe.size, dtype=np.uint64), elems)
            tops = self.sampler.sample(np.zeros(m, dtype=np.int64), rng, strict=self.strict_time)
        else:
            fresh = self.distinct_empty_elements(elems, rng)
            ords = OrdSample(self._cdf0, m, n, precision=self.precision)
            tops = np.array(ords.sample(rng, strict=self.strict_time), dtype=np.int64)
        keys, values = self._keep_heaviest(elems, noisy, fresh, tops)
        evaluations = 0 if ords is None else ords.full_evaluations
        return keys, values, {"full_precision_evaluations": evaluations}


@register
class PureSparseHistogram(SparseHistogram):
    """``PureSparseHistogram_{M, eps, beta1, beta2}`` (Algorithm 8, Theorem 6.6): pure
    ``(eps, 0)``-DP sparse histogram over a universe as large as ``2**64``.

    With probability ``1 - beta2`` release :class:`SparseHistogram` at the ``delta`` of the module
    notes (:func:`mixing_delta`); otherwise draw ``n`` elements of ``X``, give each distinct one a
    uniform count in ``[0, n]`` and release those above 0. Lemma 3.1 makes the mixture
    ``(eps, 0)``-DP. Accuracy (Theorem 6.6): ``(a1, beta1 + 2 beta2 + 2 beta3)`` per query on
    counts larger than ``2 a2`` and ``(2 a2, beta1 + 2 beta2 + beta3)`` simultaneously, for
    BasicHistogram over ``X`` ``(a1, beta3)``/``(a2, beta3)``-accurate. Output: at most ``n``
    bins, ``O(n (log|X| + log n))`` bits.

    :meth:`key_distribution` is the distribution of a key's noisy count in step 3 of KH''
    (BasicHistogram over ``A``), on which the privacy proof rests; the release itself is a joint
    function of all keys (exact joint checks: ``tests/finite/test_finite_pure_sparse.py``).

    >>> from privhist import SeededRandom
    >>> m = PureSparseHistogram(1.0, universe_bits=64, count_bound=50)
    >>> m.parameters()["precision_bits"] > 50 * 64
    True
    >>> r = m.release(Counts.from_arrays([5, 9], [50, 40]), SeededRandom(1))
    >>> len(r) <= 50
    True
    """

    name = "pure-sparse"
    summary = "pure-DP sparse histogram over a universe up to 2**64 keys (Algorithm 8)"
    sparse = False  # noise-only bins of the universe can be released
    options = (
        _UNIVERSE_BITS,
        _BETA1,
        Option(
            "beta2",
            str,
            "1/1000",
            "mixing probability 1/k of the random histogram",
            constraint=Constraint.reciprocal(),
        ),
        *_COUNTING,
        _ROWS,
        _STRICT,
    )

    def __init__(
        self,
        epsilon: float,
        delta: float = 0.0,
        neighbouring: Neighbouring | None = None,
        *,
        universe_bits: int | None = 64,
        domain: npt.ArrayLike | None = None,
        count_bound: int = DEFAULT_ROWS,
        beta1: Any = "1/100",
        beta2: Any = "1/1000",
        counting: str = "geosample",
        fast_gamma: Any = DEFAULT_GAMMA,
        strict_time: bool = False,
        confidence: float = 0.95,
    ) -> None:
        self.beta2: Fraction = self.check_option("beta2", beta2)
        super().__init__(
            epsilon,
            delta,
            neighbouring,
            universe_bits=None if domain is not None else universe_bits,
            domain=domain,
            count_bound=count_bound,
            beta1=beta1,
            tv_delta=None,
            counting=counting,
            fast_gamma=fast_gamma,
            strict_time=strict_time,
            confidence=confidence,
        )

    def _set_tv(self, tv_delta: Any, fn: str) -> None:
        self.delta_spent = 0.0
        self._mixing = not self.fallback
        if self.fallback is not None:
            self.precision = None
            return
        # tv_delta is formed on first use only (a gcd of n log|X|-bit numbers: minutes at 10**5)
        self.precision, self.tv_delta_log2 = pure_sparse_precision(
            self._epsilon_mix(), self.beta2, self.n, self.universe.size
        )

    def _epsilon_mix(self) -> Fraction:
        return min(Fraction(self.epsilon), Fraction(1))

    @property
    def tv_delta(self) -> Fraction | None:
        """Algorithm 8's statistical-distance target (:func:`mixing_delta`), None on the
        fallback; an exact Fraction, formed when first read."""
        if not getattr(self, "_mixing", False):
            return None
        if "_tv_delta" not in self.__dict__:
            self.__dict__["_tv_delta"] = mixing_delta(
                self._epsilon_mix(), self.beta2, self.n, self.universe.size
            )
        out: Fraction = self.__dict__["_tv_delta"]
        return out

    @tv_delta.setter
    def tv_delta(self, value: Any) -> None:  # the base class's initialiser assigns it
        self.__dict__.pop("_tv_delta", None)

    def parameters(self) -> dict[str, Any]:
        out = super().parameters()
        out["beta2"] = fraction_str(self.beta2)
        log2 = getattr(self, "tv_delta_log2", None)
        out["log2_tv_delta"] = (
            None if self.fallback is not None or log2 is None else -round(log2, 3)
        )
        return out

    def _random_histogram(
        self, rng: RandomSource
    ) -> tuple[npt.NDArray[Any], npt.NDArray[np.int64]]:
        """Algorithm 8 step 2."""
        x = np.unique(self.universe.draw(rng, self.n))
        vals = rng.uniform_below(self.n + 1, x.shape[0]).astype(np.int64)
        keep = vals > 0
        return self.universe.key_array(x[keep]), vals[keep]

    def _draw(self, counts: Counts, rng: RandomSource) -> tuple[npt.NDArray[Any], dict[str, Any]]:
        elems, c, above = self._input(counts)
        if self.fallback is not None:
            keys, values = self._fallback(elems, c, rng)
            return self._columns(keys, values, {"counts_above_bound": above})
        mix = uniform_int(rng, self.beta2.denominator) < self.beta2.numerator
        info: dict[str, Any] = {"counts_above_bound": above, "mixed": bool(mix)}
        if mix and not self.strict_time:
            keys, values = self._random_histogram(rng)
            return self._columns(keys, values, info)
        keys, values, facts = self._kh(elems, c, rng)
        if mix:  # strict: both branches computed, the coin chooses
            keys, values = self._random_histogram(rng)
        return self._columns(keys, values, {**info, **facts})

    @classmethod
    def test_instances(cls) -> list[Mechanism]:
        # K >= 2 everywhere, so a sampler two K-steps weaker exists for the power checks
        return [
            cls(0.3, universe_bits=64, count_bound=12),
            cls(0.5, 0.0, Neighbouring.replace(), universe_bits=20, count_bound=16),
            cls(0.2, universe_bits=64, count_bound=10, counting="fastsample", fast_gamma=1e-6),
        ]
