"""Sanitisers (Algorithm 2) applied to a non-private weighted sample, without the original data.

Cohen, Geri, Sarlos & Stemmer, Section 3.3 and Algorithm 2. What is proven, for the code that runs:

* The sample. Each key of frequency ``i`` is in the sample independently with probability
  exactly ``Q_i / 2**62``, ``Q_i = floor(q_i 2**62)`` (:func:`~.schemes.grid_inclusion`; true of
  :func:`~.schemes.threshold_sample` and the threshold ``StreamingSampler``, an assumption for
  samples built elsewhere). ``tau`` must not depend on the data: bottom-k samples are refused.
* :func:`sanitize_keys` keeps a sampled key of frequency ``i`` with the exact rational probability
  ``N_i / (Q_i 2**(B - 62))``, ``N_i`` from :func:`~.keys.grid_reporting_table` on the grid
  ``2**-B`` (``B = 62`` while ``delta >= 2**-62`` per key, ``62 + ceil(log2(1 / delta))``
  below, :mod:`privhist.mechanisms._grid`), so the end-to-end reporting probability is exactly
  ``N_i / 2**B`` and both DP constraints of Algorithm 3 hold exactly between ``i - 1`` and
  ``i`` (with a rational ``r <= e^eps``). On ``2**-62`` the draw is
  :func:`privhist.noise.bernoulli_rational`; on finer grids one 64-bit word is compared with the
  first binary digits of the probability and further words are drawn only on a tie
  (:class:`~privhist.mechanisms._grid.LazyBernoulliTable`), so any delta is accepted.
* :func:`sanitize_frequencies` draws a token ``j`` for a sampled key of frequency ``i`` with
  probability exactly ``E_(i,j) / Q_i`` (a uniform integer below ``Q_i`` compared with the
  integer cumulative sums of row ``i``), so the end-to-end probability of ``(reported, j)`` is
  exactly ``E_(i,j) / 2**62``. The integer matrix ``E`` is *certified* before use by
  :func:`verify_frequency_rows`: both hockey-stick divergences between every pair of
  neighbouring rows, "not reported" included, are bounded by ``delta`` in integer arithmetic
  with ``r <= e^eps``. With ``Q_i = 2**62`` for every ``i`` (no sampling) ``E`` is the certified
  exact shift of Lemma 5.2; otherwise it is Algorithm 4 in double precision run with a slightly
  smaller ``delta' = delta - s``, rounded down to the grid, with ``s`` doubled until the
  certificate holds (``s`` starts at ``min(16 (m + 6) 2**-53 (1 + e^eps), delta / 64)``, about
  ``1e-11`` for ``m = 2000``; reporting probabilities lose a relative ``s / delta`` at most).
  Below ``delta = 2**-42`` per key, where doubles cannot resolve delta next to entries near 1,
  the rows are built in integers (Algorithm 4) or high precision (Algorithm 5) on the grid
  ``2**-B``, ``B = 62 + ceil(log2(1 / delta)) + ceil(eps / ln 2)``, certified the same way, and
  drawn exactly (:mod:`.fine_rows`), so any delta is accepted; the same path takes over when the
  double-precision rows fail their certificate (very large epsilon).
  The matrix is built up to a public ``max_frequency``; a sampled frequency above it is an error,
  so frequencies must be clamped to that bound *before* sampling (as ``privhist sample`` does):
  clamping after sampling would change the inclusion probabilities.

``rule="max-separation"`` replaces Algorithm 4 by Algorithm 5 (maximum separation over every DP
frequency sanitiser, Theorem 5.1), certified the same way
(:mod:`.max_separation_release`); its tokens index up to ``3 m`` intervals and each carries its
sanitized value (the interval's right end).

Each reported key carries the MLE estimate (equation 9) and the exact bias and variance of that
estimator at the frequency the MLE attributes to its token (all computed from ``E / 2**62``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import InputDataError, ValidationError
from privhist.core.random import RandomSource
from privhist.core.validation import check_delta, check_epsilon, check_positive_int
from privhist.mechanisms._grid import ONE, ONE_BITS, LazyBernoulliTable
from privhist.mechanisms.sampling.pws.certify import certify_float_rows, verify_frequency_rows
from privhist.mechanisms.sampling.pws.estimators import estimator_stats, mle_estimator
from privhist.mechanisms.sampling.pws.fine_rows import (
    certified_fine_rows,
    draw_tokens,
    fine_to_float,
    needs_fine_grid,
    split_cumulative,
    verify_fine_rows,
)
from privhist.mechanisms.sampling.pws.frequencies import (
    exact_shift_grid,
    exact_shift_pmf,
    integer_token_matrix,
)
from privhist.mechanisms.sampling.pws.keys import grid_reporting_table, threshold_L
from privhist.mechanisms.sampling.pws.max_separation_release import (
    check_rule,
    max_separation_limit,
    max_separation_rows,
)
from privhist.mechanisms.sampling.pws.schemes import WeightedSample
from privhist.noise import bernoulli_rational

F64 = npt.NDArray[np.float64]
#: largest max_frequency for the (m+1) x (m+1) frequency matrix (about 200 MB of doubles)
MAX_MATRIX = 5000
#: the same below delta = 2**-42, where the entries are Python integers (measured at m = 2000 and
#: delta = 1e-20: 6 s and 430 MB; the memory grows like m**2)
MAX_FINE_MATRIX = 2000


def matrix_limit(delta: float, rule: str = "integer-tokens") -> int:
    """The largest ``max_frequency`` the frequency sanitiser accepts at ``delta`` per key.

    >>> matrix_limit(1e-6), matrix_limit(1e-20), matrix_limit(1e-20, "max-separation")
    (5000, 2000, 200)
    """
    if check_rule(rule, "matrix_limit", "rule") == "max-separation":
        return max_separation_limit(delta)
    return MAX_FINE_MATRIX if needs_fine_grid(delta) else MAX_MATRIX


I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class PrivateSample:
    """A sanitized sample: keys, tokens (0 when only keys are released), MLE estimates of the
    frequency, and the exact bias / variance of the estimate per reported value."""

    keys: npt.NDArray[Any]
    tokens: I64
    estimates: F64
    bias: F64
    variance: F64
    metadata: dict[str, Any] = field(default_factory=dict)
    #: the sanitized value of each token (Algorithm 5: its interval's right end; else the token;
    #: NaN when only keys are released)
    values: F64 = field(default_factory=lambda: np.zeros(0))

    def __len__(self) -> int:
        return int(self.keys.shape[0])


def _check(sample: Any, epsilon: float, delta: float, fn: str) -> tuple[float, float]:
    if not isinstance(sample, WeightedSample):
        raise ValidationError("sample", fn, "a WeightedSample", type(sample).__name__)
    if not sample.fixed_threshold:
        raise ValidationError(
            "sample",
            fn,
            "a threshold sample with a data-independent tau (a bottom-k sample's tau is the "
            "(k+1)-th smallest rank, which depends on the data)",
            "a bottom-k sample",
        )
    return check_epsilon(epsilon, fn), check_delta(delta, fn, positive=True)


def sanitize_keys(
    sample: WeightedSample, epsilon: float, delta: float, rng: RandomSource
) -> PrivateSample:
    """Algorithm 2, sanitized keys: keep a sampled key of frequency ``i`` with probability
    ``N_i / Q_i`` (module notes). No frequency information is released, so the estimates, bias
    and variance are NaN."""
    fn = "sanitize_keys"
    eps, dl = _check(sample, epsilon, delta, fn)
    f = sample.frequencies
    bits, Q, nums = key_table(sample, eps, dl, int(f.max()) if f.size else 1)
    idx = np.minimum(f, Q.shape[0] - 1)
    if not f.size:
        keep = np.zeros(0, dtype=bool)
    elif bits == ONE_BITS:
        keep = bernoulli_rational(nums[idx], np.maximum(Q[idx], 1), rng)
    else:
        # P[kept | sampled] = (N_i / 2**B) / (Q_i / 2**62) = N_i / (Q_i 2**(B - 62)), decided
        # lazily against its exact binary digits (one word per key but on a tie)
        used, where = np.unique(idx, return_inverse=True)
        table = LazyBernoulliTable(
            [int(nums[j]) for j in used], [max(int(Q[j]), 1) << (bits - ONE_BITS) for j in used]
        )
        keep = table.draw(where.astype(np.int64).ravel(), rng)
    n = int(keep.sum())
    nan = np.full(n, np.nan)
    return PrivateSample(
        sample.keys[keep],
        np.zeros(n, dtype=np.int64),
        nan,
        nan.copy(),
        nan.copy(),
        {"sanitizer": "keys", "epsilon": eps, "delta": dl, "certified": True},
        nan.copy(),
    )


#: longest table of key numerators built for one sample (frequencies 0..MAX_KEY_TABLE)
MAX_KEY_TABLE = 50_000_000


def key_numerators(
    sample: WeightedSample, epsilon: float, delta: float, max_frequency: int
) -> tuple[I64, I64]:
    """``(Q, N)`` of :func:`key_table` on the ``2**-62`` grid (``delta >= 2**-62`` per key)."""
    bits, Q, N = key_table(sample, epsilon, delta, max_frequency)
    if bits != ONE_BITS:
        raise ValidationError(
            "delta", "key_numerators", ">= 2**-62 per key (key_table takes any delta)", delta
        )
    out: I64 = N.astype(np.int64)
    return Q, out


def key_table(
    sample: WeightedSample, epsilon: float, delta: float, max_frequency: int
) -> tuple[int, I64, npt.NDArray[Any]]:
    """``(B, Q, N)`` for frequencies ``0..c`` with ``c <= max_frequency`` such that every
    frequency above ``c`` has ``Q = 2**62`` and ``N = 2**B`` (so index ``min(i, c)`` serves
    every ``i``): ``Q_i / 2**62`` is the sampling probability and ``N_i / 2**B`` the reporting
    probability of :func:`~.keys.grid_reporting_table` (``B = 62`` while ``delta >= 2**-62``,
    finer below, so any delta is accepted).

    Once ``Q_s = 2**62`` (found by a search that depends only on the scheme, ``tau`` and the
    power), the reporting numerators reach ``2**62`` within ``2 L + 2`` more steps (Lemma 4.2) and
    stay there; the table stops at that point, so its size depends on the public parameters and
    not on how large the sampled frequencies are. A table longer than ``MAX_KEY_TABLE`` is
    refused (clamp frequencies to a public bound before sampling).
    """
    fn = "sanitize_keys"
    m = max(1, int(max_frequency))

    def full(i: int) -> bool:
        return bool(sample.grid_q([i])[0] == ONE)

    # the first i with Q_i = 2**62, searched by doubling then bisection (Q is non-decreasing)
    hi = 1
    while hi < m and not full(hi):
        hi *= 2
    if full(min(hi, m)):
        lo = hi // 2
        hi = min(hi, m)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if full(mid) else (mid, hi)
        cap = min(m, hi + 2 * math.ceil(max(threshold_L(epsilon, delta), 0.0)) + 4)
    else:
        cap = m
    while True:
        if cap > MAX_KEY_TABLE:
            raise InputDataError(
                f"{fn}: the reporting table would need {cap} entries (tiny tau with very large "
                "frequencies); clamp frequencies to a public bound before sampling"
            )
        Q = sample.grid_q(np.arange(cap + 1))
        bits, N = grid_reporting_table(epsilon, delta, Q)
        if cap >= m or N[cap] == 1 << bits:
            return bits, Q, N
        cap = min(m, 2 * cap)  # pragma: no cover - Lemma 4.2 makes the first cap enough


@dataclass(frozen=True)
class FrequencySanitizer:
    """The token distribution and estimator table for one ``(Q, eps, delta)`` up to ``m``.

    ``end_to_end[i, j]`` (``j >= 1``) is the integer ``E_(i,j)``: a key of frequency ``i`` is
    sampled and reported with token ``j`` with probability ``E_(i,j) / 2**bits`` (``bits = 62``
    unless delta per key is below ``2**-42``); column 0 holds the not-reported mass.
    ``inclusion[i] = Q_i``. ``matrix = end_to_end / 2**bits`` as floats. ``rows`` are the
    conditional rows ``floor(E_(i,j) 2**62 / Q_i)`` for display (the draw uses ``E`` and ``Q``
    exactly), and ``cumulative[i, c] = sum of E_(i, 1..c+1)`` (its high part on a finer grid).
    """

    matrix: F64  # P[i, j] end-to-end
    rows: I64  # conditional rows over 2**62 (column 0 = not reported), for display
    estimator: F64
    bias: F64
    variance: F64
    mle_frequency: I64
    exact: bool  # the rows are the exact shift (no sampling)
    cumulative: I64  # cumulative[i, c] = sum of end_to_end[i, 1 .. c+1]
    end_to_end: npt.NDArray[Any] = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))
    inclusion: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    certified: bool = False
    delta_used: float = 0.0
    rule: str = "integer-tokens"
    #: token values: ``token_values[j]`` for token ``j`` (entry 0 unused)
    token_values: F64 = field(default_factory=lambda: np.zeros(0))
    #: the grid ``2**-bits`` of ``end_to_end``: 62, or finer below ``delta = 2**-42`` per key
    #: (:mod:`.fine_rows`; then ``end_to_end`` holds Python ints, ``cumulative`` the high parts
    #: ``C >> (bits - 62)`` of the cumulative sums and ``cumulative_low`` the rest)
    bits: int = ONE_BITS
    cumulative_low: npt.NDArray[np.object_] | None = None


_CACHE: dict[tuple[bytes, float, float, str], FrequencySanitizer] = {}


def _cached_sanitizer(Q: I64, eps: float, dl: float, rule: str) -> FrequencySanitizer:
    key = (np.ascontiguousarray(Q).tobytes(), eps, dl, rule)
    if key not in _CACHE:
        if len(_CACHE) >= 8:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = grid_frequency_sanitizer(Q, eps, dl, rule=rule)
    return _CACHE[key]


def _shift_rows(d: npt.NDArray[Any], m: int) -> npt.NDArray[Any]:
    """Rows ``0..m`` of the shift mechanism with pmf ``d`` (token ``i - K``, ``K ~ d``), of
    ``d``'s dtype (int64 on ``2**-62``, Python ints on a finer grid); column 0 left at 0."""
    E = np.zeros((m + 1, m + 1), dtype=d.dtype)
    for i in range(1, m + 1):
        k = np.arange(0, min(i, d.shape[0]))
        E[i, i - k] = d[k]
    return E


