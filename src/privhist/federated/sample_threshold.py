"""A federated sample-and-threshold round, role by role (Bharadwaj & Cormode 2022, Sections 2-3).

The paper's deployment (Section 2, "model"; Section 3.1; Section 3.2 for fixed-size cohorts):

* the :class:`Server` samples the clients: Poisson sampling at rate ``p`` (each client
  independently), or the fixed-size cohort of Section 3.2 (contact ``s = m + c sqrt(m)`` clients,
  realise the Poisson sample inside it, abstaining clients send a dummy; see
  :mod:`privhist.mechanisms.sampling.cohort`);
* each sampled :class:`Client` sends only its item — nothing else, no noise;
* the :class:`Aggregator` — the trusted shuffler / secure-hardware / MPC role of Section 2 —
  counts the items it received, discards the dummies, and releases the items whose count reaches
  ``tau`` with their counts, the estimates ``count / p`` and confidence intervals;
* the :class:`Analyst` sees only that :class:`~privhist.io.release.Release`.

**Aggregated simulation.** A round over ``n`` clients is simulated in time proportional to the
number of distinct items: the messages a Poisson sample produces are, as a multiset, "item ``x``
``Binomial(count_x, p)`` times", independently over items, and these are drawn exactly with
:func:`privhist.noise.binomial` (``p`` the mechanism's exact rational rate). For a fixed-size
cohort the same draw is the Poisson sample (size ``S``); when ``S`` exceeds the cohort size ``s``
(the failure event of the cohort's concentration bound) the participants are a uniformly random
``s``-subset of the sampled clients — a uniform ``s``-subset of a uniform ``S``-subset is a uniform
``s``-subset of all clients, which is exactly what
:meth:`~privhist.mechanisms.sampling.cohort.FixedSizeCohort.draw` does on failure. Dummies are
counted but never reach the aggregator's histogram (with ``tau = 1`` a unique dummy would
otherwise be released).

**Guarantee.** One client holds one item, so add/remove of a client is add/remove of one unit of
one key and the release is exactly :class:`~privhist.mechanisms.sampling.SampleAndThreshold`'s:
its certified ``(epsilon, delta)``, plus the cohort's added delta
(:meth:`~privhist.mechanisms.sampling.cohort.FixedSizeCohort.added_delta`) when a fixed-size
cohort is used.

**Diagnostics.** :func:`simulate_round` returns the release together with a
:class:`RoundDiagnostics` computed from the true counts — kept in a separate object, never in
the release, since they are exact facts about the data.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.accounting.accountant import guarantee_of
from privhist.accounting.composition import ApproxDPEvent, PrivacyEvent
from privhist.core.constraints import Declared
from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Relation
from privhist.core.random import RandomSource, SecureRandom
from privhist.core.validation import float_up
from privhist.federated.population import Population
from privhist.federated.secure_sum import AggregatorFactory, secure_histogram
from privhist.io.release import Release
from privhist.mechanisms.sampling import accuracy
from privhist.mechanisms.sampling.cohort import FixedSizeCohort
from privhist.mechanisms.sampling.sample_threshold import SampleAndThreshold
from privhist.noise import binomial
from privhist.noise.subset import uniform_subset

__all__ = [
    "Aggregator",
    "Analyst",
    "Client",
    "Messages",
    "RoundDiagnostics",
    "RoundResult",
    "Server",
    "Simulation",
    "simulate_round",
]

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Client:
    """One client: it holds one item and, when sampled, sends exactly that item.

    >>> Client("hello").message()
    'hello'
    """

    item: Any

    def message(self) -> Any:
        """The only thing a participating client sends."""
        return self.item


@dataclass(frozen=True)
class Messages:
    """What reaches the aggregator in one round, as a multiset: ``items[i]`` was sent
    ``counts[i]`` times by participating clients; ``dummies`` abstaining cohort members sent a
    unique dummy each. ``cohort_overflowed`` records the cohort's failure event."""

    items: npt.NDArray[Any]
    counts: I64
    dummies: int = 0
    cohort_overflowed: bool = False

    @property
    def participants(self) -> int:
        return int(self.counts.sum(dtype=np.int64))


