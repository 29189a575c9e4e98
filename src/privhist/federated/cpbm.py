"""The clipped Poisson binomial mechanism (cPBM): device encoding and server decoding.

Source: the paper (federated frequency estimation under user-level distributed DP), Section 3.2,
Algorithm 3 (device), Algorithm 2 (server), equation (3) (unbiased estimate and variance).

Device (Algorithm 3), for a representation ``y`` in ``R^D``:

1. clip: ``y <- y * min(C / ||y||_2, 1)``;
2. ``p[k] = theta / C * y[k] + 1/2``, in ``[1/2 - theta, 1/2 + theta]`` since ``|y[k]| <= C``;
3. ``Z[k] ~ Binomial(m, p[k])``, drawn exactly.

Exact sampling. ``p[k]`` is a float; it is rounded to the nearest multiple of ``2**-32``
(:data:`P_BITS`) and clamped to ``[1/2 - theta_q, 1/2 + theta_q]`` where
``theta_q = floor(theta * 2**32) / 2**32 <= theta`` is the public, exactly representable theta
the mechanism runs with. The binomial is then drawn *exactly* for that dyadic probability by
:func:`binomial_dyadic`: for ``m <= 64`` from exact alias tables over coarse cells of ``p``
(:func:`binomial_dyadic_tables`: one 32-bit draw per coordinate, ties continued with fresh
bits, the rare trials inside a cell by direct comparison), otherwise by digit splitting
(:func:`binomial_dyadic_digits`, also the reference). Why the guarantee still holds: the accounting
(:mod:`privhist.federated.cpbm_accounting`) bounds the Renyi divergence for *every* pair of
inputs whose probabilities lie in ``[1/2 - theta, 1/2 + theta]``; rounding and clamping map each
user's data to probabilities inside ``[1/2 - theta_q, 1/2 + theta_q]``, a subset, so every
neighbouring pair of the implemented mechanism is one the bound already covers. Rounding is a
deterministic function of the user's own data (it changes only which in-range probability the
user sends), so it costs no privacy; it costs a bias of at most ``2**-33`` in ``p``, i.e.
``C / theta * 2**-33`` in ``y[k]``, and the server decodes with ``theta_q``.

Secure sum. Each ``Z[k]`` is in ``[0, m]``, so the sum of ``n`` users is in ``[0, n m]`` and
``M = n m + 1`` is the smallest modulus that never wraps (the paper's ``M = n m`` would wrap
the all-``m`` sum to 0). :func:`secure_sum_modulus` checks that ``M`` fits the chosen integer
width.

Server (Algorithm 2): ``y_hat = C / (m n theta) (sum_i Z_i - m n / 2)``, the unbiased estimate of
the mean clipped representation, with variance at most ``C**2 / (4 n m theta**2)`` per coordinate
(equation (3)); ``x_hat = U y_hat`` is done by the frame (:mod:`privhist.federated.kashin`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from privhist.accounting.accountant import guarantee_of
from privhist.accounting.events import RdpCurveEvent
from privhist.core.constraints import Constraint, Declared
from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource
from privhist.core.validation import check_positive_int
from privhist.federated.cpbm_accounting import RdpCurve, check_theta, cpbm_rdp
from privhist.noise.binomial import binomial_half

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
F64 = npt.NDArray[np.float64]

#: bits of the dyadic grid the success probabilities are rounded to
P_BITS = 32
_ONE = 1 << P_BITS
#: coordinates encoded per batch (bounds memory: about 100 bytes per coordinate)
BATCH = 1 << 14
_ALL = np.uint64((1 << 64) - 1)


def quantised_theta(theta: Any, function: str = "quantised_theta") -> Fraction:
    """``floor(theta * 2**32) / 2**32``: the exact theta the device and server use.

    >>> quantised_theta(0.25)
    Fraction(1, 4)
    """
    t = check_theta(theta, function)
    q = Fraction(math.floor(Fraction(t) * _ONE), _ONE)
    if q <= 0:
        raise ValidationError("theta", function, "at least 2**-32", theta)
    return q


def check_clip(clip: Any, function: str) -> float:
    """The clipping threshold ``C`` as a finite float > 0."""
    if isinstance(clip, bool):
        raise ValidationError("clip", function, "a finite number > 0", clip)
    try:
        c = float(clip)
    except (TypeError, ValueError):
        raise ValidationError("clip", function, "a finite number > 0", clip) from None
    if not math.isfinite(c) or c <= 0:
        raise ValidationError("clip", function, "a finite number > 0", clip)
    return c


#: the width of a secure sum: at least 2 bits, and sums must fit a signed 64-bit integer
SUM_BITS = Constraint.integer(2, 62)


def secure_sum_modulus(n: int, m: int, bits: int = 32) -> int:
    """``M = n m + 1``, refusing parameters whose sums would not fit ``bits``-bit integers.

    >>> secure_sum_modulus(10_000, 30)
    300001
    >>> try:
    ...     secure_sum_modulus(1 << 27, 32)
    ... except ValidationError as e:
    ...     print(e.parameter, e.expected)
    m such that (number of users) * m + 1 <= 2**32
    """
    fn = "secure_sum_modulus"
    n = check_positive_int(n, fn, "n")
    m = check_positive_int(m, fn, "m")
    b: int = SUM_BITS.check(bits, "bits", fn)
    modulus = n * m + 1
    if modulus > 1 << b:
        raise ValidationError("m", fn, f"such that (number of users) * m + 1 <= 2**{b}", m)
    return modulus


def probability_numerators(y: Any, theta: Any, clip: Any) -> I64:
    """Steps 1-2 of Algorithm 3: clip rows to l2 norm ``C`` and return ``p * 2**32`` as ints.

    Args:
        y: Representations, shape ``(n, D)`` (or ``(D,)`` for one user), finite floats.
        theta: cPBM theta in (0, 1/4]; the quantised value is used (module notes).
        clip: ``C > 0``.

    Returns:
        int64 numerators ``a`` with ``p = a / 2**32`` in ``[1/2 - theta_q, 1/2 + theta_q]``.

    >>> a = probability_numerators([[0.5, -0.25]], 0.25, 1.0)
    >>> a.tolist() == [[2**31 + 2**29, 2**31 - 2**28]]
    True
    """
    rows, factor, half_width, shape = _prepare(y, theta, clip, "cpbm_encode")
    out = np.empty(rows.shape, dtype=np.int64)
    step = max(1, TABLE_BATCH // max(1, rows.shape[1]))
    for start in range(0, rows.shape[0], step):
        stop = min(rows.shape[0], start + step)
        _numerators_into(rows[start:stop], factor[start:stop], half_width, out[start:stop])
    result: I64 = out.reshape(shape)
    return result


def _prepare(y: Any, theta: Any, clip: Any, fn: str) -> tuple[F64, F64, int, tuple[int, ...]]:
    """Validated rows of ``y`` (2-d), the per-row factor ``min(1, C / ||y||) / C``, the
    half-width ``theta_q 2**32`` and ``y``'s shape."""
    tq = quantised_theta(theta, fn)
    c = check_clip(clip, fn)
    arr = np.asarray(y, dtype=np.float64)
    if arr.ndim not in (1, 2):
        raise ValidationError("y", fn, "a 1- or 2-dimensional array", f"shape {arr.shape}")
    rows = arr.reshape(1, -1) if arr.ndim == 1 else arr
    if not np.isfinite(rows).all():
        raise ValidationError("y", fn, "finite numbers", "NaN or infinity")
    norms = np.linalg.norm(rows, axis=1)
    scale = c / np.maximum(norms, c)  # min(1, C / ||y||); no division by 0 for zero rows
    return rows, scale / c, int(tq * _ONE), arr.shape


