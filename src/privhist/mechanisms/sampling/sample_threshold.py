"""Sample-and-threshold histograms (Bharadwaj & Cormode, AISTATS 2022, Section 3).

Every privacy unit is kept with probability ``p`` (Poisson sampling); each key's number of sampled
units is counted and the key is released, with that count, when the count is at least ``tau``.
No noise is added: the privacy comes from the sampling, and a key absent from the input can never
appear (its count is 0 < tau). The release carries, per key, the sampled count (``values``), the
estimate ``count / p`` of the number of units holding the key (``estimates``) and a
selection-adjusted exact confidence interval for that number (``lower``/``upper``; see
:mod:`privhist.mechanisms.sampling.accuracy`).

**Counts and units.** The mechanism works on aggregated counts: key ``i`` held by ``u_i`` units
gets a sampled count ``Binomial(u_i, p)``, drawn exactly (:func:`privhist.noise.binomial`, with
``p`` an exact rational). For record-level data every record is a unit (``u_i`` = its record
count). For user-level data the unit is a user and the released count is the number of *sampled
users holding the key* — records are not counted: with ``max_contributions_per_partition = c``
a sampled user still adds 1, so record multiplicities never enter the output and the per-key
analysis is the same as for ``c = 1``. The per-key draws are independent, i.e. each
(user, key) membership is sampled separately; for a user holding one key (the paper's setting)
this is exactly user sampling, and in general it is the product mechanism the per-key analysis
below covers.

**Guarantee.** For one key whose unit count moves by one, the exact privacy profile is computed in
:mod:`privhist.mechanisms.sampling.profile` (Lemmas A-C there): removing a unit is pure
``ln(1/(1-p))``-DP, which is why ``p <= 1 - e^-eps``; adding one has
``delta_c = p b_(c-1)(m_c - 1) - (e^eps - 1) Pr[Y_(c-1) >= m_c]``, maximal just below
``c = tau / q``. With ``l0`` keys touched by one neighbouring step (2 for replace-one,
``max_partitions_contributed`` for user-level, 1 for add/remove), every key gets
``(eps / l0, delta / l0)`` and basic composition (Dwork & Roth 2014, Theorem 3.16) gives
``(eps, delta)``, as for the other sparse mechanisms (see
:mod:`privhist.accounting.profile`, "Product mechanisms"). For replace-one this is conservative:
the key that loses the record contributes only the pure ``ln(1/(1-p))`` loss, which a joint
analysis could exploit; it is not used here.

**Calibration** (``calibration=``; the per-key budget is always the one above):

* ``"exact"`` (default): ``p = alpha (1 - e^-eps)`` (``alpha`` default 1/6, the paper's
  experiments) or the given ``sampling_rate``, and the smallest ``tau`` whose certified exact
  delta meets the budget. With only ``threshold`` given: the largest rate meeting the budget.
* ``"chernoff"``: ``tau`` from Theorem 1's Chernoff bound ``exp(-(tau/q) D(q || p)) <= delta``
  (the former spelling ``"theorem1"`` is still accepted).
* ``"c_alpha"``: the paper's rule ``p = alpha (1 - e^-eps)``, ``tau = ln(1/delta) / C_alpha``.
* ``"optimised"``: ``(p, tau)`` minimising the worst RMSE over true counts ``0..population``
  (needs ``population``).

Whatever the rule, the mechanism certifies the chosen ``(p, tau)`` against the exact profile in
interval arithmetic before use, and refuses a fixed ``(sampling_rate, threshold)`` pair that does
not meet the budget (the error names the delta it would give).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import numpy.typing as npt

from privhist.accounting.composition import PrivacyEvent
from privhist.accounting.profile import NOT_RELEASED
from privhist.core.data import Counts
from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import RandomSource
from privhist.core.validation import Constraint, float_up
from privhist.mechanisms._noise import PREC
from privhist.mechanisms.base import KeyDistribution, Mechanism, Option
from privhist.mechanisms.registry import register
from privhist.mechanisms.sampling import accuracy
from privhist.mechanisms.sampling.profile import (
    CertifiedDelta,
    alpha_rate,
    c_alpha,
    c_alpha_threshold,
    certified_delta,
    check_sampling_rate,
    chernoff_threshold,
    exact_threshold,
    largest_rate,
)
from privhist.noise import binomial

CALIBRATIONS = ("exact", "chernoff", "c_alpha", "optimised")
#: former spellings of calibration rules, still accepted
CALIBRATION_ALIASES = {"theorem1": "chernoff"}
DEFAULT_ALPHA = Fraction(1, 6)
#: unit counts up to which key_distribution is exact in rationals (mpmath beyond)
EXACT_UNITS = 4096


def sample_units(units: npt.ArrayLike, rate: Fraction, rng: RandomSource) -> npt.NDArray[np.int64]:
    """The sampling step of the release (Section 3.1): each unit is kept independently with
    probability ``rate``, so key ``i`` held by ``u_i`` units keeps ``Binomial(u_i, rate)`` of
    them, drawn exactly (:func:`privhist.noise.binomial`, ``rate`` an exact rational). Keys with
    no unit get 0 without a draw. :meth:`SampleAndThreshold.release` then keeps the keys whose
    sampled count reaches the threshold.

    >>> from privhist import SeededRandom
    >>> s = sample_units([0, 10, 0, 1000], Fraction(1, 2), SeededRandom(0))
    >>> int(s[0]), int(s[2]), bool(0 <= s[1] <= 10), bool(400 < s[3] < 600)
    (0, 0, True, True)
    """
    u = np.asarray(units, dtype=np.int64)
    sampled = np.zeros(u.shape, dtype=np.int64)
    present = u > 0
    sampled[present] = binomial(u[present], rate, rng)
    return sampled


@register
class SampleAndThreshold(Mechanism):
    """Poisson-sample the units; release keys whose sampled count reaches the threshold.

    >>> from privhist import SeededRandom
    >>> m = SampleAndThreshold(1.0, 1e-8)
    >>> m.parameters()["threshold"], round(m.parameters()["sampling_rate"], 4)
    (11, 0.1054)
    >>> r = m.release(Counts.from_arrays(["a", "b"], [5000, 3]), SeededRandom(1))
    >>> r.keys.tolist()
    ['a']
    """

    name = "sample-and-threshold"
    summary = "Poisson-sample the units, release sampled counts >= tau with estimates count / p"
    requires_delta = True
    #: sampling error makes it a deliberate choice (federated settings), never the default
    default_candidate = False
    options = (
        Option(
            "sampling_rate",
            float,
            None,
            "Poisson sampling rate p in (0, 1 - e^-eps] (exact binary value of the float)",
            # the upper end 1 - e^-eps depends on epsilon: checked by check_sampling_rate
            constraint=Constraint.rational(0, 1, open_low=True, open_high=True, optional=True),
        ),
        Option(
            "threshold",
            int,
            None,
            "release keys whose sampled count is at least this",
            constraint=Constraint.integer(1, optional=True),
        ),
        Option(
            "alpha",
            float,
            None,
            "rate p = alpha (1 - e^-eps) when no rate is given (1/6)",
            constraint=Constraint.rational(0, 1, open_low=True, optional=True),
        ),
        Option(
            "calibration",
            str,
            None,
            "how (p, tau) are chosen: exact (default), chernoff, c_alpha, optimised",
            choices=CALIBRATIONS,
        ),
        Option(
            "population",
            int,
            None,
            "number of units N: optimised calibration, error report",
            constraint=Constraint.integer(1, optional=True),
        ),
    )

    def __init__(
        self,
        epsilon: float,
        delta: float,
        neighbouring: Neighbouring | None = None,
        *,
        sampling_rate: float | Fraction | str | None = None,
        threshold: int | None = None,
        alpha: float | Fraction | None = None,
        calibration: str | None = None,
        population: int | None = None,
        confidence: float = 0.95,
    ) -> None:
        super().__init__(epsilon, delta, neighbouring, confidence=confidence)
        fn = self.function_name()
        l0 = self.neighbouring.l0_sensitivity
        kb = super().key_budget()
        # certify at the smaller of the exact share and the float the contract reports
        self.epsilon_key = min(Fraction(self.epsilon) / l0, Fraction(kb.epsilon))
        self.delta_key = min(Fraction(self.delta) / l0, Fraction(kb.delta))
        check = self.check_option
        if isinstance(calibration, str):
            calibration = CALIBRATION_ALIASES.get(calibration, calibration)
        self.calibration = check("calibration", calibration) or "exact"
        self.alpha = check("alpha", alpha) or DEFAULT_ALPHA
        self.population: int | None = check("population", population)
        fixed_p: Fraction | None = None
        if sampling_rate is not None:
            if _finite_number(sampling_rate):
                # a number out of range: the relational bound's message says why (1 - e^-eps)
                check_sampling_rate(sampling_rate, self.epsilon_key, fn)
            check("sampling_rate", sampling_rate)
            fixed_p = check_sampling_rate(sampling_rate, self.epsilon_key, fn)
        fixed_t: int | None = check("threshold", threshold)
        self.rate_rule = "given" if fixed_p is not None else "alpha"
        self._optimised: accuracy.Optimised | None = None
        self.sampling_rate, self.threshold, self.certificate = self._calibrate(fixed_p, fixed_t, fn)

    def _calibrate(
        self, fixed_p: Fraction | None, fixed_t: int | None, fn: str
    ) -> tuple[Fraction, int, CertifiedDelta]:
        eps, delta, rule = self.epsilon_key, self.delta_key, self.calibration
        if fixed_p is not None and fixed_t is not None:
            cert = certified_delta(fixed_p, fixed_t, eps)
            if cert.value > delta:
                l0 = self.neighbouring.l0_sensitivity
                raise ValidationError(
                    "threshold",
                    fn,
                    f"large enough that delta <= {self.delta:.3g} at sampling_rate "
                    f"{float(fixed_p):.6g} (threshold {fixed_t} gives delta "
                    f"{cert.upper * l0:.3g}; the exact calibration needs "
                    f"{exact_threshold(fixed_p, eps, delta, fn)[0]})",
                    fixed_t,
                )
            return fixed_p, fixed_t, cert
        if rule == "optimised":
            if self.population is None:
                raise ValidationError("population", fn, "given for the optimised calibration", None)
            best = accuracy.optimise(
                eps, delta, self.population, sampling_rate=fixed_p, threshold=fixed_t, function=fn
            )
            if fixed_p is None and fixed_t is None:
                self._optimised = best
            if fixed_p is None:
                self.rate_rule = "optimised" if fixed_t is None else "optimised for the threshold"
            return best.sampling_rate, best.threshold, best.certificate
        if fixed_t is not None:
            if rule != "exact":
                raise ValidationError(
                    "threshold",
                    fn,
                    f"not given with calibration {rule} (it sets the threshold)",
                    fixed_t,
                )
            self.rate_rule = "largest for the threshold"
            p, cert = largest_rate(fixed_t, eps, delta, fn)
            return p, fixed_t, cert
        if rule == "c_alpha" and fixed_p is not None:
            raise ValidationError(
                "sampling_rate",
                fn,
                "not given with calibration c_alpha (it sets the rate)",
                float(fixed_p),
            )
        p = fixed_p if fixed_p is not None else alpha_rate(self.alpha, eps, fn)
        if rule == "exact":
            tau, cert = exact_threshold(p, eps, delta, fn)
            return p, tau, cert
        if rule == "chernoff":
            tau = chernoff_threshold(float(p), float(eps), float(delta))
        else:
            t = c_alpha_threshold(float(self.alpha), float(delta))
            if t is None:
                raise ValidationError(
                    "alpha", fn, "below about 0.52 so that C_alpha > 0", float(self.alpha)
                )
            tau = t
        cert = certified_delta(p, tau, eps)
        while cert.value > delta:  # float rounding at the rule's boundary; never observed
            tau += 1
            cert = certified_delta(p, tau, eps)
        return p, tau, cert

    # -- what the mechanism promises ------------------------------------------------------------

    @property
    def delta_exact(self) -> float:
        """The certified delta of the whole guarantee (``l0`` times the per-key value, rounded
        up); at most the requested delta."""
        l0 = self.neighbouring.l0_sensitivity
        return float_up(self.certificate.value * l0)

    def parameters(self) -> dict[str, Any]:
        p = self.sampling_rate
        return {
            "sampling_rate": float(p),
            "sampling_rate_exact": f"{p.numerator}/{p.denominator}",
            "sampling_rate_rule": self.rate_rule,
            "threshold": self.threshold,
            "calibration": self.calibration,
            "alpha": float(self.alpha) if self.rate_rule == "alpha" else None,
            "delta_exact": self.delta_exact,
            "epsilon_per_key": float(self.epsilon_key),
            "delta_per_key": float(self.delta_key),
            "released": "sampled units per key (count) and count / sampling_rate (estimate)",
        }

    def reporting_probability(self, max_count: int) -> npt.NDArray[np.float64]:
        return accuracy.reporting_probability(float(self.sampling_rate), self.threshold, max_count)

    def key_distribution(self, units: int, count: int) -> KeyDistribution:
        """``{NOT_RELEASED: Pr[Y < tau], k: Pr[Y = k] for k >= tau}`` with ``Y ~ Binomial(units,
        p)``; exact rationals up to 4096 units, 160-bit mpmath beyond."""
        p, tau = self.sampling_rate, self.threshold
        if units < tau:
            return KeyDistribution({NOT_RELEASED: Fraction(1)})
        probs: dict[Any, Any] = {}
        if units <= EXACT_UNITS:
            a, d = p.numerator, p.denominator
            den = d**units
            total = 0
            for k in range(tau, units + 1):
                num = math.comb(units, k) * a**k * (d - a) ** (units - k)
                probs[k] = Fraction(num, den)
                total += num
            probs[NOT_RELEASED] = Fraction(den - total, den)
            return KeyDistribution(probs)
        with mpmath.workprec(PREC):
            pm = mpmath.mpf(p.numerator) / p.denominator
            kept = mpmath.mpf(0)
            for k in range(tau, units + 1):
                v = mpmath.binomial(units, k) * pm**k * (1 - pm) ** (units - k)
                probs[k] = v
                kept += v
            probs[NOT_RELEASED] = max(1 - kept, mpmath.mpf(0))
            return KeyDistribution(probs, mpmath.mpf(2) ** (20 - PREC))

    def _draw(self, counts: Counts, rng: RandomSource) -> tuple[npt.NDArray[Any], dict[str, Any]]:
        units = counts.unit_counts
        # a key with fewer units than tau has Binomial(u, p) <= u < tau: it is released with
        # probability exactly 0, so its count is not drawn (no randomness, same law)
        present = units >= max(self.threshold, 1)
        keys, u = counts.keys[present], units[present]
        sampled = sample_units(u, self.sampling_rate, rng)
        keep = sampled >= self.threshold
        values = sampled[keep]
        p = float(self.sampling_rate)
        lower, upper = accuracy.selection_adjusted_interval(
            values, p, self.threshold, self.confidence
        )
        return keys[keep], {
            "values": values,
            "estimates": values / p,
            "lower": lower,
            "upper": upper,
        }

    # -- planning -------------------------------------------------------------------------------

    def plan_details(self, max_count: int) -> dict[str, Any]:
        """Certified delta, the threshold of each calibration rule, and (with ``population``) the
        expected error and the optimised calibration."""
        eps, delta = self.epsilon_key, self.delta_key
        p, fn = self.sampling_rate, self.function_name()
        l0 = self.neighbouring.l0_sensitivity
        pf = float(p)
        t1 = chernoff_threshold(pf, float(eps), float(delta))
        exact_tau = (
            self.threshold
            if self.calibration == "exact" and self.rate_rule in ("alpha", "given")
            else exact_threshold(p, eps, delta, fn)[0]
        )
        p_alpha = alpha_rate(self.alpha, eps, fn)
        ta = c_alpha_threshold(float(self.alpha), float(delta))
        calibrations: dict[str, Any] = {
            "exact": {"sampling_rate": pf, "threshold": exact_tau},
            "chernoff": {"sampling_rate": pf, "threshold": t1},
            "c_alpha": {
                "sampling_rate": float(p_alpha),
                "threshold": ta,
                "alpha": float(self.alpha),
                "C_alpha": c_alpha(float(self.alpha)),
            },
        }
        for name in ("exact", "chernoff", "c_alpha"):
            entry = calibrations[name]
            if entry["threshold"] is not None:
                rate = p if name != "c_alpha" else p_alpha
                entry["delta_exact"] = float_up(
                    certified_delta(rate, entry["threshold"], eps).value * l0
                )
        optimised: dict[str, Any] | None = None
        error: dict[str, Any] | None = None
        levels: dict[str, Any] | None = None
        if self.population is not None:
            n = self.population
            best = self._optimised or accuracy.optimise(eps, delta, n, function=fn)
            optimised = best.to_dict()
            optimised["delta_exact"] = float_up(best.certificate.value * l0)
            error = accuracy.expected_error(pf, self.threshold, n).to_dict()
            rp = accuracy.reporting_probability(pf, self.threshold, n)
            levels = {}
            for level in (0.01, 0.1, 0.5, 0.9, 0.99, 0.999999):
                hit = np.nonzero(rp >= level)[0]
                levels[str(level)] = int(hit[0]) if hit.size else None
        calibrations["optimised"] = optimised
        cert = self.certificate
        return {
            "delta_exact": self.delta_exact,
            "delta_exact_per_key": cert.upper,
            "worst_count": cert.at_count,
            "search_range": [self.threshold, cert.limit],
            "tail_bound_beyond_range": float_up(cert.tail),
            "thresholds": {
                "chernoff": t1,
                "c_alpha": ta,
                "exact": exact_tau,
                "optimised": None if optimised is None else optimised["threshold"],
            },
            "calibrations": calibrations,
            "expected_error": error,
            "reporting_levels": levels,
            "composition": (
                f"basic composition over {l0} keys of ({float(eps):.6g}, {float(delta):.3g}) each"
                if l0 > 1
                else "one key per neighbouring step"
            ),
        }

    def event(self) -> PrivacyEvent:
        """Per key, the dominating pair of the certified profile with its calibrated point
        (:func:`privhist.mechanisms.sampling.pair.threshold_pair_event`), on each of the ``l0``
        keys a neighbour touches (each key's binomial is independent)."""
        from privhist.mechanisms.sampling.pair import threshold_pair_event

        return threshold_pair_event(
            self.sampling_rate,
            self.threshold,
            float_up(self.epsilon_key),
            float_up(self.certificate.value),
            self.neighbouring.l0_sensitivity,
        )

    def accounting_rules(self) -> tuple[str, ...] | None:
        """Basic composition of the per-key calibrated points: the calibration's own rule. (The
        certified PLD of the same pairs is often much tighter, but the per-key contract,
        ``key_budget() * l0 == guarantee()``, is stated for basic composition.)"""
        return ("basic",)

    @classmethod
    def test_instances(cls) -> list[Mechanism]:
        return [
            cls(1.0, 1e-3),
            cls(1.0, 1e-2, Neighbouring.replace()),
            cls(1.0, 1e-3, Neighbouring.user(2, 2)),
            cls(0.5, 1e-3, sampling_rate=0.25),
        ]


def _finite_number(value: Any) -> bool:
    """A finite int, float or Fraction (not a bool)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int | Fraction) or (isinstance(value, float) and math.isfinite(value))