def _check_cohort(
    cohort: FixedSizeCohort | None, mechanism: SampleAndThreshold, function: str
) -> None:
    """A cohort must sample at the mechanism's rate: its failure term is added to that delta."""
    if cohort is None:
        return
    if not isinstance(cohort, FixedSizeCohort):
        raise ValidationError("cohort", function, "a FixedSizeCohort", type(cohort).__name__)
    if cohort.sampling_rate != mechanism.sampling_rate:
        raise ValidationError(
            "cohort",
            function,
            f"sampling at the mechanism's rate {float(mechanism.sampling_rate):.6g}",
            float(cohort.sampling_rate),
        )


class Server(Declared):
    """Samples the clients of a round: Poisson at the mechanism's rate, or a fixed-size cohort.

    Args:
        mechanism: the sample-and-threshold mechanism whose rate ``p`` the server samples at.
        cohort: a :class:`FixedSizeCohort` at the same rate, or None for Poisson sampling.
    """

    def __init__(self, mechanism: SampleAndThreshold, cohort: FixedSizeCohort | None = None):
        fn = "Server"
        if not isinstance(mechanism, SampleAndThreshold):
            raise ValidationError("mechanism", fn, "a SampleAndThreshold", type(mechanism).__name__)
        if mechanism.neighbouring.relation is Relation.USER:
            raise ValidationError(
                "mechanism",
                fn,
                "record-level (one item per client)",
                mechanism.neighbouring.describe(),
            )
        _check_cohort(cohort, mechanism, fn)
        self.sampling_rate: Fraction = mechanism.sampling_rate
        self.cohort = cohort

    def collect(self, population: Population, rng: RandomSource) -> Messages:
        """Run the sampling and gather the participants' items (aggregated; see module notes)."""
        fn = "Server.collect"
        if not isinstance(population, Population):
            raise ValidationError("population", fn, "a Population", type(population).__name__)
        sampled = binomial(population.counts, self.sampling_rate, rng)
        if self.cohort is None:
            return Messages(population.items, sampled)
        n = population.size
        if n > self.cohort.population:
            raise ValidationError(
                "population",
                fn,
                f"at most the cohort's population bound {self.cohort.population}",
                n,
            )
        s = min(self.cohort.cohort_size, n)
        total = int(sampled.sum(dtype=np.int64))
        overflow = total > s
        if overflow:
            # keep a uniform s-subset of the S sampled clients (units indexed item by item) by
            # drawing the smaller of the kept and the dropped subsets: S - s is about sqrt(m), so
            # the cost is that of the overflow, never O(S)
            edges = np.cumsum(sampled)
            if 2 * s >= total:
                dropped = uniform_subset(total, total - s, rng)
                owner = np.searchsorted(edges, dropped, side="right")
                sampled = sampled - np.bincount(owner, minlength=sampled.shape[0])
            else:
                chosen = uniform_subset(total, s, rng)
                owner = np.searchsorted(edges, chosen, side="right")
                sampled = np.bincount(owner, minlength=sampled.shape[0]).astype(np.int64)
            total = s
        return Messages(population.items, sampled, dummies=s - total, cohort_overflowed=overflow)