def _numerators_into(rows: F64, factor: F64, half_width: int, out: I64) -> None:
    """``out = clamp(rint(2**31 + theta_q 2**32 * y * factor))`` (steps 1-2 of Algorithm 3)."""
    t = rows * factor[:, None]
    t *= float(half_width)
    t += float(1 << (P_BITS - 1))
    np.rint(t, out=t)
    mid = 1 << (P_BITS - 1)
    np.clip(t, mid - half_width, mid + half_width, out=t)
    out[...] = t  # integral floats below 2**33: exact


def _check_dyadic(m: Any, numerators: Any, bits: Any, fn: str) -> tuple[int, int, Any, I64]:
    m = check_positive_int(m, fn, "m")
    b: int = Constraint.integer(1, 62).check(bits, "bits", fn)
    a = np.asarray(numerators)
    if a.dtype.kind not in "iu":
        raise ValidationError("numerators", fn, "an integer array", f"dtype {a.dtype}")
    flat = a.astype(np.int64).ravel()
    if flat.size and (flat.min() < 0 or flat.max() > 1 << b):
        raise ValidationError("numerators", fn, f"integers in [0, 2**{b}]", "out of range")
    return m, b, a, flat


def binomial_dyadic(m: int, numerators: Any, rng: RandomSource, bits: int = P_BITS) -> I64:
    """Exact ``Binomial(m, a / 2**bits)`` for every entry ``a`` of ``numerators``.

    For ``m <=`` :data:`TABLE_MAX_M` the alias-table sampler :func:`binomial_dyadic_tables`
    (about 32 random bits per entry); otherwise the digit-splitting sampler
    :func:`binomial_dyadic_digits`. Both are exact in distribution.

    >>> from privhist.core.random import SeededRandom
    >>> binomial_dyadic(5, [0, 2**32], SeededRandom(1)).tolist()
    [0, 5]
    """
    m, b, a, flat = _check_dyadic(m, numerators, bits, "binomial_dyadic")
    if m > TABLE_MAX_M:
        return _digits(m, flat, b, rng).reshape(a.shape)
    return _tables(m, flat, b, rng).reshape(a.shape)


