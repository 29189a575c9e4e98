"""Federated private quantiles: the Discrete Haar Transform (DHT) and histogram baselines.

Source: the paper (federated frequency estimation under user-level distributed DP), Section 4:
Algorithms 4-5 (DHT), equations (6)-(7), Propositions 1-3; Appendix C.4-C.6.

Setting. Every user holds one value ``v_i >= 0`` (the norm ``||y_i||_2`` of her Kashin
representation). The public range ``[0, B)`` is cut into ``2**b`` bins of width
``Delta = B / 2**b``; a value at or above ``B`` falls in the last bin (clamping is a function of
the user's own value, so it costs no privacy). The target is the ``gamma`` quantile.

DHT (Algorithms 4-5). Over the binary tree of the ``2**b`` leaves, node ``w`` at level ``l``
(leaves at level 0) has the rescaled Haar coefficient ``H_l[w] = a_L - a_R`` (equation (6)
without the ``2**-l``), ``a_L`` (``a_R``) the count of leaves under its left (right) child. A user
has one leaf, so her coefficient is ``+1`` on each ancestor whose left subtree holds her leaf,
``-1`` where the right one does, and 0 elsewhere: ``b`` non-zero entries among ``2**b - 1``. Each
coefficient is sent with cPBM at ``C = 1``: ``p = 1/2 + theta' H``, ``Z ~ Binomial(m', p)``. The
per-coordinate bound ``|H| <= 1`` is what the accounting needs (Lemma 2 bounds every pair of
probabilities in ``[1/2 - theta', 1/2 + theta']`` per coordinate), so the vector is not clipped to
l2 norm 1 (that would scale it by ``1/sqrt(b)``); the RDP is Lemma 2 with ``2**b - 1``
coordinates (Appendix C.7). Nodes are stored in heap order: index ``j - 1`` holds node ``j``
(``j = 1`` the root at level ``b``; node ``j``'s children are ``2j`` and ``2j + 1``; leaf ``v`` is
node ``2**b + v``).

The server decodes the secure sum with equation (3) (an unbiased estimate of the summed
coefficients) and the leaf counts with equation (7),
``c[v] = H_0 / 2**b + sum_l g_l[v] H_l[w_l(v)] / 2**l``, where ``H_0 = n`` (the number of
contributors, public in secure aggregation; the paper writes ``H_0`` for the mean leaf count
``n / 2**b``) and ``g_l[v] = +1`` (``-1``) when ``v`` lies in the left (right) subtree of its
level-``l`` ancestor ``w_l(v)``. Step 3 of Algorithm 5: ``v_hat = argmin_v |c[1:v] / n - gamma|``
over ``v = 1..2**b`` and the estimate is ``Delta v_hat``, the upper edge of bin ``v_hat`` (so it is
always ``> 0``).

Baselines (Section 4.1). Flat histogram: the one-hot vector of the user's bin, each of the
``2**b`` coordinates sent with cPBM (``p = 1/2 + theta' e``), RDP with ``2**b`` coordinates
(Proposition 1). Hierarchical histogram (HH): the indicator of every node of the tree (leaves
included, ``2**(b+1) - 1`` coordinates, ``b + 1`` ones per user); prefix counts are read from the
at most ``b`` maximal dyadic blocks covering ``[0, v)`` (Proposition 2).

Exactness. The success probabilities ``1/2 + theta_q e`` with ``e`` in ``{-1, 0, 1}`` and
``theta_q = floor(theta 2**32) / 2**32`` are dyadic, so the binomials are drawn exactly by
:func:`privhist.federated.cpbm.binomial_dyadic`; decoding uses the same ``theta_q``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import InputDataError, ValidationError
from privhist.core.random import RandomSource
from privhist.core.validation import check_positive_int
from privhist.federated.cpbm import (
    P_BITS,
    binomial_dyadic,
    cpbm_decode,
    quantised_theta,
    secure_sum_modulus,
)
from privhist.federated.cpbm_accounting import RdpCurve, check_theta, cpbm_rdp
from privhist.federated.secure_sum import IdealSecureSum, SecureAggregator

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

#: the histogram schemes (:class:`FederatedQuantile` ``scheme``)
SCHEMES = ("dht", "flat", "hh")
#: devices encoded per batch
BATCH = 4096


def check_bits(bits: Any, function: str) -> int:
    """``b`` in ``[1, 20]``: ``2**b`` bins."""
    b = check_positive_int(bits, function, "bits")
    if b > 20:
        raise ValidationError("bits", function, "an integer in [1, 20]", bits)
    return b


def check_gamma(gamma: Any, function: str) -> float:
    """A quantile level in (0, 1)."""
    try:
        g = float(gamma)
    except (TypeError, ValueError):
        raise ValidationError("gamma", function, "a number in (0, 1)", gamma) from None
    if isinstance(gamma, bool) or not 0 < g < 1:
        raise ValidationError("gamma", function, "a number in (0, 1)", gamma)
    return g


def bin_index(values: Any, upper: float, bits: int) -> I64:
    """The bin of every value: ``floor(v / Delta)``, values ``>= B`` in the last bin.

    >>> bin_index([0.0, 0.99, 1.0, 7.5, 100.0], upper=8.0, bits=3).tolist()
    [0, 0, 1, 7, 7]
    """
    fn = "bin_index"
    b = check_bits(bits, fn)
    hi = float(upper)
    if not math.isfinite(hi) or hi <= 0:
        raise ValidationError("upper", fn, "a finite number > 0", upper)
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1:
        raise InputDataError(f"{fn}: values must be a 1-d array")
    if not np.isfinite(v).all() or (v < 0).any():
        raise InputDataError(f"{fn}: values must be finite and >= 0")
    leaves = 1 << b
    idx = np.floor(v * (leaves / hi)).astype(np.int64)
    return np.asarray(np.minimum(idx, leaves - 1), dtype=np.int64)


def haar_coefficients(leaves: Any, bits: int) -> npt.NDArray[np.int8]:
    """Each user's rescaled Haar coefficients (heap order, module notes): ``(n, 2**b - 1)``.

    >>> haar_coefficients([0, 3], 2).tolist()   # root, left child, right child
    [[1, 1, 0], [-1, 0, -1]]
    """
    b = check_bits(bits, "haar_coefficients")
    lv = np.asarray(leaves, dtype=np.int64)
    out = np.zeros((lv.size, (1 << b) - 1), dtype=np.int8)
    node = lv + (1 << b)
    rows = np.arange(lv.size)
    for _ in range(b):
        sign = np.where(node & 1, -1, 1).astype(np.int8)  # even node = left child
        node = node >> 1
        out[rows, node - 1] = sign
    return out


def hierarchical_indicators(leaves: Any, bits: int) -> npt.NDArray[np.int8]:
    """Each user's HH vector: 1 on every node of the tree on her leaf's path (heap order, leaves
    included): ``(n, 2**(b+1) - 1)``.

    >>> hierarchical_indicators([2], 2).tolist()
    [[1, 0, 1, 0, 0, 1, 0]]
    """
    b = check_bits(bits, "hierarchical_indicators")
    lv = np.asarray(leaves, dtype=np.int64)
    out = np.zeros((lv.size, (1 << (b + 1)) - 1), dtype=np.int8)
    node = lv + (1 << b)
    rows = np.arange(lv.size)
    for _ in range(b + 1):
        out[rows, node - 1] = 1
        node = node >> 1
    return out


def one_hot(leaves: Any, bits: int) -> npt.NDArray[np.int8]:
    """Each user's flat-histogram vector: ``(n, 2**b)`` with one 1."""
    b = check_bits(bits, "one_hot")
    lv = np.asarray(leaves, dtype=np.int64)
    out = np.zeros((lv.size, 1 << b), dtype=np.int8)
    out[np.arange(lv.size), lv] = 1
    return out


