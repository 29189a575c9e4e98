"""The sanitized-frequency matrices of Algorithms 4 and 5 at any delta: built on a grid finer than
``2**-62``, certified, and drawn from exactly.

Cohen, Geri, Sarlos & Stemmer, Section 5 (Algorithm 4, Lemma 5.2, Algorithm 5, Theorem 5.1). On
``2**-62`` (:mod:`.sanitize`) the rows are computed in double precision and certified; that stops
working below about ``delta = 1e-16``, where a double's rounding error (``2**-53`` of an entry
near 1) is as large as delta itself. Below ``2**-42`` per key (where the ``2**-62`` grid leaves
fewer than ``2**20`` units of delta for the rounding slack) the rows are built here instead, as
integers over ``2**B`` with ``B = 62 + ceil(log2(1 / delta)) + ceil(eps / ln 2)``
(:func:`fine_grid_bits`), so delta is at least ``2**62 e^eps`` grid units at every delta; the same
path takes over when the double-precision rows cannot be certified (very large epsilon):

* **Algorithm 4 in integers** (:func:`fine_token_rows`). With a rational ``r = p / q <= e^eps``
  in place of ``e^eps`` (a smaller epsilon, so DP for ``r`` implies DP for ``eps``) and
  ``D = floor(delta 2**B) - s`` grid units, row ``i`` follows the module notes of
  :mod:`.frequencies` step for step: Algorithm 3's ``N_i = min(Q_i 2**(B-62), floor(r N_(i-1))
  + D, 2**B - ceil((2**B - N_(i-1) - D) / r))``; the lower bounds of the prefix sums (sets
  ``{1..j}`` and ``{not reported, 1..j}`` of row ``i - 1`` against row ``i``) rounded *up*; the
  upper bounds ``V_j = floor(r sum_(h=j..i-1) pi_(i-1,h)) + D`` of the suffix sums (sets ``{j..i}``
  of row ``i`` against row ``i - 1``) rounded *down*; the switch index and the remainder entry as
  in the real algorithm. Every prefix and suffix constraint then holds exactly; the rounding can
  only disturb the sign pattern of a few differences near the switch, which the slack ``s`` of a
  few grid units per token absorbs.
* **Algorithm 5 in high precision** (:func:`fine_max_separation_rows`): the piecewise-constant
  densities of :mod:`.max_separation` in mpmath at ``B + 40`` bits, every entry rounded down to
  ``2**-B``, a row whose sum lands above ``Q_i 2**(B-62)`` losing the excess on its largest entry.

Either way the integer matrix is then *certified* by :func:`verify_fine_rows`: non-negative
entries, row ``i`` summing to at most ``Q_i 2**(B - 62)`` (realisable from the sample), and both
hockey-stick divergences between rows ``i - 1`` and ``i`` ("not reported" included) at most
``delta``, in exact integer arithmetic with a rational ``r <= e^eps``. If the certificate fails,
the slack ``s`` grows fourfold and the matrix is rebuilt; the slack is at most a relative
``2**-20`` of delta (the reporting probabilities lose at most that), and in the cases of the
tests it is a relative ``1e-15`` or less.

Draw (:func:`draw_tokens`). A sampled key of frequency ``i`` needs a uniform integer ``V``
below ``Q_i 2**(B - 62)``; its token is ``1 + #{c : C_(i,c) <= V}`` with ``C_(i,c)`` the integer
cumulative sums of row ``i``. ``V = V_hi 2**(B-62) + V_lo`` with ``V_hi`` uniform below ``Q_i``
(one word, as on ``2**-62``) and ``V_lo`` uniform below ``2**(B-62)``; ``V_lo`` is drawn only when
``V_hi`` equals the high part of some ``C_(i,c)`` (a tie, probability at most the number of tokens
times ``2**-62``), since otherwise the high parts decide every comparison. So the token ``j`` is
drawn with probability exactly ``E_(i,j) / (Q_i 2**(B-62))``, and end to end ``E_(i,j) / 2**B``.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource
from privhist.mechanisms._grid import ONE, ONE_BITS, grid_bits
from privhist.mechanisms.sampling.pws.frequencies import SHIFT_MIN_BITS
from privhist.noise import exp_rational_bounds

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
OBJ = npt.NDArray[Any]  # Python ints

#: the double-precision rows of :mod:`.sanitize` serve delta >= 2**-FINE_FROM_BITS per key (the
#: bound below which the exact shift pmf, too, moves to a finer grid)
FINE_FROM_BITS = SHIFT_MIN_BITS


def needs_fine_grid(delta: float) -> bool:
    """Whether the frequency matrices for ``delta`` per key are built on a grid finer than
    ``2**-62`` (``delta < 2**-42``).

    >>> needs_fine_grid(1e-12), needs_fine_grid(1e-13)
    (False, True)
    """
    return Fraction(delta) < Fraction(1, 1 << FINE_FROM_BITS)


def fine_grid_bits(delta: float, epsilon: float = 0.0) -> int:
    """``B = 62 + ceil(log2(1 / delta)) + ceil(epsilon / ln 2)``: the grid of the fine frequency
    matrices, on which delta is at least ``2**62 e^eps`` units. The ``e^eps`` is room for the
    rounding: a grid unit lost on an entry costs up to ``e^eps`` units in a divergence.

    >>> fine_grid_bits(1e-13), fine_grid_bits(2.0**-70), fine_grid_bits(1e-200, 1.0)
    (106, 132, 729)
    """
    extra = math.ceil(epsilon / math.log(2)) if epsilon > 0 else 0
    # grid_bits(delta / 2**62) = 62 + ceil(log2(2**62 / delta)) = 124 + ceil(log2(1 / delta))
    return grid_bits(Fraction(delta) / ONE) - ONE_BITS + extra


def ratio_bound(epsilon: float, bits: int) -> Fraction:
    """A rational ``r <= e^epsilon`` within ``2**-(bits + 64)`` of it: on the grid ``2**-bits``
    the gap ``(e^eps - r)`` times an entry stays far below one grid unit, so rows built with the
    true ``e^eps`` (Algorithm 5 in high precision) lose nothing to it in the certificate.

    >>> e_lo = Fraction(271828182845904523536028747135266249775724709369995, 10**50)
    >>> e_lo < ratio_bound(1.0, 200) < e_lo + Fraction(1, 10**50)  # e = 2.71828...369995957...
    True
    """
    return exp_rational_bounds(Fraction(epsilon), max(128, bits + 64))[0]


def _ceil_div(a: Any, b: int) -> Any:
    return -((-a) // b)


def fine_token_rows(Q: I64, epsilon: float, delta: float, bits: int, slack: int) -> OBJ:
    """Algorithm 4 in integers over ``2**bits`` with ``D = floor(delta 2**bits) - slack``
    (module notes): an ``(m + 1) x (m + 1)`` object array of Python ints, column 0 the
    not-reported mass, row ``i`` with tokens ``1..i``.

    >>> E = fine_token_rows(np.array([0, 2**61, 2**62, 2**62]), 1.0, 1e-20, 129, 0)
    >>> bool((E.sum(axis=1) == 2**129).all()), float(E[1, 1]) / 2**129  # pi_1 = delta
    (True, 1e-20)
    """
    m = int(Q.shape[0]) - 1
    one = 1 << bits
    shift = bits - ONE_BITS
    r = ratio_bound(epsilon, bits)
    p, q = r.numerator, r.denominator
    D = int(Fraction(delta) * one) - slack
    if D <= 0:
        raise ValidationError("delta", "fine_token_rows", "larger than the slack", delta)
    E = np.zeros((m + 1, m + 1), dtype=object)
    E[0, 0] = one
    prev_n = 0
    for i in range(1, m + 1):
        up = (p * prev_n) // q + D  # pi_i <= r pi_(i-1) + delta
        down = one - _ceil_div(q * (one - prev_n - D), p)  # 1 - pi_(i-1) <= r (1 - pi_i) + delta
        n = max(min(int(Q[i]) << shift, up, down), 0)
        R0 = int(E[i - 1, 0])
        P0 = one - n
        if i > 1:
            S = np.cumsum(E[i - 1, 1:i])  # prefix sums of row i - 1, j = 1..i-1
            a = _ceil_div(q * (S - D), p)
            b = _ceil_div(q * (S + (R0 - D)), p) - P0
            pre = np.maximum(np.maximum(a, b), 0)
            suf = np.cumsum(E[i - 1, 1:i][::-1])[::-1]  # sum_(h=j..i-1), j = 1..i-1
        else:
            pre = np.zeros(0, dtype=object)
            suf = np.zeros(0, dtype=object)
        pre_full = np.zeros(i + 1, dtype=object)  # pre_full[j] for j = 0..i
        pre_full[1:i] = pre
        pre_full[i] = pre_full[i - 1]
        V = np.zeros(i + 2, dtype=object)  # V[j] for j = 1..i+1 (V[i+1] = 0)
        V[1:i] = (p * suf) // q + D
        V[i] = D
        # c = largest j in 1..i with V_j + pre_(j-1) > N_i (0 if none)
        fails = np.nonzero((V[1 : i + 1] + pre_full[0:i]) > n)[0]
        c = int(fails[-1]) + 1 if fails.size else 0
        row = E[i]
        if c < i:
            row[c + 1 : i + 1] = V[c + 1 : i + 1] - V[c + 2 : i + 2]
        if c >= 1:
            row[1:c] = pre_full[1:c] - pre_full[0 : c - 1]
            row[c] = n - V[c + 1] - pre_full[c - 1]
        total = int(row[1 : i + 1].sum()) if i else 0
        row[0] = one - total
        prev_n = total
    return E


def fine_max_separation_rows(
    Q: I64, epsilon: float, delta: float, bits: int, slack: int
) -> tuple[OBJ, F64]:
    """Algorithm 5 in mpmath at ``bits + 40`` bits with ``delta - slack 2**-bits``, every entry
    rounded down to ``2**-bits`` (module notes): ``(E, x)`` with ``E`` an object array of Python
    ints (column 0 the not-reported mass) and ``x`` the token values."""
    from privhist.mechanisms.sampling.pws.max_separation import max_separation_pdfs

    m = int(Q.shape[0]) - 1
    one = 1 << bits
    shift = bits - ONE_BITS
    qf = Q.astype(np.float64) / float(ONE)
    with mpmath.workprec(bits + 40):
        d_used = mpmath.mpf(Fraction(delta).numerator) / Fraction(delta).denominator
        d_used -= mpmath.mpf(slack) / one
        A = max_separation_pdfs(qf, epsilon, float(d_used), precision=bits + 40)
        scale = mpmath.mpf(one)
        body = [
            [max(0, min(one, int(mpmath.floor(v * scale)))) for v in row[1:]] for row in A.matrix
        ]
        x = np.array([float(v) for v in A.breakpoints], dtype=np.float64)
    cols = len(body[0])
    E = np.zeros((m + 1, cols + 1), dtype=object)
    for i in range(1, m + 1):
        row = body[i]
        cap = int(Q[i]) << shift
        excess = sum(row) - cap
        if excess > 0:  # a float-precision row may sum a few units above Q_i
            top = max(range(cols), key=row.__getitem__)
            row[top] -= excess
        E[i, 1:] = row
        E[i, 0] = one - sum(row)
    E[0, 0] = one
    return E, x


def verify_fine_rows(E: OBJ, Q: npt.ArrayLike, epsilon: float, delta: float, bits: int) -> bool:
    """Certify an integer end-to-end matrix over ``2**bits`` (module notes): entries ``>= 0``,
    ``E[i, 0] = 2**bits - sum_(j>=1) E[i, j]``, ``sum_(j>=1) E[i, j] <= Q_i 2**(bits - 62)``,
    ``E[0]`` not reporting, and both divergences between rows ``i - 1`` and ``i`` at most delta
    in exact integers with a rational ``r <= e^epsilon``.

    >>> E = np.array([[2**100, 0], [3 * 2**98, 2**98]], dtype=object)  # pi_1 = 1/4
    >>> [verify_fine_rows(E, [0, 2**62], 1.0, d, 100) for d in (0.25, 0.2)]
    [True, False]
    """
    Ea = np.asarray(E, dtype=object)
    Qa = [int(x) for x in np.asarray(Q).tolist()]
    one = 1 << bits
    shift = bits - ONE_BITS
    if Ea.ndim != 2 or Ea.shape[0] != len(Qa) or Ea.shape[0] < 2 or Ea.shape[1] < 2:
        return False
    if any(int(v) < 0 for v in Ea.ravel().tolist()) or any(int(v) for v in Ea[0, 1:].tolist()):
        return False
    for i in range(Ea.shape[0]):
        s = int(Ea[i, 1:].sum())
        if int(Ea[i, 0]) != one - s or s > Qa[i] << shift:
            return False
    r = ratio_bound(epsilon, bits)
    p, qd = r.numerator, r.denominator
    d = Fraction(delta)
    budget = qd * d.numerator * one  # compare sums scaled by qd and delta's denominator
    for i in range(1, Ea.shape[0]):
        a, b = Ea[i - 1], Ea[i]
        for x, y in ((a, b), (b, a)):
            h = int(np.maximum(qd * x - p * y, 0).sum())
            if h * d.denominator > budget:
                return False
    return True


def certified_fine_rows(
    Q: I64, epsilon: float, delta: float, rule: str
) -> tuple[int, OBJ, float, F64 | None]:
    """``(B, E, delta_used, x)``: the certified fine matrix for ``rule`` (``"integer-tokens"``
    or ``"max-separation"``; ``x`` the latter's token values, else None), the slack grown until
    :func:`verify_fine_rows` holds (module notes)."""
    bits = fine_grid_bits(delta, epsilon)
    m = int(Q.shape[0]) - 1
    units = int(Fraction(delta) * (1 << bits))
    r_up = math.ceil(math.exp(min(epsilon, 700.0))) + 2
    cap = units >> 20  # at most a relative 2**-20 of delta
    slack = 0
    while True:
        x: F64 | None = None
        if rule == "max-separation":
            E, x = fine_max_separation_rows(Q, epsilon, delta, bits, slack)
        else:
            E = fine_token_rows(Q, epsilon, delta, bits, slack)
        if verify_fine_rows(E, Q, epsilon, delta, bits):
            used = float(Fraction(units - slack, 1 << bits))
            return bits, E, used, x
        if slack >= cap:
            break
        # a few grid units per token and unit of e^eps; the last attempt is the cap itself
        slack = min(max(4 * slack, 16 * (m + 2) * r_up), cap)
    raise ValidationError(  # pragma: no cover - not reached in the cases measured
        "delta", "frequency_sanitizer", "a value admitting a certified matrix", delta
    )


def fine_to_float(E: OBJ, bits: int) -> F64:
    """``E / 2**bits`` as doubles, each entry to a relative ``2**-52`` (then subnormal or 0 only
    where the value itself is below the double range).

    >>> fine_to_float(np.array([[3 * 2**1099, 2**1199]], dtype=object), 1200).tolist()
    [[1.1832913578315177e-30, 0.5]]
    """
    if bits <= 1000:  # every entry converts to a double exactly rounded; the scaling is exact
        out: F64 = np.ldexp(E.astype(np.float64), -bits)
        return out

    def one(x: Any) -> float:
        v = int(x)
        drop = max(0, v.bit_length() - 64)
        return math.ldexp(float(v >> drop), drop - bits)

    conv = np.frompyfunc(one, 1, 1)
    return np.asarray(conv(E), dtype=np.float64)


def split_cumulative(E: OBJ, bits: int) -> tuple[I64, OBJ]:
    """``(hi, lo)`` of the cumulative sums ``C_(i,c) = E_(i,1) + ... + E_(i,c+1)``:
    ``hi = C >> (bits - 62)`` (int64) and ``lo = C mod 2**(bits - 62)`` (Python ints)."""
    shift = bits - ONE_BITS
    C = np.cumsum(E[:, 1:], axis=1)
    hi = (C >> shift).astype(np.int64)
    lo = C & ((1 << shift) - 1)
    return hi, lo


def draw_tokens(f: I64, v_hi: I64, hi: I64, lo: OBJ | None, bits: int, rng: RandomSource) -> I64:
    """The token ``1 + #{c : C_(f,c) <= V}`` for each key (frequency ``f[k]``, ``v_hi[k]`` the
    high part of ``V``, uniform below ``Q_f``), one ``searchsorted`` per distinct frequency. On
    ``2**-62`` (``lo`` None) ``V = v_hi`` and the high parts decide; on a finer grid the low part
    of ``V`` is drawn only on a tie (module notes)."""
    shift = bits - ONE_BITS
    n = int(f.shape[0])
    out = np.zeros(n, dtype=np.int64)
    order = np.argsort(f, kind="stable")
    fs = f[order]
    starts = np.flatnonzero(np.r_[True, fs[1:] != fs[:-1]]) if n else np.zeros(0, dtype=int)
    ends = np.r_[starts[1:], n] if n else starts
    for s0, s1 in zip(starts.tolist(), ends.tolist(), strict=True):
        idx = order[s0:s1]
        row = int(fs[s0])
        right = np.searchsorted(hi[row], v_hi[idx], side="right")
        if lo is None:
            out[idx] = right + 1
            continue
        left = np.searchsorted(hi[row], v_hi[idx], side="left")
        count = left.astype(np.int64)
        for t in np.flatnonzero(right > left).tolist():
            v_lo = rng.randbelow(1 << shift)
            c = int(left[t])
            while c < int(right[t]) and int(lo[row, c]) <= v_lo:
                c += 1
            count[t] = c
        out[idx] = count + 1
    return out