def binomial_dyadic_digits(m: int, numerators: Any, rng: RandomSource, bits: int = P_BITS) -> I64:
    """Exact ``Binomial(m, a / 2**bits)`` by digit splitting (the reference sampler).

    Trial ``j`` succeeds iff its uniform ``U_j < p``. Comparing the binary digits of all
    still-undecided trials of an entry with digit ``t`` of ``p`` at once, the number whose digit
    is 0 is Binomial(undecided, 1/2); if ``p``'s digit is 1 those succeed (the rest stay
    undecided), if it is 0 the others fail (those stay undecided). After the ``bits`` digits of
    ``p`` the undecided trials have ``U_j >= p``: failures. Binomial(u, 1/2) for ``u <= 64`` is
    the popcount of ``u`` unused bits of the entry's current random word (a fresh word when fewer
    remain; every random bit is used once); for ``m > 64``
    :func:`privhist.noise.binomial.binomial_half` is used.

    >>> from privhist.core.random import SeededRandom
    >>> binomial_dyadic_digits(5, [0, 2**32], SeededRandom(1)).tolist()
    [0, 5]
    """
    m, b, a, flat = _check_dyadic(m, numerators, bits, "binomial_dyadic_digits")
    return _digits(m, flat, b, rng).reshape(a.shape)


def _digits(m: int, flat: I64, b: int, rng: RandomSource) -> I64:
    out = np.empty(flat.size, dtype=np.int64)
    for start in range(0, flat.size, BATCH):
        out[start : start + BATCH] = _binomial_dyadic_batch(m, flat[start : start + BATCH], b, rng)
    return out


