"""Local-DP baseline: Hadamard response (Acharya, Sun & Zhang, AISTATS 2019).

Bharadwaj & Cormode (AISTATS 2022), Section 5, use "local differential privacy based on Hadamard
encoding of elements from the domain (Acharya et al., 2019)" as their local-model baseline. We
implement Acharya, Sun & Zhang's Hadamard response in its high-privacy form (one Hadamard row per
item, the form their paper uses for eps of order 1; their blocked variant for large eps is not
implemented):

* **Encoding.** Let ``K' = 2^k`` be the smallest power of two with ``K' >= B + 1`` and
  ``H`` the ``K' x K'`` Sylvester-Hadamard matrix, ``H[r, y] = (-1)^popcount(r & y)``. Item ``x``
  owns the set ``C_x = {y : H[x + 1, y] = +1}`` of ``K' / 2`` outputs (row 0, all ones, is
  skipped). The client reports ``y`` with

      P[y | x] = L / ((1 + L) K'/2)  for y in C_x,   1 / ((1 + L) K'/2)  otherwise,

  i.e. with probability ``L / (1 + L)`` a uniform element of ``C_x``, else a uniform element of
  its complement.
* **Decoding.** Two distinct non-zero rows agree on exactly half of the columns, so for an input
  ``z != x`` the report falls in ``C_x`` with probability 1/2, and for ``z = x`` with probability
  ``L / (1 + L)``. With ``h`` the histogram of the ``n`` reports and ``t = H h`` (a fast
  Walsh-Hadamard transform, ``O(K' log K')``), ``t[x + 1] = 2 |{reports in C_x}| - n`` and

      E[t[x + 1]] = n_x (L - 1) / (L + 1),

  so ``n_hat_x = (L + 1) / (L - 1) * t[x + 1]`` is unbiased for the count ``n_x``.

**Exactness and guarantee.** ``L`` is a rational *lower* bound on ``e^eps``
(:func:`privhist.noise.exp_rational_bounds`, then :func:`privhist.noise.rational_at_most`).
Every report probability ratio is ``L`` or ``1 / L``, so each client's report is exactly
``ln L``-locally DP with ``ln L <= eps``: for any two inputs, any output, the probabilities differ
by a factor at most ``L``. The in/out choice is an exact Bernoulli(``L / (1 + L)``)
(:func:`privhist.noise.bernoulli_rational`); the uniform element of ``C_x`` (or its complement) is
a uniform ``k``-bit word ``y`` with, when ``popcount((x + 1) & y)`` has the wrong parity, the
lowest set bit of ``x + 1`` flipped — a bijection between the two halves, so the result is uniform
on the wanted half.

**Neighbours.** Local DP holds for any change of one client's item, so the collection of reports
is (ln L, 0)-DP for *replace-one* neighbours. Under *add/remove* the analyst would see one report
more or fewer, which no epsilon covers; the guarantee holds when every contacted client sends
exactly one report, an abstaining one (the paper's cohort convention, Section 3.2) a *dummy
report*: a uniform element of ``[0, K')``. Its probability is ``1/K'`` against ``2L/((1+L)K')``
or ``2/((1+L)K')`` for any item, ratios at most ``(1+L)/2 <= L`` either way, so replacing a
client by an abstainer is ``(ln((1+L)/2), 0)`` and the collection stays ``(ln L, 0)``. A uniform
report has mean 0 in every row ``x + 1 >= 1`` of ``H``, so the estimates stay unbiased
(``encode(..., abstaining=k)``).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from privhist.accounting.accountant import guarantee_of
from privhist.accounting.composition import ApproxDPEvent
from privhist.core.budget import Budget
from privhist.core.constraints import Constraint, Declared
from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource
from privhist.core.validation import check_positive_int
from privhist.federated.baselines._items import DOMAIN_SIZE, check_items
from privhist.noise import bernoulli_rational, exp_rational_bounds, rational_at_most

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

_NAME = "HadamardResponse"
#: denominator bound of the rational lower bound on e^eps
_EXP_DENOMINATOR = 1 << 32


def walsh_hadamard_exact(values: Any) -> npt.NDArray[Any]:
    """Fast Walsh-Hadamard transform ``H v`` in Sylvester (natural) order, ``O(K log K)``.

    ``H`` is :func:`scipy.linalg.hadamard` of the same size; integer inputs stay exact (int64).

    Args:
        values: A one-dimensional array whose length is a power of two.

    Returns:
        A new array ``H @ values`` (int64 for integer input, float64 otherwise).

    >>> walsh_hadamard_exact(np.array([1, 0, 0, 0])).tolist()
    [1, 1, 1, 1]
    >>> walsh_hadamard_exact(np.array([0, 1, 0, 0])).tolist()
    [1, -1, 1, -1]
    """
    arr = np.asarray(values)
    n = arr.shape[0] if arr.ndim == 1 else 0
    if arr.ndim != 1 or n == 0 or n & (n - 1):
        raise ValidationError(
            "values", "walsh_hadamard_exact", "a 1-d array whose length is a power of two", n
        )
    a = arr.astype(np.int64 if arr.dtype.kind in "iub" else np.float64)
    h = 1
    while h < n:
        # Sylvester: H_2h = [[H_h, H_h], [H_h, -H_h]] applied to consecutive blocks of 2h
        blocks = a.reshape(-1, 2, h)
        top, bottom = blocks[:, 0, :], blocks[:, 1, :]
        a = np.concatenate((top + bottom, top - bottom), axis=1)
        h *= 2
    return a.reshape(n)


class HadamardResponse(Declared):
    """Hadamard response: each client sends one ``k``-bit report, ``ln L <= eps``-locally DP.

    Args:
        epsilon: Local privacy parameter, > 0.
        domain_size: Number of buckets ``B`` (public), in ``[1, 2**26]``.

    >>> from privhist.core.random import SeededRandom
    >>> hr = HadamardResponse(1.0, 5)
    >>> hr.width, hr.guarantee().epsilon <= 1.0
    (8, True)
    >>> hr.estimate(np.array([0, 1, 1]), SeededRandom(0)).shape
    (5,)
    """

    declared: ClassVar[dict[str, Constraint]] = {
        "epsilon": Constraint.real(0, open_low=True),
        "domain_size": DOMAIN_SIZE,
    }

    def __init__(self, epsilon: float, domain_size: int) -> None:
        self.epsilon: float = self.check_parameter("epsilon", epsilon)
        self.domain_size: int = self.check_parameter("domain_size", domain_size)
        self.bits = max(1, self.domain_size.bit_length())  # 2**bits >= B + 1
        self.width = 1 << self.bits
        lo, _ = exp_rational_bounds(Fraction(self.epsilon))
        self.ratio: Fraction = rational_at_most(lo, _EXP_DENOMINATOR)
        if self.ratio <= 1:
            raise ValidationError(
                "epsilon", _NAME, ">= 2**-31 (so that e^eps > 1 is kept)", epsilon
            )
        # (L + 1) / (L - 1), the debiasing factor of the decoder
        self.scale = (self.ratio + 1) / (self.ratio - 1)

    @property
    def local_epsilon(self) -> float:
        """``ln L`` rounded up (and never above ``epsilon``, which it is below exactly)."""
        value = math.log(self.ratio.numerator) - math.log(self.ratio.denominator)
        return min(self.epsilon, math.nextafter(value, math.inf))

    def guarantee(self) -> Budget:
        """``(ln L, 0)``: local DP of every report, hence of the collection, for replace-one
        neighbours; for add/remove neighbours when abstaining contacted clients send dummy
        reports (``encode(..., abstaining=k)``; module notes). The accountant's guarantee of
        :meth:`event`."""
        return guarantee_of(self.event())

    def event(self) -> ApproxDPEvent:
        """The collection as a privacy event: pure ``ln L`` (:attr:`local_epsilon`)."""
        return ApproxDPEvent(self.local_epsilon, 0.0)

    def dummy_distribution(self) -> dict[int, Fraction]:
        """The exact law of an abstaining client's dummy report: uniform on ``[0, width)``."""
        return dict.fromkeys(range(self.width), Fraction(1, self.width))

    def report_distribution(self, item: int) -> dict[int, Fraction]:
        """The exact distribution ``y -> P[y | item]`` of one client's report (for tests)."""
        if not 0 <= item < self.domain_size:
            raise ValidationError(
                "item", "report_distribution", f"in [0, {self.domain_size})", item
            )
        half = self.width // 2
        inside = self.ratio / ((1 + self.ratio) * half)
        outside = 1 / ((1 + self.ratio) * half)
        r = item + 1
        return {y: inside if (r & y).bit_count() % 2 == 0 else outside for y in range(self.width)}

    def encode(self, items: Any, rng: RandomSource, abstaining: int = 0) -> I64:
        """One report in ``[0, width)`` per client, vectorised (no per-client Python loop).

        Args:
            items: The participating clients' bucket ids.
            rng: Source of randomness.
            abstaining: Contacted clients without an item; each sends a uniform dummy report
                (needed for the add/remove guarantee, see the module notes). Their reports
                follow the clients' reports.
        """
        x = check_items(items, self.domain_size, "HadamardResponse.encode")
        k = check_positive_int(abstaining, "HadamardResponse.encode", "abstaining", minimum=0)
        dummies = (rng.uint64(k) >> np.uint64(64 - self.bits)).astype(np.int64)
        n = x.shape[0]
        if n == 0:
            return dummies
        num, den = self.ratio.numerator, self.ratio.denominator
        inside = bernoulli_rational(num, num + den, rng, size=n)
        y = rng.uint64(n) >> np.uint64(64 - self.bits)
        rows = (x + 1).astype(np.uint64)
        odd = (np.bitwise_count(rows & y) & np.uint8(1)).astype(np.bool_)
        # wanted parity: even inside C_x (H = +1), odd outside; fix by flipping the lowest set bit
        wrong = odd == inside
        lowbit = rows & (~rows + np.uint64(1))
        y = np.where(wrong, y ^ lowbit, y)
        return np.concatenate((y.astype(np.int64), dummies))

    def decode(self, reports: Any) -> F64:
        """Unbiased per-bucket count estimates from the reports (module notes)."""
        rep = np.asarray(reports)
        if rep.ndim != 1 or (rep.size and (rep.dtype.kind not in "iu")):
            raise ValidationError(
                "reports", "HadamardResponse.decode", "a 1-d integer array", f"dtype {rep.dtype}"
            )
        if rep.size and (rep.min() < 0 or rep.max() >= self.width):
            raise ValidationError(
                "reports", "HadamardResponse.decode", f"values in [0, {self.width})", "out of range"
            )
        h = np.bincount(rep.astype(np.int64), minlength=self.width)
        t = walsh_hadamard_exact(h)
        return t[1 : self.domain_size + 1].astype(np.float64) * float(self.scale)

    def estimate(self, items: Any, rng: RandomSource, abstaining: int = 0) -> F64:
        """Encode every client's item (and ``abstaining`` dummy reports) and decode: unbiased
        estimates of the bucket counts."""
        return self.decode(self.encode(items, rng, abstaining))

    def variance(self, counts: Any, abstaining: int = 0) -> F64:
        """Exact variance of each bucket's estimate given the true counts (floats).

        ``t[x + 1]`` is a sum of independent +-1 terms with mean ``(L - 1)/(L + 1)`` for clients
        holding ``x`` and 0 otherwise (dummy reports included), so
        ``Var = scale**2 (n - n_x ((L - 1)/(L + 1))**2)`` with ``n`` all reports.
        """
        c = np.asarray(counts, dtype=np.float64)
        n = float(c.sum()) + abstaining
        s = float(self.scale)
        out: F64 = s * s * (n - c / (s * s))
        return out

    def parameters(self) -> dict[str, Any]:
        """Public parameters for reports and experiment tables."""
        return {
            "mechanism": "hadamard-response",
            "epsilon": self.epsilon,
            "local_epsilon": self.local_epsilon,
            "exp_epsilon_lower_bound": str(self.ratio),
            "domain_size": self.domain_size,
            "report_bits": self.bits,
            "neighbouring": "replace one client's item; add/remove with dummy reports",
        }
