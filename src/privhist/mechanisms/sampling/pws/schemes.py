"""Non-private weighted sampling: threshold and bottom-k samples (ppswor and priority).

Cohen, Geri, Sarlos & Stemmer, "Differentially Private Weighted Sampling", Section 3.1 and
Algorithm 1. Every key ``x`` with frequency ``w_x >= 1`` draws an independent seed ``u_x`` from a
distribution ``D`` and is sampled when ``u_x < tau f(w_x)``, so a key of frequency ``i`` is sampled
with probability (equation 1)

    q_i = Pr_{u ~ D}[u < tau f(i)],

``D = Exp(1)`` for ppswor (``q_i = 1 - exp(-tau f(i))``) and ``D = U[0, 1]`` for priority / Poisson
PPS (``q_i = min(1, tau f(i))``). ``f`` is any non-decreasing function of frequency; the built-in
family is ``f(i) = i**p`` with ``p >= 0`` (``p = 0`` samples keys uniformly). The bottom-k versions
keep the ``k`` keys of smallest rank ``u_x / f(w_x)`` and, conditioned on the ``(k+1)``-th smallest
rank ``tau``, are threshold samples with threshold ``tau`` (the usual conditioning argument for
order samples); :func:`bottom_k_sample` returns that ``tau``.

This step is the *non-private* sampler; privacy comes afterwards from the sanitiser, whose
randomness is exact. Frequencies must be positive integers: the guarantee of the sanitiser is for
element-level neighbours, whose frequencies move by one.

Exact inclusion. The sanitisers' guarantee is a statement about the end-to-end probability
``q_i p_i``, so it needs the *actual* inclusion probability of the sampler, not a floating-point
approximation of equation (1). A threshold sample therefore includes a key of frequency ``i``
exactly when a uniform 62-bit word ``W`` is below the grid value ``Q_i = floor(q_i 2**62)``
(:func:`grid_inclusion`), so the inclusion probability is exactly ``Q_i / 2**62`` (within
``2**-62`` of equation 1), and the sanitisers use the same integers ``Q_i``. ``Q_i`` is computed
from ``q_i`` one frequency at a time with Python floats, so the sampler and the sanitiser get
identical integers. The recorded seed is ``u = (W + 1/2) 2**-62`` (priority) or ``-log(1 - u)``
(ppswor, an Exp(1) seed with ``seed < tau f(i)`` iff ``u < q_i`` up to rounding).

Bottom-k samples (and the bottom-k :class:`StreamingSampler`) are samples whose threshold, the
``(k+1)``-th smallest rank, depends on the data; the sanitisers' guarantee is for a fixed ``tau``
(Section 3.1: "our methods apply with a fixed threshold"), so such samples are marked
``fixed_threshold=False`` and the sanitisers refuse them. Use a data-independent ``tau``, or one
chosen privately, e.g. ``tau = k / ||f(w)||_1`` from a private total as the paper suggests.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from privhist.core.errors import InputDataError, ValidationError
from privhist.core.random import RandomSource
from privhist.core.validation import check_positive_int

Scheme = Literal["ppswor", "priority"]
SCHEMES: tuple[str, ...] = ("ppswor", "priority")
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


def check_scheme(scheme: Any, function: str) -> Scheme:
    """Return ``scheme`` if it is ``"ppswor"`` or ``"priority"``."""
    if scheme not in SCHEMES:
        raise ValidationError("scheme", function, "'ppswor' or 'priority'", scheme)
    return scheme  # type: ignore[no-any-return]


def check_tau(tau: Any, function: str) -> float:
    """Return the threshold ``tau`` as a float if it is finite and > 0."""
    if isinstance(tau, bool) or not isinstance(tau, int | float | np.floating | np.integer):
        raise ValidationError("tau", function, "a finite number > 0", tau)
    t = float(tau)
    if not np.isfinite(t) or t <= 0:
        raise ValidationError("tau", function, "a finite number > 0", tau)
    return t


def check_power(power: Any, function: str) -> float:
    """Return the exponent ``p`` of ``f(i) = i**p`` if it is a finite number >= 0."""
    if isinstance(power, bool) or not isinstance(power, int | float | np.floating | np.integer):
        raise ValidationError("power", function, "a finite number >= 0", power)
    p = float(power)
    if not np.isfinite(p) or p < 0:
        raise ValidationError("power", function, "a finite number >= 0", power)
    return p


def check_frequencies(freqs: Any, function: str, name: str = "frequencies") -> I64:
    """Frequencies as int64, all positive integers (weights must be integer frequencies for the
    element-level guarantee)."""
    arr = np.asarray(freqs)
    if arr.ndim != 1:
        raise ValidationError(name, function, "a one-dimensional array", f"shape {arr.shape}")
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    expected = "positive integer frequencies (the guarantee is for integer element counts)"
    if arr.dtype == np.bool_ or arr.dtype.kind not in "iuf":
        raise ValidationError(name, function, expected, f"dtype {arr.dtype}")
    bad = arr < 1
    if arr.dtype.kind == "f":
        bad = bad | ~np.isfinite(arr) | (arr != np.floor(arr))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValidationError(name, function, expected, f"{arr[i]} at index {i}")
    if (arr > 2**62).any():
        i = int(np.argmax(arr > 2**62))
        raise ValidationError(name, function, "frequencies <= 2**62", f"{arr[i]} at index {i}")
    return arr.astype(np.int64)


def weight(freqs: npt.ArrayLike, power: float = 1.0) -> F64:
    """``f(i) = i**p`` (with ``f(0) = 0`` also for ``p = 0``)."""
    w = np.asarray(freqs, dtype=np.float64)
    out: F64 = np.where(w > 0, np.power(w, power), 0.0)
    return out


def inclusion_probability(
    freqs: npt.ArrayLike, scheme: Scheme, tau: float, power: float = 1.0
) -> F64:
    """``q_i`` of equation (1) for each frequency in ``freqs`` (0 for frequency 0).

    >>> inclusion_probability([0, 1, 2, 10], "priority", 0.25).tolist()
    [0.0, 0.25, 0.5, 1.0]
    >>> round(float(inclusion_probability([1], "ppswor", 1.0)[0]), 6)  # 1 - 1/e
    0.632121
    """
    fn = "inclusion_probability"
    scheme = check_scheme(scheme, fn)
    t, p = check_tau(tau, fn), check_power(power, fn)
    x = t * weight(freqs, p)
    if scheme == "ppswor":
        out: F64 = -np.expm1(-x)
        return out
    return np.minimum(1.0, x)


def inclusion_probabilities(
    max_frequency: int, scheme: Scheme, tau: float, power: float = 1.0
) -> F64:
    """``q = (q_0, ..., q_m)`` for ``m = max_frequency`` (``q_0 = 0``)."""
    m = check_positive_int(max_frequency, "inclusion_probabilities", "max_frequency", minimum=0)
    return inclusion_probability(np.arange(m + 1), scheme, tau, power)


def check_inclusion(q: Any, function: str) -> F64:
    """Validate a custom ``q = (q_0, q_1, ..., q_m)``: probabilities in [0, 1], ``q_0 = 0``,
    non-decreasing (Section 3.1: the methods apply to any non-decreasing ``q``)."""
    arr = np.asarray(q, dtype=np.float64)
    if arr.ndim != 1 or arr.size < 2:
        raise ValidationError("q", function, "a 1-d array (q_0, q_1, ...) of length >= 2", q)
    if not np.isfinite(arr).all() or (arr < 0).any() or (arr > 1).any():
        raise ValidationError("q", function, "probabilities in [0, 1]", q)
    if arr[0] != 0:
        raise ValidationError("q", function, "q_0 = 0 (keys of frequency 0 are never sampled)", q)
    dec = np.diff(arr) < 0
    if dec.any():
        i = int(np.argmax(dec))
        raise ValidationError(
            "q", function, "non-decreasing", f"q_{i} = {arr[i]} > q_{i + 1} = {arr[i + 1]}"
        )
    return arr


def uniform_seeds(n: int, rng: RandomSource) -> F64:
    """``n`` uniforms in (0, 1): exact 53-bit words ``b``, ``u = (b + 1/2) / 2**53``."""
    words = rng.uint64(n) >> np.uint64(11)
    out: F64 = (words.astype(np.float64) + 0.5) * 2.0**-53
    return out


def seeds(n: int, scheme: Scheme, rng: RandomSource) -> F64:
    """Seeds ``u_x`` of Algorithm 1: Exp(1) (``-log u``) for ppswor, U(0, 1) for priority."""
    u = uniform_seeds(n, rng)
    if check_scheme(scheme, "seeds") == "ppswor":
        out: F64 = -np.log(u)
        return out
    return u


def grid_inclusion(freqs: npt.ArrayLike, scheme: Scheme, tau: float, power: float = 1.0) -> I64:
    """``Q_i = floor(q_i 2**62)`` for each frequency: a threshold sample includes a key of
    frequency ``i`` with probability exactly ``Q_i / 2**62`` (see the module notes).

    Each distinct frequency is mapped once with Python floats (``x = tau * i**p``,
    ``q = -expm1(-x)`` or ``min(1, x)``), so every caller gets the same integers.

    >>> grid_inclusion([0, 1, 4, 5], "priority", 0.25).tolist() == [0, 2**60, 2**62, 2**62]
    True
    """
    fn = "grid_inclusion"
    scheme = check_scheme(scheme, fn)
    t, p = check_tau(tau, fn), check_power(power, fn)
    f = np.asarray(freqs, dtype=np.int64)
    uniq, inv = np.unique(f, return_inverse=True)
    vals = np.zeros(uniq.shape[0], dtype=np.int64)
    for n, i in enumerate(uniq.tolist()):
        if i <= 0:
            continue
        x = t * (float(i) ** p)
        q = -math.expm1(-x) if scheme == "ppswor" else min(1.0, x)
        vals[n] = min(math.floor(q * _ONE_F), _ONE)
    out: I64 = vals[inv.reshape(f.shape)]
    return out


_ONE = 1 << 62
_ONE_F = float(_ONE)


def _exact_threshold_keep(
    f: I64, scheme: Scheme, tau: float, power: float, rng: RandomSource
) -> tuple[npt.NDArray[np.bool_], F64]:
    """One 62-bit word ``W`` per key: kept iff ``W < Q(f)``; and the recorded seeds."""
    words = (rng.uint64(f.shape[0]) >> np.uint64(2)).astype(np.int64)
    keep = words < grid_inclusion(f, scheme, tau, power)
    u = (words.astype(np.float64) + 0.5) * 2.0**-62
    seed: F64 = -np.log1p(-u) if scheme == "ppswor" else u
    return keep, seed


@dataclass(frozen=True)
class WeightedSample:
    """A non-private weighted sample: keys, their (true) frequencies, and the inclusion rule.

    ``q`` maps frequencies to inclusion probabilities (equation 1 with this ``tau``) and
    ``grid_q`` to the exact integers ``Q_i`` the sanitisers of :mod:`.sanitize` use: their
    guarantee assumes each key of frequency ``i`` was included independently with probability
    exactly ``Q_i / 2**62`` (true of :func:`threshold_sample` and the threshold
    :class:`StreamingSampler`). ``fixed_threshold`` is False for bottom-k samples, whose ``tau``
    depends on the data; the sanitisers refuse those.
    """

    keys: npt.NDArray[Any]
    frequencies: I64
    scheme: Scheme
    tau: float
    power: float = 1.0
    seeds: F64 = field(default_factory=lambda: np.zeros(0))
    fixed_threshold: bool = True

    def q(self, freqs: npt.ArrayLike) -> F64:
        """Inclusion probabilities of keys with frequencies ``freqs`` (equation 1, floats)."""
        return inclusion_probability(freqs, self.scheme, self.tau, self.power)

    def grid_q(self, freqs: npt.ArrayLike) -> I64:
        """The exact inclusion numerators ``Q_i`` over ``2**62`` (:func:`grid_inclusion`)."""
        return grid_inclusion(freqs, self.scheme, self.tau, self.power)

    def __len__(self) -> int:
        return int(self.keys.shape[0])


def aggregated(
    keys: npt.ArrayLike,
    freqs: npt.ArrayLike,
    function: str,
    *,
    aggregate: bool = False,
    name: str = "frequencies",
) -> tuple[npt.NDArray[Any], I64]:
    """Validate aggregated ``(key, frequency)`` data: repeated keys are an error unless
    ``aggregate`` (then their frequencies are summed); ``name`` is the frequencies' parameter in
    an error (the weight column of a release)."""
    k = np.asarray(keys)
    f = check_frequencies(freqs, function, name)
    if k.ndim != 1 or k.shape[0] != f.shape[0]:
        raise ValidationError(
            "keys", function, f"a 1-d array as long as frequencies ({f.shape[0]})", k.shape
        )
    if k.size == 0:
        return k, f
    uniq, inv, cnt = np.unique(k, return_inverse=True, return_counts=True)
    if uniq.shape[0] != k.shape[0]:
        if not aggregate:
            dup = uniq[int(np.argmax(cnt > 1))]
            raise InputDataError(
                f"{function}: key {dup!r} appears more than once in aggregated input "
                "(aggregate it first, or ask for aggregation)"
            )
        f = np.bincount(inv, weights=f, minlength=uniq.shape[0]).astype(np.int64)
        k = uniq
    return k, f


def threshold_sample(
    keys: npt.ArrayLike,
    freqs: npt.ArrayLike,
    scheme: Scheme,
    tau: float,
    rng: RandomSource,
    *,
    power: float = 1.0,
    aggregate: bool = False,
) -> WeightedSample:
    """Algorithm 1 (threshold sampling) on aggregated data.

    >>> from privhist.core.random import SeededRandom
    >>> s = threshold_sample(["a", "b"], [1000, 1], "priority", 1.0, SeededRandom(1))
    >>> s.keys.tolist(), s.frequencies.tolist()
    (['a', 'b'], [1000, 1])
    """
    fn = "threshold_sample"
    scheme, t, p = check_scheme(scheme, fn), check_tau(tau, fn), check_power(power, fn)
    k, f = aggregated(keys, freqs, fn, aggregate=aggregate)
    keep, u = _exact_threshold_keep(f, scheme, t, p, rng)
    order = np.argsort(k[keep], kind="stable")
    return WeightedSample(k[keep][order], f[keep][order], scheme, t, p, u[keep][order])


def bottom_k_sample(
    keys: npt.ArrayLike,
    freqs: npt.ArrayLike,
    k: int,
    scheme: Scheme,
    rng: RandomSource,
    *,
    power: float = 1.0,
    aggregate: bool = False,
) -> WeightedSample:
    """Bottom-k (order) sample: the ``k`` keys of smallest rank ``u_x / f(w_x)`` (ppswor with
    Exp seeds, priority / sequential Poisson with uniform seeds). The returned ``tau`` is the
    ``(k+1)``-th smallest rank (infinite when there are at most ``k`` keys), the threshold that
    makes the sample a threshold sample conditionally on it. That ``tau`` depends on the data,
    so the sample is marked ``fixed_threshold=False`` and the sanitisers refuse it."""
    fn = "bottom_k_sample"
    kk = check_positive_int(k, fn, "k")
    scheme, p = check_scheme(scheme, fn), check_power(power, fn)
    keys_a, f = aggregated(keys, freqs, fn, aggregate=aggregate)
    u = seeds(f.shape[0], scheme, rng)
    ranks = u / weight(f, p)
    if f.shape[0] <= kk:
        tau = float("inf")
        idx = np.arange(f.shape[0])
    else:
        part = np.argpartition(ranks, kk)
        idx, tau = part[:kk], float(ranks[part[kk]])
    order = idx[np.argsort(keys_a[idx], kind="stable")]
    return WeightedSample(keys_a[order], f[order], scheme, tau, p, u[order], False)


class StreamingSampler:
    """Bottom-k or threshold sampling of ``(key, frequency)`` pairs that arrive in batches (one
    pass, memory ``O(k)`` for bottom-k, ``O(sample)`` for threshold). Each key must arrive once
    (aggregated stream); a repeated key is an error.

    >>> from privhist.core.random import SeededRandom
    >>> s = StreamingSampler("ppswor", SeededRandom(2), k=2)
    >>> s.add(["a", "b", "c"], [5, 1, 9]); s.add(["d"], [7])
    >>> len(s.result())
    2
    """

    def __init__(
        self,
        scheme: Scheme,
        rng: RandomSource,
        *,
        k: int | None = None,
        tau: float | None = None,
        power: float = 1.0,
    ) -> None:
        fn = "StreamingSampler"
        self.scheme = check_scheme(scheme, fn)
        self.power = check_power(power, fn)
        if (k is None) == (tau is None):
            raise ValidationError("k", fn, "exactly one of k and tau", (k, tau))
        self.k = None if k is None else check_positive_int(k, fn, "k")
        self.tau = None if tau is None else check_tau(tau, fn)
        self.rng = rng
        # max-heap of (-rank, key, freq, seed) for bottom-k; list for threshold
        self._heap: list[tuple[float, Any, int, float]] = []
        self._kth = float("inf")  # the (k+1)-th smallest rank seen so far
        self._seen: set[Any] = set()

    def add(self, keys: npt.ArrayLike, freqs: npt.ArrayLike) -> None:
        """Process a batch of pairs."""
        k_arr = np.asarray(keys)
        f = check_frequencies(freqs, "StreamingSampler.add")
        if k_arr.shape[0] != f.shape[0]:
            raise ValidationError("keys", "StreamingSampler.add", "as long as freqs", k_arr.shape)
        batch = set(k_arr.tolist())
        if len(batch) != k_arr.shape[0] or not batch.isdisjoint(self._seen):
            raise InputDataError("StreamingSampler.add: a key arrived twice (aggregate first)")
        self._seen |= batch
        if self.tau is not None:  # the exact rule of threshold_sample
            kept, u = _exact_threshold_keep(f, self.scheme, self.tau, self.power, self.rng)
            ranks = u / weight(f, self.power)
            keep = np.nonzero(kept)[0]
        else:
            u = seeds(f.shape[0], self.scheme, self.rng)
            ranks = u / weight(f, self.power)
            keep = np.nonzero(ranks < self._kth)[0]  # anything else can never enter
        push: Callable[[list[tuple[float, Any, int, float]], tuple[float, Any, int, float]], Any]
        push = heapq.heappush
        for i in keep.tolist():
            item = (-float(ranks[i]), k_arr[i].item(), int(f[i]), float(u[i]))
            if self.k is None:
                self._heap.append(item)
                continue
            if len(self._heap) <= self.k:
                push(self._heap, item)
            elif item[0] > self._heap[0][0]:
                heapq.heapreplace(self._heap, item)
            if len(self._heap) == self.k + 1:
                self._kth = -self._heap[0][0]

    def result(self) -> WeightedSample:
        """The sample so far (bottom-k: ``tau`` is the (k+1)-th smallest rank)."""
        items = list(self._heap)
        tau = self.tau
        if self.k is not None:
            if len(items) == self.k + 1:
                items.sort()
                tau = -items[0][0]
                items = items[1:]
            else:
                tau = float("inf")
        items.sort(key=lambda t: t[1])
        keys = np.array([t[1] for t in items])
        freqs = np.array([t[2] for t in items], dtype=np.int64)
        u = np.array([t[3] for t in items], dtype=np.float64)
        assert tau is not None
        return WeightedSample(keys, freqs, self.scheme, tau, self.power, u, self.k is None)
