"""``Budget``: an (epsilon, delta) pair as a frozen value object."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from privhist.core.validation import check_delta, check_epsilon


@dataclass(frozen=True, order=False)
class Budget:
    """An (epsilon, delta) privacy budget.

    ``Budget`` values are compared and added with basic composition (Dwork-Roth Theorem 3.16):
    ``a + b`` spends ``a.epsilon + b.epsilon`` and ``a.delta + b.delta``.

    >>> Budget(1.0, 1e-6) + Budget(0.5, 0)
    Budget(epsilon=1.5, delta=1e-06)
    >>> Budget(0.5, 0) <= Budget(1.0, 1e-6)
    True
    """

    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon, "Budget"))
        object.__setattr__(self, "delta", check_delta(self.delta, "Budget"))

    @property
    def epsilon_exact(self) -> Fraction:
        """The epsilon as the exact rational value of its float."""
        return Fraction(self.epsilon)

    @property
    def delta_exact(self) -> Fraction:
        """The delta as the exact rational value of its float."""
        return Fraction(self.delta)

    @property
    def is_pure(self) -> bool:
        return self.delta == 0

    def __add__(self, other: Budget) -> Budget:
        if not isinstance(other, Budget):
            return NotImplemented
        return Budget(
            self.epsilon + other.epsilon, min(self.delta + other.delta, math.nextafter(1, 0))
        )

    def __mul__(self, k: int) -> Budget:
        """k-fold basic composition."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            return NotImplemented
        return Budget(self.epsilon * k, min(self.delta * k, math.nextafter(1, 0)))

    __rmul__ = __mul__

    def __le__(self, other: Budget) -> bool:
        """``a <= b`` when ``a`` spends no more than ``b`` in both coordinates."""
        if not isinstance(other, Budget):
            return NotImplemented
        return self.epsilon <= other.epsilon and self.delta <= other.delta

    def __str__(self) -> str:
        if self.delta == 0:
            return f"({self.epsilon:.6g}, 0)-DP"
        return f"({self.epsilon:.6g}, {self.delta:.3g})-DP"