def _integer_token_rows(Q: I64, eps: float, dl: float) -> tuple[I64, float]:
    """Algorithm 4 in floats with ``delta - s``, rounded down, ``s`` doubled until certified
    (:func:`certify_float_rows`)."""
    m = Q.shape[0] - 1
    qf = Q.astype(np.float64) / float(ONE)

    def build(d: float) -> tuple[F64, None]:
        return np.asarray(integer_token_matrix(qf, eps, d), dtype=np.float64), None

    # start above the float pre-check's error bound, so most pairs are cleared without big ints
    start = min(16 * (m + 6) * 2.0**-53 * (1 + math.exp(eps)), dl / 64)
    E, used, _ = certify_float_rows(build, Q, eps, dl, start, "frequency_sanitizer")
    return E, used


def grid_frequency_sanitizer(
    Q: npt.ArrayLike, epsilon: float, delta: float, *, rule: str = "integer-tokens"
) -> FrequencySanitizer:
    """The certified sanitizer for exact inclusion numerators ``Q = (Q_0 = 0, ..., Q_m)``
    (module notes): with ``rule="integer-tokens"`` (Algorithm 4) the exact shift when every
    ``Q_i = 2**62``, else certified Algorithm 4; with ``rule="max-separation"`` certified
    Algorithm 5 (the paper's numbers, ``"algorithm4"`` and ``"algorithm5"``, are accepted too).
    Below ``delta = 2**-42`` the rows are built on a finer grid (:mod:`.fine_rows`), so any
    delta is accepted."""
    fn = "grid_frequency_sanitizer"
    eps, dl = check_epsilon(epsilon, fn), check_delta(delta, fn, positive=True)
    rule = check_rule(rule, fn, "rule")
    Qa = np.asarray(Q, dtype=np.int64)
    if Qa.ndim != 1 or Qa.shape[0] < 2 or Qa[0] != 0 or (np.diff(Qa) < 0).any():
        raise ValidationError("Q", fn, "non-decreasing integers with Q_0 = 0", Qa.shape)
    if (Qa < 0).any() or (Qa > ONE).any():
        raise ValidationError("Q", fn, "integers in [0, 2**62]", Qa.shape)
    m = Qa.shape[0] - 1
    if m > matrix_limit(dl, rule):
        raise ValidationError(
            "max_frequency", fn, f"<= {matrix_limit(dl, rule)} with {rule} at this delta", m
        )
    no_sampling = bool((Qa[1:] == ONE).all())
    values = np.arange(m + 1, dtype=np.float64)
    bits = ONE_BITS
    E: npt.NDArray[Any]
    if needs_fine_grid(dl) and rule == "integer-tokens" and no_sampling:
        bits, d = exact_shift_grid(Fraction(eps), Fraction(dl))
        E = _shift_rows(np.array(d, dtype=object), m)
        E[:, 0] = (1 << bits) - E[:, 1:].sum(axis=1)
        used = dl
        if not verify_fine_rows(E, Qa, eps, dl, bits):  # pragma: no cover - certified pmf
            raise ValidationError("delta", fn, "a certified shift pmf", dl)
    else:
        try:
            if needs_fine_grid(dl):
                raise _NeedsFineGrid
            if rule == "max-separation":
                E, used, x = max_separation_rows(Qa, eps, dl)
                values = np.concatenate(([0.0], x))
                no_sampling = False  # not the shift rows
            elif no_sampling:
                d62 = np.array(exact_shift_pmf(Fraction(eps), Fraction(dl)), dtype=np.int64)
                E, used = _shift_rows(d62, m), dl
                if not verify_frequency_rows(E, Qa, eps, dl):  # pragma: no cover - certified
                    raise ValidationError("delta", fn, "a certified shift pmf", dl)
            else:
                E, used = _integer_token_rows(Qa, eps, dl)
        except (_NeedsFineGrid, ValidationError):
            # below 2**-42, or double-precision rows that fail their certificate (huge eps)
            if rule == "max-separation" and m > max_separation_limit(1e-300):
                raise
            bits, E, used, x_fine = certified_fine_rows(Qa, eps, dl, rule)
            if x_fine is not None:
                values = np.concatenate(([0.0], x_fine))
            no_sampling = False
    low: npt.NDArray[np.object_] | None = None
    if bits == ONE_BITS:
        E[:, 0] = ONE - E[:, 1:].sum(axis=1)
        P = E.astype(np.float64) / float(ONE)
        cum = np.cumsum(E[:, 1:], axis=1, dtype=np.int64)
    else:
        P = fine_to_float(E, bits)
        cum, low = split_cumulative(E, bits)
    qf = Qa.astype(np.float64)[:, None] / float(ONE)
    cols = E.shape[1] - 1
    ratio = np.divide(P[:, 1:], qf, out=np.zeros((m + 1, cols)), where=qf > 0)
    cond = np.zeros((m + 1, cols + 1), dtype=np.int64)
    cond[:, 1:] = np.floor(np.minimum(ratio, 1.0) * float(ONE)).astype(np.int64)
    cond[:, 1:] = np.minimum(cond[:, 1:], ONE)
    over = np.maximum(cond[:, 1:].sum(axis=1) - ONE, 0)  # display rows sum to 2**62
    cond[np.arange(m + 1), 1 + np.argmax(cond[:, 1:], axis=1)] -= over
    cond[:, 0] = ONE - cond[:, 1:].sum(axis=1)
    a = mle_estimator(P)
    stats = estimator_stats(P, a)
    best = 1 + np.argmax(P[1:, :], axis=0)
    return FrequencySanitizer(
        P,
        cond,
        a,
        stats.bias,
        stats.variance,
        best,
        no_sampling,
        cum,
        E,
        Qa,
        True,
        used,
        rule,
        values,
        bits,
        low,
    )


