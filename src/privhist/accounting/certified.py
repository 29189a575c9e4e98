"""Certified privacy-loss-distribution composition: a proven upper bound on the composed delta.

``dp_accounting``'s PLDs (Meiser and Mohammadi 2018; Koskela, Jalko and Honkela 2020;
Doroshenko, Ghazi, Kamath, Kumar and Manurangsi 2022, "Connect the dots", Section 3) round every
privacy loss up to a grid ("pessimistic estimate"), but then compose by float64 FFT and evaluate
the hockey-stick divergence in float64, so the number they return is an estimate, not a bound.
Here the same pessimistic discretisation is followed by arithmetic whose every step is rounded
outwards, so :meth:`CertifiedPLD.delta` is an upper bound on the true delta of the composition.

**The bound and its proof.** Let ``(P, Q)`` be a pair of discrete distributions and
``L = ln(P(x)/Q(x))`` the privacy loss under ``x ~ P`` (``+inf`` where ``Q(x) = 0``). The
hockey-stick divergence is (Balle, Barthe and Gaboardi 2018, Theorem 1; Sommer, Meiser and
Mohammadi 2019, Lemma 5)::

    H_(e^eps)(P || Q) = P(L = inf) + sum_l Pr_P[L = l] (1 - e^(eps - l))_+ .

(1) *Discretisation.* Each atom's loss is replaced by ``h ceil(L_up / h)`` where ``L_up >= L``
is the upper end of an interval-arithmetic enclosure of ``ln P(x) - ln Q(x)`` (mpmath, 100 bits,
on the exact rational masses); its mass by the smallest float ``>= P(x)``. The summand
``m (1 - e^(eps - l))_+`` is non-decreasing in ``l`` and in ``m``, so the discretised delta is
``>=`` the true one at every ``eps``.

(2) *Composition.* For independent (also adaptively chosen, given a dominating pair for each
step: Zhu, Dong and Wang 2022, "Optimal accounting of differential privacy via characteristic
function", Theorem 10) mechanisms the loss of the product pair is the sum of the losses under
the product of the ``P``'s; its law is the convolution of the two loss laws, and a sum involving
an infinite loss is infinite. Convolution has non-negative coefficients, so replacing every mass
by an upper bound gives an upper bound on every mass of the result, and the delta formula is
again non-decreasing in them. The infinite mass of the product is at most
``inf_a (F_b + inf_b) + F_a inf_b`` (``F`` the finite total), computed in exact rationals.

(3) *Outward rounding of the convolution.* Every output of a convolution of non-negative floats
is a sum of ``M`` non-negative products (``M`` the number of non-zero masses of the sparser
operand when shifted adds are used, else the shorter length). In IEEE round-to-nearest, with
``u = 2^-53`` and ``gamma_M = M u / (1 - M u)``, the computed value ``c^`` satisfies
``|c^ - c| <= gamma_M c`` whatever the order of summation and with or without fused
multiply-adds (Higham 2002, "Accuracy and stability of numerical algorithms", Section 3.1,
equation (3.5) with non-negative terms), as long as no product is subnormal. Each output is
therefore multiplied by ``f >= 1 + 4 gamma_(M+1)``; with the rounding of that product,
``c^ f (1 - u) >= c``. Subnormal products and results can be wrong by at most ``2^-1075``
absolute each; ``2^-1074`` times the number of such operations is added to an absolute
``slack`` that every delta includes.

(4) *Truncation.* Mass above an upper index is moved to ``+inf`` (the loss only grows) and mass
below a lower index is moved up to that index; both keep (1)'s monotonicity, so nothing is
added to the slack. Only mass whose total is at most ``tail`` (default ``1e-30``) is moved to
``+inf``, which bounds what truncation can add to any delta.

(5) *Evaluation.* With ``i0`` the least index with ``i0 h > eps`` (decided in rationals)::

    delta(eps) = inf + S1 - e^(eps - i0 h) S2,   S1 = sum_(i>=i0) m_i,
                 S2 = sum_(i>=i0) m_i e^(-(i - i0) h).

``S1`` is a float sum of non-negative terms, multiplied up by ``1 + 3 z u`` (``z`` non-zero
terms); ``S2`` is bounded
below using ``r <= e^-h`` (a float below the enclosure of ``e^-h``), powers ``r^j`` by a
cumulative product (the ``j``-th computed power is at most ``(1 + u)^j`` times ``r^j``, each
product ``m_i r^j`` and the sum add ``gamma_(z+1)`` for ``z`` non-zero terms; taken together,
``S2`` is multiplied down by ``1 - (n + 3 (z + 1)) u``, and terms that reach the subnormal range
are dropped, a lower bound), and ``e^(eps - i0 h)`` is the lower end of an interval enclosure.
The last combination is exact (rational arithmetic on the floats), and the
result is rounded up to a float.

Together: the returned delta is at least the true hockey-stick divergence of the composed pair,
in each direction; :class:`CertifiedAccount` takes the larger direction. The only assumptions are
IEEE-754 binary64 round-to-nearest arithmetic in NumPy's additions and multiplications, and
mpmath's interval arithmetic; no library function (``exp``, ``log``, FFT) is trusted to be
accurate. :attr:`CertifiedPLD.error` states how far above the exact delta of the *discretised*
composition the outward rounding can have lifted the result (a relative and an absolute part),
so that a float computation of the same discretisation (``dp_accounting``'s pessimistic estimate)
should lie below ``delta + error`` up to its own float error.

>>> pair = CertifiedAccount.from_pair({0: 0.75, 1: 0.25}, {0: 0.25, 1: 0.75}, step=2**-10)
>>> two = pair.self_compose(2)
>>> d = two.delta_for_epsilon(0.0)    # 2-fold randomized response 3:1: total variation 1/2
>>> 0.5 <= d < 0.5 + 2 ** -10    # the grid rounds the loss 0 up to 2**-10
True
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
from mpmath import libmp
from mpmath.ctx_iv import MPIntervalContext

from privhist.core.errors import ValidationError
from privhist.core.validation import check_delta, check_positive_int, float_down, float_up

F64 = npt.NDArray[np.float64]

__all__ = [
    "DEFAULT_STEP",
    "CertifiedAccount",
    "CertifiedPLD",
    "compose_accounts",
]

#: default grid of the privacy losses (a power of two, so multiples are exact floats)
DEFAULT_STEP = Fraction(1, 2**12)
#: most grid points a composed distribution may carry (memory)
MAX_POINTS = 1 << 22
#: most multiply-adds one convolution may cost (direct convolution is O(n m))
MAX_WORK = 4 * 10**9

#: shifted adds (one vectorised add per non-zero mass) below this many non-zero masses
_SPARSE = 1 << 14
_U = Fraction(1, 2**53)
_TINY = 2.0**-1000  # below this a float may have lost its relative accuracy
_SUB = Fraction(1, 2**1074)

_IV = MPIntervalContext()
_IV.prec = 100


def _hi(x: Any) -> Fraction:
    p, q = libmp.to_rational(x._mpi_[1])
    return Fraction(p, q)


def _lo(x: Any) -> Fraction:
    p, q = libmp.to_rational(x._mpi_[0])
    return Fraction(p, q)


def _iv(x: Fraction) -> Any:
    return _IV.mpf(x.numerator) / x.denominator


def _gamma(m: int) -> Fraction:
    """``gamma_m = m u / (1 - m u)`` (Higham 2002, Lemma 3.1)."""
    return m * _U / (1 - m * _U)


def _exact_nonneg(value: Any, name: str, function: str) -> Fraction:
    try:
        f = Fraction(value)
    except (TypeError, ValueError, OverflowError):
        raise ValidationError(name, function, "finite numbers >= 0", value) from None
    if f < 0:
        raise ValidationError(name, function, "finite numbers >= 0", value)
    return f


def _check_step(step: Any, function: str) -> Fraction:
    f = _exact_nonneg(step, "step", function)
    if f <= 0 or f > 1:
        raise ValidationError("step", function, "a number in (0, 1]", step)
    return f


def _sum_up(values: F64) -> Fraction:
    """An upper bound on the exact sum of non-negative floats (zeros add exactly, so only the
    non-zero terms count in the error bound ``gamma_(n-1)``)."""
    n = int(np.count_nonzero(values))
    if n == 0:
        return Fraction(0)
    s = Fraction(float(np.sum(values)))
    return s * (1 + 3 * n * _U) + n * _SUB


@dataclass(frozen=True)
class CertifiedPLD:
    """A pessimistic privacy loss distribution in one direction, with outward-rounded masses.

    Attributes:
        step: The grid ``h`` (the loss of index ``i`` is ``i h``).
        offset: The index of ``masses[0]``.
        masses: Upper bounds on the probability of each grid loss (float64, non-negative).
        infinity: Upper bound on the probability of an infinite loss.
        slack: Absolute amount added to every delta (subnormal rounding, module notes (3)).
        relative: Relative inflation applied so far: the masses are at most
            ``(1 + relative)`` times the exact masses of the discretised composition.
        compositions: How many base distributions were composed.
    """

    step: Fraction
    offset: int
    masses: F64
    infinity: Fraction
    slack: Fraction
    relative: Fraction
    compositions: int

    @classmethod
    def from_pmfs(
        cls,
        upper: Mapping[Any, Any],
        lower: Mapping[Any, Any],
        step: Any = DEFAULT_STEP,
    ) -> CertifiedPLD:
        """The loss ``ln(upper(x) / lower(x))`` under ``x ~ upper``, discretised upwards.

        Probabilities are read as exact rationals (a float is its exact binary value).

        >>> pld = CertifiedPLD.from_pmfs({"a": 0.5, "b": 0.5}, {"a": 1.0}, step=0.5)
        >>> pld.infinity, pld.offset, pld.masses.tolist()   # ln(1/2) = -0.69 rounds up to -0.5
        (Fraction(1, 2), -1, [0.5])
        """
        fn = "CertifiedPLD.from_pmfs"
        h = _check_step(step, fn)
        infinity = Fraction(0)
        cells: dict[int, Fraction] = {}
        for atom, value in upper.items():
            pu = _exact_nonneg(value, "upper", fn)
            if pu == 0:
                continue
            pl = _exact_nonneg(lower.get(atom, 0), "lower", fn)
            if pl == 0:
                infinity += pu
                continue
            loss = _hi(_IV.log(_iv(pu)) - _IV.log(_iv(pl)))
            index = math.ceil(loss / h)
            cells[index] = cells.get(index, Fraction(0)) + pu
        if not cells:
            return cls(h, 0, np.zeros(0), infinity, Fraction(0), Fraction(0), 1)
        lo, hi = min(cells), max(cells)
        if hi - lo + 1 > MAX_POINTS:
            raise ValidationError(
                "step", fn, f"coarse enough for at most {MAX_POINTS} grid points", step
            )
        masses = np.zeros(hi - lo + 1)
        for index, mass in cells.items():
            masses[index - lo] = float_up(mass)
        return cls(h, lo, masses, infinity, Fraction(0), Fraction(0), 1)

    @classmethod
    def from_losses(
        cls, atoms: Iterable[tuple[Fraction, Fraction]], step: Any = DEFAULT_STEP
    ) -> CertifiedPLD:
        """From ``(mass, loss)`` pairs that are upper bounds on each atom's probability and
        privacy loss (e.g. the upper ends of interval enclosures): by module notes (1) both may
        be rounded up. ``loss = None`` is not accepted; give infinite losses to
        :meth:`from_pmfs`.

        >>> CertifiedPLD.from_losses([(Fraction(1, 2), Fraction(1, 3))], step=0.25).offset
        2
        """
        fn = "CertifiedPLD.from_losses"
        h = _check_step(step, fn)
        cells: dict[int, Fraction] = {}
        for mass, loss in atoms:
            mu = _exact_nonneg(mass, "atoms", fn)
            if mu == 0:
                continue
            index = math.ceil(Fraction(loss) / h)
            cells[index] = cells.get(index, Fraction(0)) + mu
        if not cells:
            return cls(h, 0, np.zeros(0), Fraction(0), Fraction(0), Fraction(0), 1)
        lo, hi = min(cells), max(cells)
        if hi - lo + 1 > MAX_POINTS:
            raise ValidationError(
                "step", fn, f"coarse enough for at most {MAX_POINTS} grid points", step
            )
        masses = np.zeros(hi - lo + 1)
        for index, mu in cells.items():
            masses[index - lo] = float_up(mu)
        return cls(h, lo, masses, Fraction(0), Fraction(0), Fraction(0), 1)

    # -- composition -------------------------------------------------------------------------

    @property
    def finite_mass(self) -> Fraction:
        """An upper bound on the total finite mass."""
        return _sum_up(self.masses)

    def compose(self, other: CertifiedPLD, tail: float = 1e-30) -> CertifiedPLD:
        """The loss law of the two mechanisms run together (module notes (2)-(4)).

        >>> a = CertifiedPLD.from_pmfs({0: 0.75, 1: 0.25}, {0: 0.25, 1: 0.75}, step=0.5)
        >>> aa = a.compose(a)    # ln 3 rounds up to 1.5, -ln 3 to -1: sums -2, 0.5, 3
        >>> aa.offset, [round(float(x), 12) for x in aa.masses]
        (-4, [0.0625, 0.0, 0.0, 0.0, 0.0, 0.375, 0.0, 0.0, 0.0, 0.0, 0.5625])
        >>> bool(aa.masses[0] >= 1 / 16 and aa.masses[5] >= 6 / 16 and aa.masses[10] >= 9 / 16)
        True
        """
        if not isinstance(other, CertifiedPLD) or other.step != self.step:
            raise ValidationError("other", "CertifiedPLD.compose", "a PLD on the same grid", other)
        fa, fb = self.finite_mass, other.finite_mass
        infinity = self.infinity * (fb + other.infinity) + fa * other.infinity
        a, b = self.masses, other.masses
        if a.size == 0 or b.size == 0:
            empty = np.zeros(0)
            return CertifiedPLD(
                self.step,
                0,
                empty,
                infinity,
                self.slack + other.slack,
                max(self.relative, other.relative),
                self.compositions + other.compositions,
            )
        if a.size + b.size - 1 > MAX_POINTS:
            raise ValidationError(
                "other",
                "CertifiedPLD.compose",
                f"a composition of at most {MAX_POINTS} grid points (use a coarser step)",
                f"{a.size + b.size - 1} points",
            )
        nza, nzb = np.flatnonzero(a), np.flatnonzero(b)
        work = min(nza.size, nzb.size) * max(a.size, b.size)
        if work > MAX_WORK:
            raise ValidationError(
                "other",
                "CertifiedPLD.compose",
                f"a convolution of at most {MAX_WORK:.0e} multiply-adds (use a coarser step)",
                f"{work:.2e}",
            )
        if min(nza.size, nzb.size) <= _SPARSE:
            if nza.size < nzb.size:
                a, b, nza, nzb = b, a, nzb, nza
            out = np.zeros(a.size + b.size - 1)
            for j in nzb.tolist():
                out[j : j + a.size] += a * b[j]
            terms = int(nzb.size)
        else:
            out = np.convolve(a, b)
            terms = int(min(a.size, b.size))
        factor = float_up(1 + 4 * _gamma(terms + 1))
        out *= factor
        # subnormal operations: at most `terms` products and the scaling per output
        slack = self.slack + other.slack + (terms + 1) * out.size * _SUB
        relative = (1 + self.relative) * (1 + other.relative) * Fraction(factor) * (1 + _U) - 1
        pld = CertifiedPLD(
            self.step,
            self.offset + other.offset,
            out,
            infinity,
            slack,
            relative,
            self.compositions + other.compositions,
        )
        return pld.truncated(tail)

    def self_compose(self, times: int, tail: float = 1e-30) -> CertifiedPLD:
        """``times``-fold composition with itself, by repeated squaring."""
        k = check_positive_int(times, "CertifiedPLD.self_compose", "times")
        if k <= 256 and np.count_nonzero(self.masses) <= _SPARSE:
            # a sparse base: k - 1 shifted-add convolutions cost less than squaring
            out = self
            for _ in range(k - 1):
                out = out.compose(self, tail)
            return out
        result: CertifiedPLD | None = None
        power = self
        while True:
            if k & 1:
                result = power if result is None else result.compose(power, tail)
            k >>= 1
            if not k:
                break
            power = power.compose(power, tail)
        assert result is not None
        return result

    def truncated(self, tail: float = 1e-30) -> CertifiedPLD:
        """Trim the grid (module notes (4)): the highest losses whose total mass is at most
        ``tail`` go to ``+inf``; zero masses at both ends are dropped; the lowest losses whose
        total mass is at most ``tail`` are merged into the next index up."""
        if not (math.isfinite(tail) and tail >= 0):
            raise ValidationError("tail", "CertifiedPLD.truncated", "a number >= 0", tail)
        m = self.masses
        nz = np.flatnonzero(m)
        if nz.size == 0:
            return CertifiedPLD(
                self.step,
                0,
                np.zeros(0),
                self.infinity,
                self.slack,
                self.relative,
                self.compositions,
            )
        first, last = int(nz[0]), int(nz[-1])
        infinity = self.infinity
        if tail > 0:
            # running sums are not trusted: an upper bound on the moved mass is recomputed
            suffix = np.cumsum(m[::-1])[::-1]
            cut = int(np.searchsorted(-suffix, -tail * 0.5, side="left"))  # suffix <= tail/2
            cut = max(cut, first + 1)
            if cut <= last:
                moved = _sum_up(m[cut:])
                if moved <= Fraction(tail):
                    infinity += moved
                    last = cut - 1
            prefix = np.cumsum(m)
            low = int(np.searchsorted(prefix, tail * 0.5, side="right"))
            low = min(low, last)
            if low > first:
                merged = m[first : low + 1].copy()
                head = float_up(_sum_up(merged))
                new = m[low : last + 1].copy()
                new[0] = head
                return CertifiedPLD(
                    self.step,
                    self.offset + low,
                    new,
                    infinity,
                    self.slack,
                    self.relative,
                    self.compositions,
                )
        return CertifiedPLD(
            self.step,
            self.offset + first,
            m[first : last + 1].copy(),
            infinity,
            self.slack,
            self.relative,
            self.compositions,
        )

    # -- evaluation --------------------------------------------------------------------------

    def delta(self, epsilon: float) -> Fraction:
        """A proven upper bound on ``H_(e^epsilon)`` of the composed pair (module notes (5)).

        >>> a = CertifiedPLD.from_pmfs({0: 0.75, 1: 0.25}, {0: 0.25, 1: 0.75}, step=2**-20)
        >>> float(a.delta(0.0)) >= 0.5 and float(a.delta(0.0)) < 0.5 + 1e-6
        True
        """
        eps = Fraction(epsilon)
        h = self.step
        i0 = math.floor(eps / h) + 1  # least i with i h > eps
        start = max(i0 - self.offset, 0)
        m = self.masses[start:]
        total = self.infinity + self.slack
        if m.size == 0:
            return total
        first = self.offset + start  # index of m[0], >= i0
        s1 = _sum_up(m)
        r = float_down(_lo(_IV.exp(-_iv(h))))
        powers = np.empty(m.size)
        powers[0] = 1.0
        if m.size > 1:
            powers[1:] = r
            np.cumprod(powers, out=powers)
        terms = m * powers
        terms[(powers < _TINY) | (terms < _TINY)] = 0.0
        # powers: (1 + u)^-j >= 1 - j u with j < size; products and sum: gamma_(nnz + 1)
        n = int(m.size) + 3 * (int(np.count_nonzero(terms)) + 1)
        s2 = Fraction(float(np.sum(terms))) * (1 - n * _U)
        scale = _lo(_IV.exp(_iv(eps - first * h)))  # e^(eps - first h) <= 1
        return max(total + s1 - scale * s2, total)

    @property
    def error(self) -> tuple[float, float]:
        """``(relative, absolute)``: the outward rounding can lift a delta by at most
        ``relative * delta + absolute`` above the exact delta of the discretised composition
        (evaluation, module notes (5), adds at most ``3 (n + 2) u`` relative more)."""
        n = self.masses.size
        rel = self.relative + 6 * (n + 2) * _U
        return float_up(rel), float_up(self.slack + n * _SUB)


@dataclass(frozen=True)
class CertifiedAccount:
    """Both directions of a neighbouring pair: ``remove`` is the loss ``ln(P/Q)`` under ``P``,
    ``add`` the loss ``ln(Q/P)`` under ``Q``; a delta is the larger of the two."""

    remove: CertifiedPLD
    add: CertifiedPLD

    @classmethod
    def from_pair(
        cls, p: Mapping[Any, Any], q: Mapping[Any, Any], step: Any = DEFAULT_STEP
    ) -> CertifiedAccount:
        """The account of the pair ``(P, Q)``, in both directions."""
        return cls(CertifiedPLD.from_pmfs(p, q, step), CertifiedPLD.from_pmfs(q, p, step))

    def compose(self, other: CertifiedAccount, tail: float = 1e-30) -> CertifiedAccount:
        """Run both (each direction composed with the same direction of the other)."""
        return CertifiedAccount(
            self.remove.compose(other.remove, tail), self.add.compose(other.add, tail)
        )

    def self_compose(self, times: int, tail: float = 1e-30) -> CertifiedAccount:
        """``times``-fold composition."""
        return CertifiedAccount(
            self.remove.self_compose(times, tail), self.add.self_compose(times, tail)
        )

    def delta_fraction(self, epsilon: float) -> Fraction:
        """The exact rational upper bound (the larger direction)."""
        return max(self.remove.delta(epsilon), self.add.delta(epsilon))

    def delta_for_epsilon(self, epsilon: float) -> float:
        """A proven upper bound on delta at ``epsilon`` (rounded up to a float)."""
        if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon >= 0):
            raise ValidationError(
                "epsilon", "CertifiedAccount.delta_for_epsilon", "a finite number >= 0", epsilon
            )
        return float_up(self.delta_fraction(float(epsilon)))

    def epsilon_for_delta(self, delta: float) -> float:
        """The smallest float epsilon (up to 1e-9 relative) whose certified delta is at most
        ``delta``; ``inf`` when none is (infinite mass above ``delta``).

        Every candidate is checked with :meth:`delta_fraction`, so the answer is proven.
        """
        d = Fraction(check_delta(delta, "CertifiedAccount.epsilon_for_delta", positive=True))
        if self.delta_fraction(0.0) <= d:
            return 0.0
        top = max(self.remove.offset + self.remove.masses.size, 0)
        top = max(top, self.add.offset + self.add.masses.size)
        hi = float(top * self.remove.step) + 1.0
        if self.delta_fraction(hi) > d:
            return math.inf
        lo = 0.0
        while hi - lo > 1e-9 * max(hi, 1e-3):
            mid = (lo + hi) / 2
            if self.delta_fraction(mid) <= d:
                hi = mid
            else:
                lo = mid
        return hi

    @property
    def error(self) -> tuple[float, float]:
        """The larger of the two directions' :attr:`CertifiedPLD.error`."""
        a, b = self.remove.error, self.add.error
        return max(a[0], b[0]), max(a[1], b[1])


def compose_accounts(parts: Any) -> CertifiedAccount:
    """The certified composition of ``(account, times)`` parts: each account self-composed
    ``times`` times, then composed in the order given (adaptive composition of dominating pairs,
    Zhu, Dong and Wang 2022, Theorem 10).

    >>> one = CertifiedAccount.from_pair({0: 0.75, 1: 0.25}, {0: 0.25, 1: 0.75}, step=2**-10)
    >>> two = compose_accounts([(one, 1), (one, 1)])
    >>> two.delta_for_epsilon(1.0) == one.self_compose(2).delta_for_epsilon(1.0)
    True
    """
    total: CertifiedAccount | None = None
    for account, times in parts:
        one = account.self_compose(times)
        total = one if total is None else total.compose(one)
    if total is None:
        raise ValidationError("parts", "compose_accounts", "at least one account", parts)
    return total