def _binomial_dyadic_batch(m: int, a: I64, bits: int, rng: RandomSource) -> I64:
    out = np.zeros(a.size, dtype=np.int64)
    full = a >= 1 << bits
    out[full] = m
    idx = np.flatnonzero(~full & (a > 0))
    if m > 64:
        return _binomial_dyadic_large(m, a, idx, out, bits, rng)
    # state per entry: numerator, undecided trials, successes, a random word and the number of
    # its bits already used (each random bit is used once; a word is replaced when too few remain)
    num = a[idx].astype(np.uint64)
    u = np.full(idx.size, m, dtype=np.uint64)
    succ = np.zeros(idx.size, dtype=np.uint64)
    word = rng.uint64(idx.size)
    pos = np.zeros(idx.size, dtype=np.uint64)
    for t in range(bits - 1, -1, -1):
        refill = np.flatnonzero(pos + u > _S64)
        if refill.size:
            word[refill] = rng.uint64(refill.size)
            pos[refill] = 0
        zeros = np.bitwise_count((word >> pos) & _MASKS[u]).astype(np.uint64)  # Bin(u, 1/2)
        pos += u
        digit = (num >> np.uint64(t)) & _U1
        succ += zeros * digit
        u = np.where(digit == 1, u - zeros, zeros)
        live = u != 0
        n_live = int(np.count_nonzero(live))
        if n_live == 0:
            break
        if n_live < 0.6 * u.size:  # compact: finished entries leave the state
            out[idx[~live]] = succ[~live].astype(np.int64)
            idx, num, u, succ = idx[live], num[live], u[live], succ[live]
            word, pos = word[live], pos[live]
    out[idx] = succ.astype(np.int64)  # after the last digit the undecided trials fail
    return out


def _binomial_dyadic_large(m: int, a: I64, idx: I64, out: I64, bits: int, rng: RandomSource) -> I64:
    """The same digit splitting for ``m > 64`` (Binomial(u, 1/2) by ``binomial_half``)."""
    u = np.full(idx.size, m, dtype=np.int64)
    succ = np.zeros(idx.size, dtype=np.int64)
    num = a[idx]
    for t in range(bits - 1, -1, -1):
        if idx.size == 0:
            break
        zeros = binomial_half(u, rng)
        digit = ((num >> t) & 1).astype(np.bool_)
        succ += np.where(digit, zeros, 0)
        u = np.where(digit, u - zeros, zeros)
        keep = u > 0
        out[idx[~keep]] = succ[~keep]
        idx, num, u, succ = idx[keep], num[keep], u[keep], succ[keep]
    out[idx] = succ
    return out


_MASKS = np.array([0] + [(1 << k) - 1 for k in range(1, 65)], dtype=np.uint64)
_S64 = np.uint64(64)
_U1 = np.uint64(1)


# -- alias-table sampler ------------------------------------------------------------------------

#: width of the coarse cells of the table sampler: ``2**-COARSE_BITS``
COARSE_BITS = 10
#: largest ``m`` drawn through alias tables (a cell's table has ``(m+1)(m+2)/2`` outcomes)
TABLE_MAX_M = 64
#: entries per batch of the table sampler
TABLE_BATCH = 1 << 17


