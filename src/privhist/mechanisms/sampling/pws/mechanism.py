"""``pws``: private weighted sampling with ``q = 1`` as a central sparse-histogram mechanism.

Cohen, Geri, Sarlos & Stemmer, Sections 4-5 with no sampling (``q_i = 1``): a key of (unit) count
``i`` is reported with the optimal probability ``pi*_i`` of Algorithm 3 / Lemma 4.2 together with a
sanitized count token ``j`` drawn from row ``i`` of the optimal matrix, which for ``q = 1`` is the
shift of Lemma 5.2: ``j = i - K`` with ``Pr[K = k] = d_k = pi*_(k+1) - pi*_k``, not reported when
``K >= i``. The token comes with the maximum-likelihood estimate of equation (9).

Exact drawing. ``d`` is the certified integer pmf of
:func:`~privhist.mechanisms.sampling.pws.frequencies.exact_shift_grid` (numerators over ``2**B``,
every DP constraint between neighbouring rows verified in rational arithmetic; ``B = 62`` while
``delta >= 2**-42`` per key, finer below so that any delta is accepted). On ``2**-62`` ``K`` is
found by comparing one exact uniform integer ``U`` in ``[0, 2**62)`` (the top 62 bits of a 64-bit
word) with the integer cumulative sums of ``d``, so ``Pr[K = k] = d_k / 2**62`` exactly, and the
only randomness is that word. On finer grids one word decides every cumulative sum whose first
64 binary digits differ from it, and a tie draws further words
(:class:`~privhist.mechanisms._grid.LazyInversion`), so ``Pr[K = k] = d_k / 2**B`` exactly.

User-level data: the token is built on the number of distinct units holding the key; each of the
at most ``k`` keys a unit touches gets ``(eps / k, delta / k)`` (basic composition).

This class subclasses :class:`~privhist.mechanisms.optimal_selection.OptimalSelection` because
its key reporting *is* optimal selection's: ``_nums`` holds the reporting numerators by count
(here the cumulative sums of ``d``); it adds the sanitized counts.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.accounting.profile import NOT_RELEASED
from privhist.core.data import Counts
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import RandomSource
from privhist.mechanisms._grid import ONE_BITS, LazyInversion
from privhist.mechanisms.base import KeyDistribution, Mechanism
from privhist.mechanisms.optimal_selection import OptimalSelection
from privhist.mechanisms.registry import register
from privhist.mechanisms.sampling.pws.frequencies import exact_shift_grid


@register
class PWSHistogram(OptimalSelection):
    """Optimal key reporting with sanitized counts (PWS with ``q = 1``).

    >>> m = PWSHistogram(0.6931471805599453, 0.1)
    >>> [round(float(p), 12) for p in m.reporting_probability(6)]
    [0.0, 0.1, 0.3, 0.7, 0.9, 1.0, 1.0]
    >>> {j: round(p, 12) for j, p in m.token_distribution(3).items()}  # 0 = not reported
    {0: 0.3, 1: 0.4, 2: 0.2, 3: 0.1}
    """

    name = "pws"
    summary = "optimal key reporting with sanitized counts (private weighted sampling, q = 1)"
    requires_delta = True
    options = ()
    #: not a candidate for --mechanism default (its tokens are not unbiased counts)
    default_candidate = False

    def __init__(
        self,
        epsilon: float,
        delta: float,
        neighbouring: Neighbouring | None = None,
        *,
        confidence: float = 0.95,
    ) -> None:
        Mechanism.__init__(self, epsilon, delta, neighbouring, confidence=confidence)
        l0 = self.neighbouring.l0_sensitivity
        self.keys_only = False
        self.selection_fraction = 1.0
        self.epsilon_selection = Fraction(self.epsilon)
        self.noise = None
        self._eps_key = Fraction(self.epsilon) / l0
        self._delta_key = Fraction(self.delta) / l0
        self.grid_bits, d = exact_shift_grid(self._eps_key, self._delta_key)
        self._one = 1 << self.grid_bits
        dtype: Any = np.int64 if self.grid_bits == ONE_BITS else object
        self._nums = np.concatenate(([0], np.cumsum(np.array(d, dtype=dtype)))).astype(dtype)
        self._peak = int(np.argmax([float(Fraction(x, self._one)) for x in d]))
        # reporting probabilities by count as floats (2**B may exceed a double)
        self._pi_float = np.array([float(Fraction(int(x), self._one)) for x in self._nums])
        self._inversion = (
            None
            if self.grid_bits == ONE_BITS
            else LazyInversion(self._nums[1:].tolist(), self.grid_bits)
        )

    def _pmf(self) -> npt.NDArray[Any]:
        out: npt.NDArray[Any] = np.diff(self._nums)
        return out

    def parameters(self) -> dict[str, Any]:
        return {
            "shift_support": int(self._nums.shape[0] - 1),
            "units_always_released": int(self._nums.shape[0] - 1),
            "mle_shift": self._peak,
            "reporting_denominator": f"2**{self.grid_bits}",
            "estimator": "maximum likelihood, equation (9): token j -> (j + s) / pi_(j + s)",
        }

    def metadata(self, rng: RandomSource | None = None) -> dict[str, Any]:
        meta = super().metadata(rng)
        # the token is the count minus a random shift (Lemma 5.2), not an estimate of it: name
        # its column so, beside the ``estimate`` column of equation (9)
        meta["value_column"] = "shifted_count"
        meta["columns"] = {
            "shifted_count": "sanitized token j = count - K, K the shift of Lemma 5.2 "
            "(biased low; not an estimate of the count)",
            "estimate": "maximum-likelihood estimate of the count from the token, equation (9)",
        }
        return meta

    def noise_std(self) -> float:
        d = np.array([float(Fraction(int(x), self._one)) for x in self._pmf()])
        k = np.arange(d.shape[0])
        mean = float((k * d).sum())
        return float(np.sqrt(((k - mean) ** 2 * d).sum()))

    def token_distribution(self, units: int) -> dict[int, float]:
        """Row ``units`` of the matrix as floats (token 0 = not reported)."""
        dist = self.key_distribution(units, units).probabilities
        return {(0 if k is NOT_RELEASED else int(k)): float(v) for k, v in dist.items()}

    def key_distribution(self, units: int, count: int) -> KeyDistribution:
        d = self._pmf().tolist()
        probs: dict[Any, Any] = {}
        reported = 0
        for j in range(max(1, units - len(d) + 1), units + 1):
            probs[j] = Fraction(int(d[units - j]), self._one)
            reported += int(d[units - j])
        probs = {NOT_RELEASED: Fraction(self._one - reported, self._one), **probs}
        return KeyDistribution(probs)

    def estimates_for(self, tokens: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """The MLE of equation (9) with ``g(i) = i``: token ``j`` is most likely from count
        ``i = j + s`` (``s`` the mode of the shift), estimated as ``i / pi_i``."""
        i = tokens + self._peak
        pi = self._pi_float[self._index(i)]
        out: npt.NDArray[np.float64] = i / pi
        return out

    def _draw(self, counts: Counts, rng: RandomSource) -> tuple[npt.NDArray[Any], dict[str, Any]]:
        units = counts.unit_counts
        present = units > 0
        keys, u = counts.keys[present], units[present]
        if self._inversion is None:
            word = (rng.uint64(int(u.shape[0])) >> np.uint64(2)).astype(np.int64)  # U < 2**62
            shift = np.searchsorted(self._nums[1:], word, side="right")
        else:
            shift = self._inversion.draw(int(u.shape[0]), rng)
        keep = shift < u
        tokens = (u - shift)[keep].astype(np.int64)
        return keys[keep], {"values": tokens, "estimates": self.estimates_for(tokens)}

    @classmethod
    def test_instances(cls) -> list[Mechanism]:
        return [
            cls(1.0, 1e-3),
            cls(0.6931471805599453, 0.1),
            cls(0.5, 1e-2, Neighbouring.user(2, 1)),
            # delta per key below 2**-42 (a finer grid, lazy inversion) but far above the generic
            # check's slack; 1e-30 and 1e-100 are checked without slack in
            # tests/pws/test_pws_shift_any_delta.py
            cls(1.0, 1e-18),
            cls(1.5, 2e-17, Neighbouring.user(2, 1)),
        ]
