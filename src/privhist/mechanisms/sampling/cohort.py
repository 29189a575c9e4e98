"""Fixed-size cohorts for sample-and-threshold (Bharadwaj & Cormode 2022, Section 3.2).

Poisson sampling at rate ``p`` over ``n`` clients has an expected ``m = n p`` participants but
would contact all ``n``. The paper's Lemma in Section 3.2 instead contacts a cohort of
``s = m + c sqrt(m)`` clients: the Poisson sample size ``S ~ Binomial(n, p)`` exceeds ``s`` with
probability at most ``exp(-c^2 / 3)`` (multiplicative Chernoff bound, for ``c <= sqrt(m)``), so
``s`` contacts suffice with high probability. Every contacted client sends exactly one message;
a client that does not participate sends a unique dummy item, so the number of messages (always
``s``) does not reveal who participated, and the dummies are discarded before counting.

**How participation is decided.** The paper lets each cohort member participate independently
with probability ``m / s``. That makes the number of participants ``Binomial(s, m/s)``, whose
variance ``m (1 - m/s)`` is far from the ``m (1 - m/n)`` of the Poisson sample size, so the
participants are *not* a Poisson sample and Theorem 1 does not apply to them as such. This module
keeps the cohort and the dummies but realises Poisson sampling exactly: the server draws the
Poisson sample size ``S ~ Binomial(n, p)`` (exact sampler), picks the cohort as a uniformly random
``s``-subset of the clients and, if ``S <= s``, assigns ``S`` participation slots to a uniformly
random ``S``-subset of the cohort. The participants are then a uniformly random ``S``-subset of
all clients with ``S ~ Binomial(n, p)`` — exactly the Poisson(``p``) sample.

**Failure and delta.** If ``S > s`` (the concentration bound fails) all ``s`` cohort members
participate: the output then differs from the ideal mechanism's. On every input the two outputs
can be coupled to agree except with probability ``beta >= Pr[Binomial(n, p) > s]`` (``n`` a
public upper bound on the number of clients; the tail grows with ``n``), so for every event
``E``::

    Pr[M'(D) in E] <= Pr[M(D) in E] + beta <= e^eps Pr[M(D') in E] + delta + beta
                   <= e^eps Pr[M'(D') in E] + delta + (1 + e^eps) beta.

The protocol is therefore ``(eps, delta + (1 + e^eps) beta)``-DP:
:meth:`FixedSizeCohort.added_delta` reports ``(1 + e^eps) beta`` with ``beta`` the exact
binomial tail (128-bit mpmath, times ``1 + 2**-40`` for its rounding), which is far below the
paper's ``exp(-c^2 / 3)``; both are reported. (Contacting ``S - s`` further clients on failure
would remove the extra delta at the price of an unbounded cohort; not done here.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
from mpmath import libmp

from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Relation
from privhist.core.random import RandomSource, SecureRandom
from privhist.core.validation import check_epsilon, check_positive_int, float_up
from privhist.io.release import Release
from privhist.mechanisms.sampling import accuracy
from privhist.mechanisms.sampling.sample_threshold import SampleAndThreshold
from privhist.noise import Binomial, binomial, exp_rational_bounds
from privhist.noise.subset import uniform_subset

I64 = npt.NDArray[np.int64]

_FN = "fixed_size_cohort"
#: relative margin on the 128-bit binomial tail
_TAIL_MARGIN = Fraction(1) + Fraction(1, 1 << 40)


@dataclass(frozen=True)
class CohortDraw:
    """One cohort: the contacted clients, the participants, the Poisson sample size ``S`` and
    whether ``S`` exceeded the cohort (then every cohort member participated)."""

    cohort: I64
    participants: I64
    sample_size: int
    failed: bool

    @property
    def dummies(self) -> int:
        """Cohort members that sent a dummy item."""
        return int(self.cohort.shape[0] - self.participants.shape[0])


class FixedSizeCohort:
    """Contact ``s = ceil(m + slack sqrt(m))`` of at most ``population`` clients (``m`` =
    ``population * sampling_rate``) and realise Poisson sampling inside the cohort.

    >>> c = FixedSizeCohort(10**6, Fraction(1, 100), slack=10)
    >>> c.cohort_size, c.paper_bound < 1e-14, c.failure_probability < 1e-20
    (11000, True, True)
    """

    def __init__(
        self, population: int, sampling_rate: Fraction | float | str, slack: float = 10.0
    ) -> None:
        self.population = check_positive_int(population, _FN, "population")
        try:
            p = Fraction(sampling_rate)
        except (TypeError, ValueError, OverflowError, ZeroDivisionError):
            raise ValidationError(
                "sampling_rate", _FN, "a number in (0, 1)", sampling_rate
            ) from None
        if not 0 < p < 1:
            raise ValidationError("sampling_rate", _FN, "a number in (0, 1)", sampling_rate)
        self.sampling_rate = p
        self.slack = check_epsilon(slack, _FN, "slack")
        self.expected_sample = self.population * p
        m = float(self.expected_sample)
        self.cohort_size = min(self.population, math.ceil(m + self.slack * math.sqrt(m)))
        tail = Binomial(self.population, p).sf_mp(self.cohort_size + 1)
        self._beta = (
            Fraction(0)
            if self.cohort_size >= self.population
            else min(Fraction(1), Fraction(*libmp.to_rational(tail._mpf_)) * _TAIL_MARGIN)
        )

    @property
    def failure_probability(self) -> float:
        """Upper bound on ``Pr[Binomial(population, p) > s]`` (rounded up)."""
        return float_up(self._beta)

    @property
    def paper_bound(self) -> float | None:
        """The paper's ``exp(-c^2 / 3)`` (valid for ``c <= sqrt(m)``; None otherwise)."""
        m = float(self.expected_sample)
        if self.slack > math.sqrt(m):
            return None
        return math.exp(-(self.slack**2) / 3)

    @property
    def chernoff_bound(self) -> float:
        """``Pr[S >= (1 + d) m] <= exp(-d^2 m / (2 + d))`` with ``d = slack / sqrt(m)`` (any
        ``d > 0``)."""
        m = float(self.expected_sample)
        d = self.slack / math.sqrt(m)
        return math.exp(-(d**2) * m / (2 + d))

    def added_delta(self, epsilon: float) -> float:
        """``(1 + e^epsilon) beta``, the delta the cohort adds (see the module notes)."""
        e_hi = exp_rational_bounds(Fraction(check_epsilon(epsilon, _FN)))[1]
        return float_up((1 + e_hi) * self._beta)

    def draw(self, clients: int, rng: RandomSource) -> CohortDraw:
        """Draw the cohort and the participants among ``clients`` (at most ``population``)."""
        n = check_positive_int(clients, _FN, "clients", minimum=0)
        if n > self.population:
            raise ValidationError(
                "clients", _FN, f"at most the population bound {self.population}", n
            )
        s = min(self.cohort_size, n)
        sample_size = int(binomial(n, self.sampling_rate, rng)) if n else 0
        cohort = uniform_subset(n, s, rng)
        if sample_size > s:
            return CohortDraw(cohort, cohort, sample_size, True)
        slots = uniform_subset(s, sample_size, rng)
        return CohortDraw(cohort, cohort[slots], sample_size, False)

    def to_dict(self, epsilon: float | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "population": self.population,
            "sampling_rate": float(self.sampling_rate),
            "expected_sample": float(self.expected_sample),
            "slack": self.slack,
            "cohort_size": self.cohort_size,
            "failure_probability": self.failure_probability,
            "paper_bound": self.paper_bound,
            "chernoff_bound": self.chernoff_bound,
        }
        if epsilon is not None:
            out["added_delta"] = self.added_delta(epsilon)
        return out