class DyadicBinomialTables:
    """Exact alias tables for :func:`binomial_dyadic_tables` (one ``m``, cells of ``2**-c``).

    Cell ``j`` (``p_lo = j / 2**c``) splits each trial's uniform ``U`` three ways: success
    (``U < p_lo``), *ambiguous* (``p_lo <= U < p_lo + 2**-c``) and failure, so the counts
    ``(S, A, m - S - A)`` are multinomial with integer weights over ``2**(c m)``:
    ``W[s, a] = m! / (s! a! (m-s-a)!) j**s (2**c - j - 1)**(m-s-a)``. The table for the cell is
    Walker's alias method over the ``(m+1)(m+2)/2`` outcomes ``(s, a)`` (padded with zero
    weights to ``K = 2**kbits`` columns), built by Vose's algorithm in exact integers: column
    ``i`` keeps its own outcome with probability ``prob[i] / 2**(c m)`` and otherwise gives
    ``alias[i]``. Outcomes ``0..m`` are ``(s, 0)`` (so their index is the count), the rest
    have ``a >= 1``. Cells are built when first needed and kept.

    The row for ``j = 2**c`` (``p = 1``) always gives outcome ``m``.

    Args:
        m: Trials, ``1 <= m <=`` :data:`TABLE_MAX_M`.
        coarse_bits: ``c``, in ``[1, 16]``.
    """

    def __init__(self, m: int, coarse_bits: int) -> None:
        self.m = m
        self.c = coarse_bits
        pairs = [(s, 0) for s in range(m + 1)]
        pairs += [(s, a) for a in range(1, m + 1) for s in range(m + 1 - a)]
        self.kbits = max(1, (len(pairs) - 1).bit_length())
        self.k = 1 << self.kbits
        #: bits of a 32-bit draw compared with the threshold (the others pick the column)
        self.tbits = 32 - self.kbits
        self.shift = coarse_bits * m - self.tbits
        self.s_of = np.array([p[0] for p in pairs] + [0] * (self.k - len(pairs)), dtype=np.int64)
        self.a_of = np.array([p[1] for p in pairs] + [0] * (self.k - len(pairs)), dtype=np.int64)
        self._pairs = pairs
        cells = (1 << coarse_bits) + 1
        #: per cell and column: ``top << 16 | alias`` with ``top`` the first ``tbits`` bits of
        #: the threshold ``prob / 2**(c m)`` (``top == 2**tbits`` when ``prob`` is the whole)
        self.packed = np.zeros((cells, self.k), dtype=np.uint64)
        self.built = np.zeros(cells, dtype=np.bool_)
        # exact thresholds of recently tied cells (recomputed on demand: a cell's integers
        # take ~K c m / 8 bytes, too many to keep for every cell when m is large)
        self._exact: dict[int, list[int]] = {}

    def weights(self, j: int) -> list[int]:
        """``W[s, a]`` of cell ``j`` in outcome order (they sum to ``2**(c m)``)."""
        m, lo, hi = self.m, j, (1 << self.c) - j - 1
        return [
            math.comb(m, s) * math.comb(m - s, a) * lo**s * hi ** (m - s - a)
            for s, a in self._pairs
        ]

    def ensure(self, cells: Any) -> None:
        """Build the tables of the given cell indices that are not built yet."""
        for j in cells:
            j = int(j)
            if not self.built[j]:
                self._build(j)

    def alias_table(self, j: int) -> tuple[list[int], list[int]]:
        """Vose's alias construction for cell ``j`` in exact integers: per column the
        threshold numerator ``prob`` (over ``2**(c m)``) and the alias outcome."""
        whole = 1 << (self.c * self.m)
        if j == 1 << self.c:  # p = 1: every column gives outcome m
            prob, alias = [0] * self.k, [self.m] * self.k
        else:
            scaled = [w * self.k for w in self.weights(j)]
            scaled += [0] * (self.k - len(scaled))
            prob, alias = [whole] * self.k, list(range(self.k))
            small = [i for i, w in enumerate(scaled) if w < whole]
            large = [i for i, w in enumerate(scaled) if w >= whole]
            while small and large:
                lo, hi = small.pop(), large.pop()
                prob[lo], alias[lo] = scaled[lo], hi
                scaled[hi] -= whole - scaled[lo]
                (small if scaled[hi] < whole else large).append(hi)
            # exact integers: the columns left over hold exactly one whole each
            if small or any(scaled[i] != whole for i in large):
                raise AssertionError("alias construction lost mass")  # pragma: no cover
        return prob, alias

    def thresholds(self, j: int) -> list[int]:
        """The exact threshold numerators of cell ``j`` (a few recent cells are kept)."""
        if j not in self._exact:
            if len(self._exact) >= 64:
                del self._exact[next(iter(self._exact))]
            self._exact[j] = self.alias_table(j)[0]
        return self._exact[j]

    def _build(self, j: int) -> None:
        prob, alias = self.alias_table(j)
        tops = [p >> self.shift if self.shift >= 0 else p << -self.shift for p in prob]
        self.packed[j] = (np.array(tops, dtype=np.uint64) << np.uint64(16)) | np.array(
            alias, dtype=np.uint64
        )
        self.built[j] = True

    def resolve_tie(self, j: int, col: int, rng: RandomSource) -> bool:
        """Whether column ``col`` of cell ``j`` keeps its own outcome when the first ``tbits``
        bits of the uniform equal the threshold's: compare the uniform's next ``c m - tbits``
        bits (fresh, exact integers) with the threshold's remaining bits."""
        if self.shift <= 0:  # the threshold has no further bits: V >= threshold
            return False
        rem = self.thresholds(j)[col] & ((1 << self.shift) - 1)
        return rem > 0 and rng.randbelow(1 << self.shift) < rem