def encode_signs(e: Any, theta: float, m: int, rng: RandomSource) -> I64:
    """cPBM at ``C = 1`` on entries ``e`` in ``{-1, 0, 1}``: ``Binomial(m, 1/2 + theta_q e)``,
    exactly (module notes).

    >>> from privhist.core.random import SeededRandom
    >>> z = encode_signs([[1, 0, -1]], 0.25, 4, SeededRandom(0))
    >>> z.shape, bool(((0 <= z) & (z <= 4)).all())
    ((1, 3), True)
    """
    fn = "encode_signs"
    arr = np.asarray(e)
    if arr.dtype.kind not in "iu" or (arr.size and (arr.min() < -1 or arr.max() > 1)):
        raise ValidationError("e", fn, "integers in {-1, 0, 1}", "other values")
    half_width = int(quantised_theta(theta, fn) * (1 << P_BITS))
    num = (1 << (P_BITS - 1)) + arr.astype(np.int64) * half_width
    return binomial_dyadic(check_positive_int(m, fn, "m"), num, rng)


def decode_leaf_counts(coefficient_sums: Any, n: int, bits: int) -> F64:
    """Equation (7): leaf counts from (estimated) summed Haar coefficients and ``H_0 = n``.

    >>> h = haar_coefficients([0, 0, 3], 2).sum(axis=0)
    >>> decode_leaf_counts(h, 3, 2).tolist()
    [2.0, 0.0, 0.0, 1.0]
    """
    fn = "decode_leaf_counts"
    b = check_bits(bits, fn)
    h = np.asarray(coefficient_sums, dtype=np.float64)
    if h.shape != ((1 << b) - 1,):
        raise ValidationError("coefficient_sums", fn, f"a vector of length {(1 << b) - 1}", h.shape)
    # top-down: node sum S_w; children (S_w + H_w) / 2 and (S_w - H_w) / 2 -- equation (7)
    sums = np.array([float(n)])
    start = 0
    for level in range(b):
        width = 1 << level
        coef = h[start : start + width]
        sums = np.stack([(sums + coef) / 2, (sums - coef) / 2], axis=1).ravel()
        start += width
    return np.asarray(sums)