def cohort_histogram(
    client_keys: Any,
    mechanism: SampleAndThreshold,
    cohort: FixedSizeCohort,
    rng: RandomSource | None = None,
) -> Release:
    """Sample-and-threshold over a fixed-size cohort, one item per client.

    The participants' items are counted (dummies discarded), keys with at least ``threshold``
    participants are released with ``count / p`` and the mechanism's intervals, and the
    guarantee's delta is the mechanism's plus :meth:`FixedSizeCohort.added_delta`. One item per
    client means add/remove (or replace) of a record is add/remove (or replace) of a client.
    """
    fn = "cohort_histogram"
    if not isinstance(mechanism, SampleAndThreshold):
        raise ValidationError("mechanism", fn, "a SampleAndThreshold", type(mechanism).__name__)
    if not isinstance(cohort, FixedSizeCohort):
        raise ValidationError("cohort", fn, "a FixedSizeCohort", type(cohort).__name__)
    if mechanism.neighbouring.relation is Relation.USER:
        raise ValidationError(
            "mechanism", fn, "record-level (one item per client)", mechanism.neighbouring.describe()
        )
    if cohort.sampling_rate != mechanism.sampling_rate:
        raise ValidationError(
            "cohort",
            fn,
            f"sampling at the mechanism's rate {float(mechanism.sampling_rate):.6g}",
            float(cohort.sampling_rate),
        )
    keys = np.asarray(client_keys)
    if keys.ndim != 1:
        raise ValidationError("client_keys", fn, "a one-dimensional array", f"shape {keys.shape}")
    if rng is None:
        rng = SecureRandom()
    if not isinstance(rng, RandomSource):
        raise ValidationError("rng", fn, "a RandomSource", type(rng).__name__)
    draw = cohort.draw(int(keys.shape[0]), rng)
    sampled_keys = keys[draw.participants]
    if sampled_keys.size:
        uniq, counts = np.unique(sampled_keys, return_counts=True)
    else:
        uniq, counts = keys[:0], np.zeros(0, dtype=np.int64)
    keep = counts >= mechanism.threshold
    values = counts[keep].astype(np.int64)
    p = float(mechanism.sampling_rate)
    lower, upper = accuracy.selection_adjusted_interval(
        values, p, mechanism.threshold, mechanism.confidence
    )
    meta = mechanism.metadata(rng)
    added = cohort.added_delta(mechanism.epsilon)
    total = float_up(Fraction(mechanism.delta) + Fraction(added))
    if total >= 1:
        raise ValidationError("cohort", fn, "a failure probability that keeps delta below 1", total)
    g = meta["guarantee"]
    g["delta"] = total
    g["statement"] = (
        f"({mechanism.epsilon:.6g}, {total:.3g})-DP under {mechanism.neighbouring.describe()} "
        "neighbours (sample-and-threshold delta plus the cohort's failure term)"
    )
    meta["cohort"] = cohort.to_dict(mechanism.epsilon) | {"overflowed": draw.failed}
    meta["released_keys"] = int(keep.sum())
    diagnostics = {
        "clients": int(keys.shape[0]),
        "participants": int(draw.participants.shape[0]),
        "dummies": draw.dummies,
    }
    return Release(
        keys=uniq[keep],
        values=values,
        estimates=values / p,
        lower=lower,
        upper=upper,
        metadata=meta,
        diagnostics=diagnostics,
    )