_TABLES: dict[tuple[int, int], DyadicBinomialTables] = {}


def dyadic_binomial_tables(m: int, coarse_bits: int = COARSE_BITS) -> DyadicBinomialTables:
    """The (cached) :class:`DyadicBinomialTables` for ``m`` and ``coarse_bits``."""
    key = (m, coarse_bits)
    if key not in _TABLES:
        _TABLES[key] = DyadicBinomialTables(m, coarse_bits)
    return _TABLES[key]


def binomial_dyadic_tables(m: int, numerators: Any, rng: RandomSource, bits: int = P_BITS) -> I64:
    """Exact ``Binomial(m, a / 2**bits)`` per entry by alias tables (``m <=`` :data:`TABLE_MAX_M`).

    With ``c = min(COARSE_BITS, bits)``, entry ``a`` lies in cell ``j = a >> (bits - c)``, and
    ``p = p_lo + q 2**-c`` with ``q = (a mod 2**(bits-c)) / 2**(bits-c)``. The counts
    ``(S, A)`` of the cell's three-way split of the trials (:class:`DyadicBinomialTables`)
    come from one alias draw; each of the ``A`` ambiguous trials has ``U`` uniform on
    ``[p_lo, p_lo + 2**-c)`` and succeeds (``U < p``) with probability ``q``, independently,
    so ``Z = S + Binomial(A, q)`` has law ``Binomial(m, p)`` exactly. ``A >= 1`` has
    probability at most ``m 2**-c`` (3% at ``m = 30``); its trials compare ``bits - c`` fresh
    random bits with ``a mod 2**(bits - c)``.

    The alias draw uses 32 random bits (half a word): ``kbits`` choose the column and the
    other ``tbits`` are compared with the first ``tbits`` bits of the column's threshold
    ``prob / 2**(c m)``. Below or above decides; on equality (probability ``2**-tbits``) the
    comparison continues exactly with fresh bits (:meth:`DyadicBinomialTables.resolve_tie`),
    so no rounding enters the law.

    >>> from privhist.core.random import SeededRandom
    >>> binomial_dyadic_tables(4, [0, 2**31, 2**32], SeededRandom(1)).tolist()[::2]
    [0, 4]
    """
    fn = "binomial_dyadic_tables"
    m, b, a, flat = _check_dyadic(m, numerators, bits, fn)
    if m > TABLE_MAX_M:
        raise ValidationError("m", fn, f"at most {TABLE_MAX_M}", m)
    return _tables(m, flat, b, rng).reshape(a.shape)


def _tables(m: int, flat: I64, b: int, rng: RandomSource) -> I64:
    tab = dyadic_binomial_tables(m, min(COARSE_BITS, b))
    out = np.empty(flat.size, dtype=np.int64)
    for start in range(0, flat.size, TABLE_BATCH):
        stop = min(flat.size, start + TABLE_BATCH)
        out[start:stop] = _tables_batch(tab, flat[start:stop], b - tab.c, rng)
    return out