class Aggregator(Declared):
    """The aggregator: counts, thresholds, releases.

    It sees the multiset of items and nothing else, discards dummies, and outputs the release.
    With ``secure_sum`` (an ``(modulus, dimension) -> SecureAggregator`` factory, e.g.
    :func:`privhist.federated.secagg.aggregator_factory`) the counting is done by that secure
    sum instead of a trusted party: every participant sends the one-hot vector of its item over
    the round's dictionary (the population's distinct items, which must then be public), every
    dummy an all-zero vector, and the server sees only the summed histogram
    (:func:`~privhist.federated.secure_sum.secure_histogram`). The release is the same.
    """

    def __init__(
        self,
        mechanism: SampleAndThreshold,
        cohort: FixedSizeCohort | None = None,
        secure_sum: AggregatorFactory | None = None,
    ):
        if not isinstance(mechanism, SampleAndThreshold):
            raise ValidationError(
                "mechanism", "Aggregator", "a SampleAndThreshold", type(mechanism).__name__
            )
        _check_cohort(cohort, mechanism, "Aggregator")
        self.mechanism = mechanism
        self.cohort = cohort
        self.secure_sum = secure_sum

    def event(self) -> PrivacyEvent:
        """The round as a privacy event: the mechanism's (Poisson sampling), or with a fixed-size
        cohort its ``(eps, delta)`` plus the cohort's failure term."""
        m = self.mechanism
        if self.cohort is None:
            return m.event()
        added = self.cohort.added_delta(m.epsilon)
        return ApproxDPEvent(m.epsilon, float_up(Fraction(m.delta) + Fraction(added)))

    def release(self, messages: Messages, rng: RandomSource) -> Release:
        """Release the items sent at least ``tau`` times (sorted), with ``count / p`` and the
        mechanism's selection-adjusted intervals."""
        m = self.mechanism
        counts = messages.counts
        if self.secure_sum is not None:
            counts = secure_histogram(counts, self.secure_sum, zero_clients=messages.dummies)
        keep = counts >= m.threshold
        values = counts[keep].astype(np.int64)
        p = float(m.sampling_rate)
        lower, upper = accuracy.selection_adjusted_interval(values, p, m.threshold, m.confidence)
        meta = m.metadata(rng)
        if self.cohort is not None:
            added = self.cohort.added_delta(m.epsilon)
            total = float_up(Fraction(m.delta) + Fraction(added))
            if total >= 1:
                raise ValidationError(
                    "cohort", "Aggregator", "a failure probability that keeps delta below 1", total
                )
            total = guarantee_of(self.event()).delta
            g = meta["guarantee"]
            g["delta"] = total
            g["statement"] = (
                f"({m.epsilon:.6g}, {total:.3g})-DP under {m.neighbouring.describe()} "
                "neighbours (sample-and-threshold delta plus the cohort's failure term)"
            )
            meta["cohort"] = self.cohort.to_dict(m.epsilon)
        meta["protocol"] = "federated sample-and-threshold round (server, clients, aggregator)"
        if self.secure_sum is not None:
            meta["secure_sum"] = getattr(self.secure_sum, "name", "custom")
        return Release(
            keys=messages.items[keep],
            values=values,
            estimates=values / p,
            lower=lower,
            upper=upper,
            metadata=meta,
        )


class Analyst(Declared):
    """Sees only releases; answers questions from them.

    >>> a = Analyst(Release(keys=np.array(["a", "b"]), values=np.array([30, 12]),
    ...                     estimates=np.array([300.0, 120.0])))
    >>> a.top(1), a.estimate("b"), a.estimate("zzz")
    (['a'], 120.0, 0.0)
    """

    def __init__(self, release: Release) -> None:
        if not isinstance(release, Release):
            raise ValidationError("release", "Analyst", "a Release", type(release).__name__)
        self.release = release

    def estimate(self, item: Any) -> float:
        """The estimated number of clients holding ``item`` (0 when it was not released)."""
        r = self.release
        i = int(np.searchsorted(r.keys, item))
        if i < len(r) and r.keys[i] == item and r.estimates is not None:
            return float(r.estimates[i])
        return 0.0

    def top(self, k: int) -> list[Any]:
        """The ``k`` released items with the largest estimates (ties by item order)."""
        r = self.release
        if r.estimates is None or len(r) == 0:
            return []
        order = np.lexsort((np.arange(len(r)), -r.estimates))[:k]
        out: list[Any] = r.keys[order].tolist()
        return out