def prefix_from_tree(node_sums: Any, bits: int) -> F64:
    """HH prefix counts ``c[0:v]`` for ``v = 1..2**b`` from the (estimated) node sums (heap
    order), each from the at most ``b + 1`` maximal dyadic blocks of ``[0, v)``."""
    b = check_bits(bits, "prefix_from_tree")
    s = np.asarray(node_sums, dtype=np.float64)
    leaves = 1 << b
    out = np.zeros(leaves)
    for v in range(1, leaves + 1):
        total = 0.0
        lo = 0
        for level in range(b, -1, -1):  # greedy largest blocks first
            size = 1 << level
            if lo + size <= v:
                node = ((1 << (b - level)) + lo // size) if level < b else 1
                total += s[node - 1]
                lo += size
        out[v - 1] = total
    return out


def monotone_fit(values: Any) -> F64:
    """The non-decreasing sequence closest to ``values`` in least squares (pool adjacent
    violators: merge neighbouring blocks whose means decrease, each block at its mean).

    >>> monotone_fit([0.1, 0.5, 0.3, 0.9, 0.8]).round(3).tolist()
    [0.1, 0.4, 0.4, 0.85, 0.85]
    """
    means: list[float] = []
    sizes: list[int] = []
    for x in np.asarray(values, dtype=np.float64).ravel().tolist():
        means.append(x)
        sizes.append(1)
        while len(means) > 1 and means[-2] > means[-1]:
            w = sizes[-2] + sizes[-1]
            means[-2] = (means[-2] * sizes[-2] + means[-1] * sizes[-1]) / w
            sizes[-2] = w
            means.pop()
            sizes.pop()
    return np.repeat(np.asarray(means), np.asarray(sizes, dtype=np.int64))


def cdf_from_prefix(prefix: Any, n: int) -> F64:
    """The estimated distribution function at the upper bin edges: ``prefix / n`` projected onto
    non-decreasing sequences in ``[0, 1]`` (:func:`monotone_fit`, then clipping).

    The decoded prefix counts are noisy and need not be monotone. Far above the norms, where
    the true prefix is ``n`` on a long run of bins, the noisy levels wander around 1 and a
    level ``gamma`` near 1 (equation (5)) is met by chance in some of them; the argmin of
    Algorithm 5 then picks a bin far in the tail (in 13 of 200 runs on the i.i.d. data at
    ``d = 50``, and in most runs on msweb, whose norms fill 5 of the 64 bins). The projection is
    post-processing of the private release (no privacy cost): the tail pools to its mean and
    the first crossing of ``gamma`` stays where the norms are.
    """
    p = np.asarray(prefix, dtype=np.float64) / float(n)
    return np.clip(monotone_fit(p), 0.0, 1.0)


def settle_tail(cdf: Any, tolerance: float) -> F64:
    """Levels from the first one within ``tolerance`` of 1 on, set to 1.

    Beyond the largest value the true distribution function is exactly 1, and the estimate of
    :func:`cdf_from_prefix` wanders just below it (the projection clips at 1 from above, so the
    tail never overshoots and its missing mass is one-sided). Spread over bins up to ``B``,
    that missing mass inflates any tail integral of ``1 - F`` (the bias term of Theorem 1 in
    :func:`privhist.federated.ocpbm.squared_bound_clip`) by up to the level noise times the
    range. Where the estimate first comes within ``tolerance`` (a public multiple of the level
    standard deviation, :meth:`FederatedQuantile.level_sd`) of 1, the rest of the mass is put
    in that bin instead. Post-processing of the release (no privacy cost).

    >>> settle_tail([0.2, 0.9, 0.97, 0.99, 0.98, 1.0], 0.05).tolist()
    [0.2, 0.9, 1.0, 1.0, 1.0, 1.0]
    """
    f = np.array(cdf, dtype=np.float64)
    tol = float(tolerance)
    if not math.isfinite(tol) or tol < 0:
        raise ValidationError("tolerance", "settle_tail", "a finite number >= 0", tolerance)
    hit = np.flatnonzero(f >= 1.0 - tol)
    if hit.size:
        f[hit[0] :] = 1.0
    return f


def quantile_from_prefix(prefix: Any, n: int, gamma: float, upper: float, bits: int) -> float:
    """Algorithm 5, step 3 on the monotone estimate of the distribution function
    (:func:`cdf_from_prefix`): ``Delta * argmin_v |F(v) - gamma|`` (``v = 1..2**b``, the smallest
    on ties).

    >>> noisy = [1.0, 9.0, 10.2, 9.8, 10.3, 9.55, 10.0, 10.0]  # a dip to 0.955 in the tail
    >>> quantile_from_prefix(noisy, 10, 0.95, 8.0, 3)  # the raw argmin would give 6.0
    3.0
    """
    g = check_gamma(gamma, "quantile_from_prefix")
    f = cdf_from_prefix(prefix, n)
    v = int(np.argmin(np.abs(f - g))) + 1
    return float(upper) / (1 << bits) * v


def true_quantile(values: Any, gamma: float, upper: float, bits: int) -> float:
    """The same rule on the exact (un-noised) histogram: the non-private reference."""
    b = check_bits(bits, "true_quantile")
    leaves = bin_index(values, upper, b)
    prefix = np.cumsum(np.bincount(leaves, minlength=1 << b))
    return quantile_from_prefix(prefix, leaves.size, gamma, upper, b)


@dataclass(frozen=True)
class FederatedQuantile:
    """One federated quantile release: DHT (the paper's), flat or hierarchical histograms.

    Args:
        upper: Public range ``B`` of the values (values above fall in the last bin).
        bits: ``b``, ``2**b`` bins.
        theta: cPBM ``theta'`` in (0, 1/4].
        m: cPBM ``m'`` (at least 1).
        n_users: Contributors to the secure sum (public).
        scheme: ``"dht"``, ``"flat"`` or ``"hh"``.
        sum_bits: Integer width of the secure sum.

    >>> from privhist.core.random import SeededRandom
    >>> q = FederatedQuantile(upper=64.0, bits=6, theta=0.2, m=30, n_users=2000)
    >>> vals = np.linspace(0, 40, 2000)
    >>> round(q.run(vals, 0.5, SeededRandom(0)).estimate)
    20
    """

    upper: float
    bits: int
    theta: float
    m: int
    n_users: int
    scheme: str = "dht"
    sum_bits: int = 32

    def __post_init__(self) -> None:
        fn = "FederatedQuantile"
        if not (math.isfinite(float(self.upper)) and float(self.upper) > 0):
            raise ValidationError("upper", fn, "a finite number > 0", self.upper)
        check_bits(self.bits, fn)
        check_theta(self.theta, fn)
        quantised_theta(self.theta, fn)
        check_positive_int(self.m, fn, "m")
        check_positive_int(self.n_users, fn, "n_users")
        if self.scheme not in SCHEMES:
            raise ValidationError("scheme", fn, f"one of {', '.join(SCHEMES)}", self.scheme)
        secure_sum_modulus(self.n_users, self.m, self.sum_bits)

    @property
    def dimension(self) -> int:
        """Coordinates each user sends (the factor of Lemma 2)."""
        leaves = 1 << self.bits
        return {"dht": leaves - 1, "flat": leaves, "hh": 2 * leaves - 1}[self.scheme]

    @property
    def bin_width(self) -> float:
        """``Delta = B / 2**b``."""
        return float(self.upper) / (1 << self.bits)

    def rdp(self, orders: Any = None) -> RdpCurve:
        """Lemma 2 with :attr:`dimension` coordinates (replace-one-user neighbours)."""
        return cpbm_rdp(self.n_users, self.theta, self.m, self.dimension, orders)

    def variance_bound(self) -> float:
        """Propositions 1-3: a bound on the variance of the estimated level ``c[1:v] / n``.

        The paper prints ``n**2`` in the denominators; equation (3) gives
        ``Var(H_hat / n) <= 1 / (4 m n theta**2)`` for a coordinate's mean, so the bounds are
        ``2**b / (4 m n theta**2)`` (flat, all bins), ``b / (4 m n theta**2)`` (HH, at most ``b``
        blocks) and ``b / (16 m n theta**2)`` (DHT: ``|s_L - s_R| <= 2**(l-1)`` at level ``l``,
        Appendix C.6), with ``n`` to the first power (the tests measure it).
        """
        t = float(quantised_theta(self.theta))
        base = 4.0 * self.m * self.n_users * t * t
        if self.scheme == "flat":
            return (1 << self.bits) / base
        if self.scheme == "hh":
            return self.bits / base
        return self.bits / (4.0 * base)

    def level_sd(self) -> float:
        """The standard deviation bound of an estimated level: ``sqrt(variance_bound())``."""
        return math.sqrt(self.variance_bound())

    def user_vectors(self, values: Any) -> npt.NDArray[np.int8]:
        """What each user randomises (before cPBM): Algorithm 4 steps 1-3."""
        leaves = bin_index(values, self.upper, self.bits)
        if self.scheme == "dht":
            return haar_coefficients(leaves, self.bits)
        if self.scheme == "flat":
            return one_hot(leaves, self.bits)
        return hierarchical_indicators(leaves, self.bits)

    def encode(self, values: Any, rng: RandomSource) -> I64:
        """Algorithm 4 on every user's value: the cPBM outputs ``(n, dimension)``."""
        return encode_signs(self.user_vectors(values), self.theta, self.m, rng)

    def prefix(self, total: Any) -> F64:
        """Estimated prefix counts ``c[1:v]``, ``v = 1..2**b``, from the secure sum."""
        n = self.n_users
        mean = cpbm_decode(total, n, self.m, self.theta, 1.0)  # equation (3), C = 1
        est = mean * n
        if self.scheme == "dht":
            return np.cumsum(decode_leaf_counts(est, n, self.bits))
        if self.scheme == "flat":
            return np.cumsum(est)
        return prefix_from_tree(est, self.bits)

    def quantile(self, total: Any, gamma: float) -> float:
        """Algorithm 5: the estimated ``gamma`` quantile from the secure sum."""
        return quantile_from_prefix(self.prefix(total), self.n_users, gamma, self.upper, self.bits)

    def run(
        self,
        values: Any,
        gamma: float,
        rng: RandomSource,
        aggregator: SecureAggregator | None = None,
    ) -> QuantileRelease:
        """Devices encode, the aggregator sums, the server decodes (Algorithms 4-5).

        Raises:
            InputDataError: the number of values is not ``n_users``.
        """
        g = check_gamma(gamma, "FederatedQuantile.run")
        v = np.asarray(values, dtype=np.float64)
        if v.ndim != 1 or v.size != self.n_users:
            raise InputDataError(
                f"FederatedQuantile.run: expected {self.n_users} values; got shape {v.shape}"
            )
        agg = aggregator or IdealSecureSum(
            secure_sum_modulus(self.n_users, self.m, self.sum_bits), self.dimension
        )
        total = agg.aggregate(self.encode(v[i : i + BATCH], rng) for i in range(0, v.size, BATCH))
        prefix = self.prefix(total)
        est = quantile_from_prefix(prefix, self.n_users, g, self.upper, self.bits)
        return QuantileRelease(est, prefix, g)


@dataclass(frozen=True)
class QuantileRelease:
    """A private quantile: the estimate ``Delta v_hat``, the decoded prefix counts, ``gamma``."""

    estimate: float
    prefix: F64
    gamma: float