def _tables_batch(tab: DyadicBinomialTables, a: I64, fine: int, rng: RandomSource) -> I64:
    """One batch of :func:`binomial_dyadic_tables` (``a`` int64 numerators in range)."""
    n = a.size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    cells = a >> fine
    lo, hi = int(cells.min()), int(cells.max())
    if not tab.built[lo : hi + 1].all():
        tab.ensure(np.flatnonzero(np.bincount(cells - lo)) + lo)
    draws = rng.uint64((n + 1) // 2).view(np.uint32)[:n]  # two independent 32-bit halves
    col = draws >> np.uint32(tab.tbits)
    v = draws & np.uint32((1 << tab.tbits) - 1)
    packed = tab.packed.ravel()[(cells << tab.kbits) | col]
    top = (packed >> np.uint64(16)).astype(np.uint32)
    outcome = np.where(v < top, col, (packed & np.uint64(0xFFFF)).astype(np.uint32))
    for i in np.flatnonzero(v == top):  # exact continuation, probability 2**-tbits each
        j, k = int(cells[i]), int(col[i])
        outcome[i] = k if tab.resolve_tie(j, k, rng) else int(packed[i] & np.uint64(0xFFFF))
    z = outcome.astype(np.int64)
    amb = np.flatnonzero(z > tab.m)  # outcomes with a >= 1 ambiguous trials
    if amb.size:
        trials = tab.a_of[z[amb]]
        z[amb] = tab.s_of[z[amb]]
        if fine:
            rest = (a[amb] & ((1 << fine) - 1)).astype(np.uint64)
            for t in range(int(trials.max())):
                sel = np.flatnonzero(trials > t)
                u = rng.uint64(sel.size) >> np.uint64(64 - fine)
                z[amb[sel]] += u < rest[sel]
    return z


def cpbm_encode(y: Any, theta: Any, clip: Any, m: int, rng: RandomSource) -> I64:
    """Algorithm 3 for every row of ``y``: ``Z[k] ~ Binomial(m, p[k])`` (values in ``[0, m]``).

    Args:
        y: Representations, shape ``(n, D)`` or ``(D,)``.
        theta: cPBM theta in (0, 1/4].
        clip: Clipping threshold ``C > 0``.
        m: Trials per coordinate, at least 1 (the device sends ``log2(m + 1)`` bits).
        rng: Randomness; ``SecureRandom()`` for real runs.

    Returns:
        int64 array shaped like ``y``.

    >>> from privhist.core.random import SeededRandom
    >>> z = cpbm_encode([[0.5, -0.5], [0.0, 2.0]], 0.25, 1.0, 8, SeededRandom(3))
    >>> z.shape, bool(((0 <= z) & (z <= 8)).all())
    ((2, 2), True)
    """
    m = check_positive_int(m, "cpbm_encode", "m")
    if m > TABLE_MAX_M:
        return binomial_dyadic(m, probability_numerators(y, theta, clip), rng)
    # steps 1-3 together, a cache-sized block of rows at a time
    rows, factor, half_width, shape = _prepare(y, theta, clip, "cpbm_encode")
    tab = dyadic_binomial_tables(m, min(COARSE_BITS, P_BITS))
    fine = P_BITS - tab.c
    n, big = rows.shape
    out = np.empty((n, big), dtype=np.int64)
    step = max(1, TABLE_BATCH // max(1, big))
    num = np.empty((min(step, n), big), dtype=np.int64)
    for start in range(0, n, step):
        stop = min(n, start + step)
        block = num[: stop - start]
        _numerators_into(rows[start:stop], factor[start:stop], half_width, block)
        out[start:stop] = _tables_batch(tab, block.ravel(), fine, rng).reshape(block.shape)
    result: I64 = out.reshape(shape)
    return result


def cpbm_decode(total: Any, n: int, m: int, theta: Any, clip: Any) -> F64:
    """Algorithm 2, step 3 (equation (3)): the mean clipped representation from the sum.

    ``y_hat = C / (m n theta_q) * (S - m n / 2)``, where ``S`` is the secure sum (read as an
    integer in ``[0, n m]``, which :func:`secure_sum_modulus` guarantees).

    >>> cpbm_decode([15, 5], n=2, m=10, theta=0.25, clip=1.0).tolist()
    [1.0, -1.0]
    """
    fn = "cpbm_decode"
    n = check_positive_int(n, fn, "n")
    m = check_positive_int(m, fn, "m")
    tq = quantised_theta(theta, fn)
    c = check_clip(clip, fn)
    s = np.asarray(total)
    if s.dtype.kind not in "iu":
        raise ValidationError("total", fn, "an integer array", f"dtype {s.dtype}")
    if s.size and (s.min() < 0 or s.max() > n * m):
        raise ValidationError("total", fn, f"integers in [0, n * m = {n * m}]", "out of range")
    return np.asarray((s.astype(np.float64) - m * n / 2) * (c / (m * n * float(tq))))


@dataclass(frozen=True)
class Cpbm(Declared):
    """One cPBM configuration: device encoding, server decoding and its privacy.

    Args:
        theta: In (0, 1/4]; the mechanism runs with :func:`quantised_theta`.
        m: Trials per coordinate (at least 1).
        clip: Clipping threshold ``C > 0``.
        dimension: Coordinates per user (``D``).
        n_users: Users whose outputs are summed (fixes the modulus and the accounting).
        bits: Integer width of the secure sum (``n m + 1 <= 2**bits``).

    >>> from privhist.core.random import SeededRandom
    >>> mech = Cpbm(theta=0.2, m=30, clip=1.0, dimension=4, n_users=3)
    >>> z = mech.encode([[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 0, 0.5]], SeededRandom(0))
    >>> mech.modulus, z.shape
    (91, (3, 4))
    """

    theta: float
    m: int
    clip: float
    dimension: int
    n_users: int
    bits: int = 32

    declared: ClassVar[dict[str, Constraint]] = {
        # theta in (0, 1/4] (Section 3.2) and at least one step of the 2**-32 grid of the coins
        "theta": Constraint.real(2.0**-32, 0.25, note=" (the coins' 2**-32 grid)"),
        "m": Constraint.integer(1),
        "clip": Constraint.real(0, open_low=True),
        "dimension": Constraint.integer(1),
        "n_users": Constraint.integer(1),
        "bits": SUM_BITS,
    }

    def __post_init__(self) -> None:
        for name in self.declared:
            self.check_parameter(name, getattr(self, name))
        secure_sum_modulus(self.n_users, self.m, self.bits)  # relational: n m + 1 <= 2**bits

    @property
    def modulus(self) -> int:
        """``M = n m + 1``."""
        return secure_sum_modulus(self.n_users, self.m, self.bits)

    def encode(self, y: Any, rng: RandomSource) -> I64:
        """Algorithm 3 on rows of ``y`` (shape ``(users, dimension)``)."""
        arr = np.asarray(y, dtype=np.float64)
        if arr.ndim != 2 or arr.shape[1] != self.dimension:
            raise ValidationError(
                "y", "Cpbm.encode", f"an array of shape (users, {self.dimension})", arr.shape
            )
        return cpbm_encode(arr, self.theta, self.clip, self.m, rng)

    def encode_batches(self, y_batches: Any, rng: RandomSource) -> Iterator[I64]:
        """Encode an iterable of row batches lazily (for secure sums over many users)."""
        for batch in y_batches:
            yield self.encode(batch, rng)

    def decode(self, total: Any) -> F64:
        """Algorithm 2 step 3 on the secure sum of all ``n_users`` outputs."""
        return cpbm_decode(total, self.n_users, self.m, self.theta, self.clip)

    def variance_bound(self) -> float:
        """Equation (3): ``C**2 / (4 n m theta**2)`` per coordinate of ``y_hat``."""
        tq = float(quantised_theta(self.theta))
        return self.clip**2 / (4 * self.n_users * self.m * tq**2)

    def rdp(self, orders: Any = None) -> RdpCurve:
        """Lemma 2 with ``dimension`` coordinates (replace-one-user neighbours)."""
        return cpbm_rdp(self.n_users, self.theta, self.m, self.dimension, orders)

    def event(self) -> RdpCurveEvent:
        """One secure sum as a privacy event: its Lemma 2 curve at the default orders."""
        event: RdpCurveEvent = self.rdp().to_event()
        return event

    def epsilon(self, delta: float) -> float:
        """Epsilon at ``delta``: the accountant's guarantee of :meth:`event` (Lemma 2 and
        equation (8))."""
        return guarantee_of(self.event(), delta).epsilon