class _NeedsFineGrid(Exception):
    """Internal: the rows are built on the fine grid."""


def frequency_sanitizer(
    q: npt.ArrayLike, epsilon: float, delta: float, *, no_sampling: bool = False
) -> FrequencySanitizer:
    """Build the certified sanitizer for frequencies ``0..m`` from float inclusion probabilities
    ``q = (q_0..q_m)`` (taken as ``Q_i = floor(q_i 2**62)``); ``no_sampling`` requires
    ``q_i = 1`` for ``i >= 1``."""
    fn = "frequency_sanitizer"
    qa = np.asarray(q, dtype=np.float64)
    Q = np.minimum(np.floor(qa * float(ONE)), float(ONE)).astype(np.int64)
    if no_sampling and not (Q[1:] == ONE).all():
        raise ValidationError("no_sampling", fn, "q_i = 1 for every i >= 1", "some q_i < 1")
    return grid_frequency_sanitizer(Q, epsilon, delta)


def sanitize_frequencies(
    sample: WeightedSample,
    epsilon: float,
    delta: float,
    rng: RandomSource,
    *,
    max_frequency: int = 2000,
    no_sampling: bool = False,
    rule: str = "integer-tokens",
) -> PrivateSample:
    """Algorithm 2, sanitized keys and frequencies (see the module notes). ``no_sampling``
    asserts that the sample holds every key (``q_i = 1``); it is checked against the sample's
    inclusion rule, and the exact shift rows are used whenever ``q_i = 1`` for all ``i`` (with
    ``rule="integer-tokens"``, Algorithm 4). ``rule="max-separation"`` draws from certified
    Algorithm 5 rows."""
    fn = "sanitize_frequencies"
    eps, dl = _check(sample, epsilon, delta, fn)
    m = check_positive_int(max_frequency, fn, "max_frequency")
    rule = check_rule(rule, fn, "rule")
    if m > matrix_limit(dl, rule):
        raise ValidationError(
            "max_frequency", fn, f"<= {matrix_limit(dl, rule)} with {rule} at this delta", m
        )
    Q = sample.grid_q(np.arange(m + 1))
    if no_sampling and not (Q[1:] == ONE).all():
        raise ValidationError(
            "no_sampling",
            fn,
            "a sample with inclusion probability 1 at every frequency up to max_frequency",
            f"tau={sample.tau} ({sample.scheme})",
        )
    f = sample.frequencies
    if f.size and int(f.max()) > m:
        raise InputDataError(
            f"{fn}: a sampled frequency exceeds max_frequency={m}; clamp frequencies to a "
            "public bound before sampling"
        )
    san = _cached_sanitizer(Q, eps, dl, rule)
    cum = san.cumulative  # cum[i, c] = E_(i,1) + ... + E_(i,c+1)
    n = f.shape[0]
    bound = Q[f]
    # V uniform on [0, Q_i): the top 62 bits of a word where Q_i = 2**62, rejection elsewhere
    v = (rng.uint64(n) >> np.uint64(2)).astype(np.int64)
    part = np.nonzero(bound < ONE)[0]
    if part.size:
        v[part] = rng.uniform_below(np.maximum(bound[part], 1))
    # token j = #{columns c : cum[f, c] <= V} + 1; on a finer grid v is V's high part and the
    # low part is drawn only on a tie (:func:`.fine_rows.draw_tokens`)
    j = draw_tokens(f, v, cum, san.cumulative_low, san.bits, rng)
    return _private_sample(sample, san, j, bound, m, eps, dl)


def _private_sample(
    sample: WeightedSample,
    san: FrequencySanitizer,
    j: I64,
    bound: I64,
    m: int,
    eps: float,
    dl: float,
) -> PrivateSample:
    cols = san.end_to_end.shape[1] - 1
    tokens = np.where((j <= cols) & (bound > 0), j, 0).astype(np.int64)
    keep = tokens > 0
    t = tokens[keep]
    return PrivateSample(
        sample.keys[keep],
        t,
        san.estimator[t],
        san.bias[san.mle_frequency[t]],
        san.variance[san.mle_frequency[t]],
        {
            "sanitizer": "keys and frequencies",
            "epsilon": eps,
            "delta": dl,
            "max_frequency": m,
            "exact_rows": san.exact,
            "certified": san.certified,
            "frequency_rule": san.rule,
            "tokens": cols,
            "delta_used": san.delta_used,
            "grid_bits": san.bits,
        },
        san.token_values[t],
    )