@dataclass(frozen=True)
class RoundDiagnostics:
    """Exact, NON-private facts about one simulated round, for evaluating the protocol.

    Errors are over every distinct item of the population, an unreleased item's estimate being 0:
    ``mean_absolute_error`` and ``max_absolute_error`` in clients, and the same mean as a
    fraction of the population (``mean_absolute_error_fraction``, the paper's Figure 1 metric).
    """

    clients: int
    distinct_items: int
    participants: int
    dummies: int
    cohort_overflowed: bool
    released: int
    mean_absolute_error: float
    max_absolute_error: float
    mean_absolute_error_fraction: float
    true_counts_of_released: I64

    def to_dict(self) -> dict[str, Any]:
        return {
            "clients": self.clients,
            "distinct_items": self.distinct_items,
            "participants": self.participants,
            "dummies": self.dummies,
            "cohort_overflowed": self.cohort_overflowed,
            "released": self.released,
            "mean_absolute_error": self.mean_absolute_error,
            "max_absolute_error": self.max_absolute_error,
            "mean_absolute_error_fraction": self.mean_absolute_error_fraction,
        }


@dataclass(frozen=True)
class RoundResult:
    """The release (what the analyst sees) and the diagnostics (what only a simulation knows)."""

    release: Release
    diagnostics: RoundDiagnostics


def _diagnostics(population: Population, messages: Messages, release: Release) -> RoundDiagnostics:
    est = np.zeros(len(population), dtype=np.float64)
    idx = np.searchsorted(population.items, release.keys)
    if release.estimates is not None:
        est[idx] = release.estimates
    err = np.abs(est - population.counts)
    n = population.size
    return RoundDiagnostics(
        clients=n,
        distinct_items=len(population),
        participants=messages.participants,
        dummies=messages.dummies,
        cohort_overflowed=messages.cohort_overflowed,
        released=len(release),
        mean_absolute_error=float(err.mean()),
        max_absolute_error=float(err.max()),
        mean_absolute_error_fraction=float(err.mean()) / n,
        true_counts_of_released=population.counts[idx],
    )


class Simulation(Declared):
    """A federated sample-and-threshold protocol over one population, run round by round.

    >>> from privhist import SeededRandom
    >>> pop = Population.from_counts(["a", "b"], [10**6, 5])
    >>> sim = Simulation(pop, SampleAndThreshold(1.0, 1e-8))
    >>> result = sim.run(SeededRandom(3))
    >>> result.release.keys.tolist(), result.diagnostics.released
    (['a'], 1)
    """

    def __init__(
        self,
        population: Population,
        mechanism: SampleAndThreshold,
        cohort: FixedSizeCohort | None = None,
        secure_sum: AggregatorFactory | None = None,
    ) -> None:
        if not isinstance(population, Population):
            raise ValidationError(
                "population", "Simulation", "a Population", type(population).__name__
            )
        self.population = population
        self.mechanism = mechanism
        self.server = Server(mechanism, cohort)
        self.aggregator = Aggregator(mechanism, cohort, secure_sum)

    def event(self) -> PrivacyEvent:
        """The round as a privacy event (:meth:`Aggregator.event`)."""
        return self.aggregator.event()

    def run(self, rng: RandomSource | None = None) -> RoundResult:
        """One round: the server samples, clients send, the aggregator releases."""
        if rng is None:
            rng = SecureRandom()
        if not isinstance(rng, RandomSource):
            raise ValidationError("rng", "Simulation.run", "a RandomSource", type(rng).__name__)
        messages = self.server.collect(self.population, rng)
        release = self.aggregator.release(messages, rng)
        return RoundResult(release, _diagnostics(self.population, messages, release))


def simulate_round(
    population: Population,
    mechanism: SampleAndThreshold,
    rng: RandomSource | None = None,
    cohort: FixedSizeCohort | None = None,
    secure_sum: AggregatorFactory | None = None,
) -> RoundResult:
    """One federated sample-and-threshold round over ``population``; see :class:`Simulation`
    (``secure_sum``: see :class:`Aggregator`)."""
    return Simulation(population, mechanism, cohort, secure_sum).run(rng)
