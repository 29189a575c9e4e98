"""The analyses as releasables: heavy hitters, quantiles, range counts, weighted samples and
federated frequency estimation, each with what it asks of the data and how it draws.

Each class here implements :class:`~privhist.mechanisms.releasable.Releasable` around an
algorithm of its own module (TrieHH++, the hierarchical and binary-search quantiles, the
hierarchical range histogram, the private weighted sampler, TFFE/MFFE), built from parameters
only, so that :class:`privhist.session.Session` runs all of them through its one release path and
every engine whose requests they need serves them. Every draw returns a
:class:`~privhist.io.release.Release` (one row per item, quantile level, range query, sampled key
or item) whose metadata holds what the algorithm reports (compositions, calibrations).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from privhist.accounting.accountant import guarantee_of
from privhist.accounting.composition import ApproxDPEvent, PrivacyEvent, composed
from privhist.analytics.quantiles import BinarySearchQuantiles, answer_quantiles
from privhist.analytics.quantiles_cohort import FixedCohortQuantiles
from privhist.analytics.range_query import HierarchicalHistogram
from privhist.core.budget import Budget
from privhist.core.errors import InputDataError, ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import RandomSource
from privhist.core.requests import ColumnValues, Fields, KeyCounts, KeyWeights, Request, UserItems
from privhist.core.text import counted
from privhist.core.version import LIBRARY
from privhist.federated.population import Population
from privhist.federated.triehh import TrieHH, check_alphabet
from privhist.io.release import Release
from privhist.mechanisms.releasable import Answers
from privhist.mechanisms.sampling.sample_threshold import SampleAndThreshold
from privhist.planning.user_level import state_whole


def _randomness(meta: dict[str, Any], rng: RandomSource) -> dict[str, Any]:
    meta["randomness"] = rng.to_dict()
    if not rng.private:
        meta["warning"] = "drawn from a seeded source: reproducible and NOT private"
    return meta


def _population(counts: Any) -> Population:
    """Clients holding one item each, from record-level key counts (items as text)."""
    if len(counts) == 0:
        raise InputDataError("the population is empty: the data hold no items")
    items = np.array([str(k) for k in counts.keys.tolist()], dtype=object)
    order = np.argsort(items, kind="stable")
    info = {k: v for k, v in counts.info.items() if k != "bounds_defaulted"}
    return Population(items[order], counts.counts.astype(np.int64)[order], info)


# -- heavy hitters -----------------------------------------------------------------------------


@dataclass
class HeavyHittersRelease:
    """TrieHH++ over one item per client (Bharadwaj & Cormode 2022, Section 4.1): items of any
    key type are read as text over ``trie.alphabet``. ``secure_sum`` sums each level's votes by
    a secure aggregation protocol (:func:`privhist.federated.secagg.aggregator
    .secure_sum_option`)."""

    trie: TrieHH
    secure_sum: str = "ideal"
    name: str = "heavy-hitters (TrieHH++)"
    neighbouring: Neighbouring = field(default_factory=Neighbouring.add_remove)

    def event(self) -> PrivacyEvent:
        return self.trie.composition.event()

    def guarantee(self) -> Budget:
        return self.trie.composition.guarantee

    def requests(self, fields: Fields) -> tuple[Request, ...]:
        return (KeyCounts(Fields(fields.key, None, fields.reading)),)

    def details(self) -> dict[str, Any]:
        comp = self.trie.composition
        return {
            "level": {
                "epsilon": comp.level.epsilon,
                "delta": comp.level.delta,
                "sampling_rate": float(comp.sampling_rate),
                "threshold": comp.threshold,
            },
            "composition": {
                nm: None if b is None else {"epsilon": b.epsilon, "delta": b.delta}
                for nm, b in (
                    ("basic", comp.basic),
                    ("advanced", comp.advanced),
                    ("pld", comp.pld),
                    ("pld_certified", comp.pld_certified),
                )
            },
            "used": comp.method,
        }

    def draw(self, answers: Answers, rng: RandomSource) -> Release:
        from privhist.federated.secagg.aggregator import secure_sum_option

        pop = _population(answers.of(KeyCounts))
        result = self.trie.run(pop, rng, secure_sum=secure_sum_option(self.secure_sum))
        release = result.release()
        release.metadata.update(self.details())
        release.metadata["value_column"] = "sampled_count"
        release.diagnostics.update(
            clients=pop.size, dropped_for_alphabet=int(result.diagnostics["dropped_for_alphabet"])
        )
        return release


@dataclass
class OneShotHeavyHitters:
    """One sample-and-threshold histogram of whole items (the Remark of Section 4.1), items of
    any key type read as text over ``alphabet``."""

    mechanism: SampleAndThreshold
    alphabet: str
    drop_unknown: bool = False
    name: str = "heavy-hitters --one-shot"
    neighbouring: Neighbouring = field(default_factory=Neighbouring.add_remove)

    def event(self) -> PrivacyEvent:
        return self.mechanism.event()

    def guarantee(self) -> Budget:
        return self.mechanism.guarantee()

    def requests(self, fields: Fields) -> tuple[Request, ...]:
        return (KeyCounts(Fields(fields.key, None, fields.reading)),)

    def draw(self, answers: Answers, rng: RandomSource) -> Release:
        pop = _population(answers.of(KeyCounts))
        kept, dropped = check_alphabet(pop, self.alphabet, self.drop_unknown, "heavy-hitters")
        if kept is None:
            raise ValidationError("alphabet", "heavy-hitters", "covering at least one item", "")
        release = self.mechanism.release(kept.to_counts(), rng)
        release.metadata.update(
            sampling_rate=float(self.mechanism.sampling_rate),
            threshold=self.mechanism.threshold,
            value_column="sampled_count",
        )
        release.diagnostics.update(clients=pop.size, dropped_for_alphabet=dropped)
        return release


# -- quantiles and range counts ----------------------------------------------------------------


@dataclass
class QuantilesRelease:
    """Private quantiles of a numeric column (Bharadwaj & Cormode 2022, Section 4.2): one row
    per level ``q`` with the ``value`` and the bucket ``[bucket_lower, bucket_upper]`` the
    answer lies in (its resolution, not a confidence interval), with the plug-in rank errors
    (pruning, sampling) at the estimator's confidence."""

    estimator: BinarySearchQuantiles | FixedCohortQuantiles | HierarchicalHistogram
    levels: list[float]
    method: str
    clamp: bool = False

    @property
    def name(self) -> str:
        return f"quantiles ({self.method})"

    @property
    def neighbouring(self) -> Neighbouring:
        # fixed-size cohorts are analysed for substitution neighbours
        if isinstance(self.estimator, FixedCohortQuantiles):
            return Neighbouring.replace()
        return Neighbouring.add_remove()

    def event(self) -> PrivacyEvent:
        return self.estimator.event()

    def guarantee(self) -> Budget:
        return self.estimator.guarantee()

    def requests(self, fields: Fields) -> tuple[Request, ...]:
        return (ColumnValues(Fields(fields.key, None, fields.reading)),)

    def draw(self, answers: Answers, rng: RandomSource) -> Release:
        values = _numbers(answers.of(ColumnValues), "quantiles")
        result = answer_quantiles(self.estimator, values.values, self.levels, rng, clamp=self.clamp)
        a = result.answers
        meta = dict(result.metadata)
        meta.update(key_column="q", estimate_column="value", method=self.method)
        release = Release(
            keys=np.array([x.q for x in a], dtype=np.float64),
            estimates=np.array([x.value for x in a], dtype=np.float64),
            metadata=meta,
            diagnostics={**values.facts, **result.diagnostics},
            extra={
                "bucket_lower": np.array([x.lower for x in a], dtype=np.float64),
                "bucket_upper": np.array([x.upper for x in a], dtype=np.float64),
                "pruning_rank_error": np.array([x.pruning_rank_error for x in a]),
                "sampling_rank_error": np.array([x.sampling_rank_error for x in a]),
            },
        )
        return release


def _numbers(values: Any, function: str) -> Any:
    """``values`` (the answer of :class:`ColumnValues`) when the column held a number; else the
    error says so, with the exact facts of the read (a text column, or a file of only a header,
    which the estimator would call an empty population)."""
    if len(values.values) == 0:
        rows, dropped = values.facts.get("rows", 0), values.facts.get("dropped", 0)
        raise InputDataError(
            f"{function}: the column holds no numbers ({counted(rows, 'row')} read, {dropped} of "
            "them empty or not a number)"
        )
    return values


@dataclass
class RangeCountsRelease:
    """Private range counts from one hierarchical release (Bharadwaj & Cormode 2022, Section
    4.2): one row per query, in query order (public), with the range answered (snapped to leaf
    boundaries), the ``estimate`` and an exact ``lower``/``upper`` confidence interval for the
    true count, and the pruning bounds."""

    histogram: HierarchicalHistogram
    queries: list[tuple[float, float]]
    clamp: bool = False
    name: str = "range (hierarchical)"
    neighbouring: Neighbouring = field(default_factory=Neighbouring.add_remove)

    def event(self) -> PrivacyEvent:
        return self.histogram.event()

    def guarantee(self) -> Budget:
        return self.histogram.guarantee()

    def requests(self, fields: Fields) -> tuple[Request, ...]:
        return (ColumnValues(Fields(fields.key, None, fields.reading)),)

    def draw(self, answers: Answers, rng: RandomSource) -> Release:
        values = _numbers(answers.of(ColumnValues), "range")
        hist = self.histogram.release(values.values, rng, clamp=self.clamp)
        found = [hist.range(a, b) for a, b in self.queries]
        meta = dict(hist.metadata)
        meta.update(key_column="query", confidence=self.histogram.confidence)

        def col(get: Any, dtype: Any) -> Any:
            return np.array([get(x) for x in found], dtype=dtype)

        return Release(
            keys=np.arange(len(found), dtype=np.int64),
            estimates=col(lambda x: x.estimate, np.float64),
            lower=col(lambda x: x.lower, np.int64),
            upper=col(lambda x: x.upper, np.int64),
            metadata=meta,
            diagnostics={**values.facts, **hist.diagnostics},
            extra={
                "from": col(lambda x: x.requested[0], np.float64),
                "to": col(lambda x: x.requested[1], np.float64),
                "answered_from": col(lambda x: x.range[0], np.float64),
                "answered_to": col(lambda x: x.range[1], np.float64),
                "fraction": col(lambda x: x.fraction, np.float64),
                "nodes": col(lambda x: x.nodes, np.int64),
                "withheld_nodes": col(lambda x: x.withheld_nodes, np.int64),
                "pruning_bound": col(lambda x: x.pruning_bound, np.float64),
                "lemma_bound": col(lambda x: x.lemma_bound, np.float64),
            },
        )


# -- private weighted sample -------------------------------------------------------------------


def pws_sample_event(epsilon: float, delta: float, epsilon_total: float = 0.0) -> PrivacyEvent:
    """A private weighted sample as a privacy event: the sanitiser is ``(epsilon, delta)``-DP
    (the pws sanitisers, Algorithms 3 to 5 of Cohen et al.); with a sample size ``k``, the
    private total drawn before it is ``epsilon_total``-DP (discrete Laplace), composed with it.

    >>> guarantee_of(pws_sample_event(0.75, 1e-6, 0.25))
    Budget(epsilon=1.0, delta=1e-06)
    """
    sample = ApproxDPEvent(epsilon, delta)
    if not epsilon_total:
        return sample
    return composed([ApproxDPEvent(epsilon_total, 0.0), sample])


def _private_tau(
    f: Any, k: int, power: float, m: int, epsilon: float, rng: RandomSource
) -> tuple[float, dict[str, Any]]:
    """``tau = k / max(D Z, 1)`` from a private total (see :class:`WeightedSampleRelease`)."""
    from privhist.noise import discrete_laplace, rational_at_least

    if power == 0:
        total, sens = int(f.shape[0]), 1
    elif power == 1:
        total, sens = int(f.sum(dtype=object)), 1
    else:  # power 2, frequencies clamped to m
        total, sens = int((f.astype(object) ** 2).sum()), 2 * m - 1
    scale = rational_at_least(Fraction(1) / Fraction(epsilon))
    z = total // sens + int(discrete_laplace(scale, rng, 1)[0])
    estimate = max(sens * z, 1)
    return k / estimate, {"k": k, "private_total": estimate, "epsilon_total": epsilon}


@dataclass
class WeightedSampleRelease:
    """A private weighted sample (Cohen, Geri, Sarlos & Stemmer, Algorithm 2), sanitised by the
    certified keys-and-frequencies sanitiser (or the keys sanitiser with ``keys_only``): one row
    per released key with its ``token``, ``estimate``, ``bias`` and ``variance`` (and with
    Algorithm 5 its ``sanitized_value``).

    With ``k`` instead of ``tau``, ``epsilon_total`` of the budget buys a private total
    ``S = sum_x f(min(w_x, M))`` (the paper's Section 3.1), and ``tau = k / max(D Z, 1)`` with
    ``Z = floor(S / D) + DiscreteLaplace(1 / eps_1)``, ``D`` the largest change of one element.
    Frequencies above ``max_frequency`` are clamped to it before sampling (``w -> min(w, M)``
    keeps neighbouring data neighbouring)."""

    epsilon: float
    delta: float
    scheme: str
    power: float
    max_frequency: int
    keys_only: bool
    rule: str
    weight: str | None = None
    aggregate: bool = False
    tau: float | None = None
    k: int | None = None
    epsilon_total: float = 0.0
    neighbouring: Neighbouring = field(default_factory=Neighbouring.add_remove)

    @property
    def name(self) -> str:
        return f"pws sample ({self.scheme})"

    def event(self) -> PrivacyEvent:
        return pws_sample_event(self.epsilon, self.delta, self.epsilon_total)

    def guarantee(self) -> Budget:
        return guarantee_of(self.event())

    def requests(self, fields: Fields) -> tuple[Request, ...]:
        return (
            KeyWeights(
                Fields(fields.key, None, fields.reading),
                weight=self.weight,
                aggregate=self.aggregate,
            ),
        )

    def draw(self, answers: Answers, rng: RandomSource) -> Release:
        from privhist.mechanisms.sampling.pws.sanitize import (
            sanitize_frequencies,
            sanitize_keys,
        )
        from privhist.mechanisms.sampling.pws.schemes import threshold_sample

        weights = answers.of(KeyWeights)
        m = self.max_frequency
        clamped = int((weights.values > m).sum())
        f = np.minimum(weights.values, m)
        extra: dict[str, Any] = {}
        t = self.tau
        if self.k is not None:
            t, extra = _private_tau(f, self.k, self.power, m, self.epsilon_total, rng)
        assert t is not None
        sample = threshold_sample(weights.keys, f, self.scheme, t, rng, power=self.power)  # type: ignore[arg-type]
        if self.keys_only:
            priv = sanitize_keys(sample, self.epsilon, self.delta, rng)
        else:
            priv = sanitize_frequencies(
                sample, self.epsilon, self.delta, rng, max_frequency=m, rule=self.rule
            )
        b = self.guarantee()
        guarantee = f"({b.epsilon}, {b.delta})-DP, element-level neighbours"
        if self.k is not None:
            guarantee += (
                f" (epsilon {self.epsilon_total:.6g} on the private total, "
                f"{self.epsilon:.6g} on the sample)"
            )
        meta: dict[str, Any] = {
            "mechanism": "pws sample",
            "scheme": self.scheme,
            "tau": t,
            "power": self.power,
            "max_frequency": m,
            "guarantee": guarantee,
            **extra,
            **priv.metadata,
            "library": LIBRARY,
            "integrity": "sealed",
        }
        columns: dict[str, Any] = {
            "token": np.asarray(priv.tokens),
            "estimate": np.asarray(priv.estimates, dtype=np.float64),
            "bias": np.asarray(priv.bias, dtype=np.float64),
            "variance": np.asarray(priv.variance, dtype=np.float64),
        }
        if self.rule == "max-separation":
            columns["sanitized_value"] = np.asarray(priv.values, dtype=np.float64)
        keys = np.array([str(x) for x in np.asarray(priv.keys).tolist()], dtype=object)
        return Release(
            keys=keys,
            metadata=_randomness(meta, rng),
            diagnostics={
                **weights.facts,
                "sample_size": len(sample),
                "clamped": clamped,
                "released_keys": len(priv),
            },
            extra=columns,
        )


# -- federated frequency estimation ------------------------------------------------------------


@dataclass
class FederatedFrequencyRelease:
    """User-level federated frequency estimation, TFFE or MFFE (the federated-frequency paper,
    Section 5): one row per item with its estimated mean count per user. The calibration needs
    the number of users and the frame dimension, which are public in secure aggregation; it is
    computed inside the draw from the answer (the guarantee states the target ``epsilon``)."""

    epsilon: float
    delta: float
    protocol: str
    theta: float
    bits: int
    max_items: int
    rounds: int
    eta: float
    frame: str
    domain: tuple[Any, ...] | None
    top_d: int | None
    secure_sum: str = "ideal"
    progress: Any = None
    announce: Any = None
    neighbouring: Neighbouring = field(default_factory=Neighbouring.replace)

    @property
    def name(self) -> str:
        return f"federated-frequency ({self.protocol})"

    def event(self) -> PrivacyEvent:
        return ApproxDPEvent(self.epsilon, self.delta)

    def guarantee(self) -> Budget:
        return Budget(self.epsilon, self.delta)

    def requests(self, fields: Fields) -> tuple[Request, ...]:
        return (UserItems(fields, domain=self.domain, top_d=self.top_d),)

    def draw(self, answers: Answers, rng: RandomSource) -> Release:
        from privhist.federated import ffe
        from privhist.federated.kashin import frame_for, uniform01
        from privhist.federated.secagg.aggregator import aggregator_factory

        users = answers.of(UserItems)
        n, d = users.n_users, users.dimension
        frm = frame_for(d, rng, self.frame)
        options: dict[str, Any] = {}
        if self.secure_sum != "ideal" and self.announce is not None:
            options["announce"] = self.announce  # each round states its cost before it runs

        def tick(label: str, total: int) -> Any:
            return (lambda k: None) if self.progress is None else self.progress(label, total)

        if self.protocol == "tffe":
            cal = ffe.calibrate_tffe(
                self.epsilon, self.delta, n, frm.D, bits=self.bits, theta=self.theta
            )
            result = ffe.tffe(
                users,
                frm,
                rng,
                m=cal.m,
                m_quantile=cal.m_quantile,
                max_items=self.max_items,
                theta=self.theta,
                bits=self.bits,
                aggregator=aggregator_factory(self.secure_sum, **options),
                progress=tick("TFFE", 2 * n),
            )
        else:
            sizes = ffe.round_sizes(n, self.rounds)
            cal = ffe.calibrate_mffe(self.epsilon, self.delta, min(sizes), frm.D, theta=self.theta)
            order = np.argsort(uniform01(rng, n), kind="stable")  # i.i.d. rounds (Corollary 1)
            result = ffe.mffe(
                users.subset(order),
                frm,
                rng,
                m=cal.m,
                m_quantile=cal.m_quantile,
                rounds=self.rounds,
                theta=self.theta,
                eta=self.eta,
                aggregator=aggregator_factory(self.secure_sum, **options),
                progress=tick("MFFE", n),
            )
        labels = users.labels if users.labels is not None else np.arange(d)
        keys = np.array([str(k) for k in np.asarray(labels).tolist()], dtype=object)
        order = np.argsort(keys, kind="stable")  # the release's canonical order
        spent = result.epsilon(self.delta)
        public = self.domain is not None
        meta: dict[str, Any] = {
            "mechanism": self.name,
            "protocol": result.protocol,
            "users": n,
            "items": d,
            "frame_dimension": frm.D,
            "guarantee": {
                "epsilon": spent,
                "delta": self.delta,
                "target_epsilon": self.epsilon,
                "neighbouring": "replace one user (all of her items)",
                "end_to_end": public,
                "statement": f"({spent:.4g}, {self.delta:g})-DP for replace-one-user neighbours",
            },
            "m": result.m,
            "m_quantile": result.m_quantile,
            "theta": result.theta,
            "gamma": result.gamma,
            "clips": list(result.clips),
            "l2_error_bound": None if math.isnan(result.bound_estimate) else result.bound_estimate,
            "noise_bound": result.noise_bound,
            "calibration": cal,
            "estimate_column": "mean_count_per_user",
            "key_column": "item",
            "library": LIBRARY,
        }
        return Release(
            keys=keys[order],
            estimates=np.asarray(result.estimate, dtype=np.float64)[order],
            metadata=_randomness(meta, rng),
            diagnostics={"users": n, **users.info},
        )


# -- user-level histograms with caps chosen privately ------------------------------------------


@dataclass
class AutoCapSelector:
    """A weighted selector whose cap ``max_keys`` is a DP quantile of users' distinct keys,
    bought with a share of the zCDP budget inside the same spend
    (:func:`privhist.mechanisms.user_level.caps.auto_selector`); the ledger records an event
    that bounds the selector whatever cap is chosen (:meth:`WeightedSelector.bound_event`)."""

    cls: Any
    epsilon: float
    delta: float
    options: dict[str, Any]

    def __post_init__(self) -> None:
        # parameters are checked (and the cost known) before anything is read
        self.selector = self.cls(self.epsilon, self.delta, **self.options)

    @property
    def name(self) -> str:
        return str(self.cls.name)

    @property
    def neighbouring(self) -> Neighbouring:
        from privhist.mechanisms.user_level.caps import CAP_CANDIDATES

        # the cap is chosen privately: the largest candidate bounds what the ledger records
        return Neighbouring.user(max(CAP_CANDIDATES), 1)

    def event(self) -> PrivacyEvent:
        event: PrivacyEvent = self.selector.bound_event()
        return event

    def guarantee(self) -> Budget:
        budget: Budget = self.selector.guarantee()
        return budget

    def requests(self, fields: Fields) -> tuple[Request, ...]:
        from privhist.core.requests import UserKeys

        return (UserKeys(fields),)

    def draw(self, answers: Answers, rng: RandomSource) -> Release:
        from privhist.core.requests import UserKeys
        from privhist.mechanisms.user_level.caps import auto_selector

        source = answers.of(UserKeys)
        chosen, choice = auto_selector(
            self.cls, self.epsilon, self.delta, source, rng=rng, **self.options
        )
        release: Release = chosen.release_weighted(source, rng)
        release.metadata["cap"] = {
            "max_partitions": choice.cap,
            "chosen_by": "dp quantile of users' distinct keys",
            "quantile": choice.quantile,
        }
        return release


@dataclass
class AutoCapMechanism:
    """A per-key mechanism whose caps are DP quantiles: ``k`` (``auto_k``) of users' distinct
    keys (:func:`~privhist.mechanisms.user_level.caps.dp_degree_cap`) and ``c`` (``auto_c``) of
    users' most records on one key (:func:`~privhist.mechanisms.user_level.caps.dp_record_cap`),
    each bought with ``cap_epsilon`` (discrete Laplace); the mechanism (one built for every
    candidate cap before any data is read, so no failure after the caps are drawn can depend on
    them) runs at the rest, and basic composition gives the whole, charged as one spend."""

    built: dict[tuple[int, int], Any]
    auto_k: bool
    auto_c: bool
    cap_epsilon: float
    mechanism_epsilon: float
    delta: float

    @property
    def name(self) -> str:
        return f"{next(iter(self.built.values())).name} (auto cap)"

    @property
    def neighbouring(self) -> Neighbouring:
        ks = [k for k, _ in self.built]
        cs = [c for _, c in self.built]
        return Neighbouring.user(int(max(ks)), int(max(cs)))

    def event(self) -> PrivacyEvent:
        # the DP caps (pure) and, whichever cap they choose, a release no worse than the
        # candidate with the largest delta -- composed by the accountant (basic composition)
        mechs = list(self.built.values())
        return composed(
            [
                ApproxDPEvent(self.cap_epsilon, 0.0, count=int(self.auto_k) + int(self.auto_c)),
                ApproxDPEvent(
                    max(m.guarantee().epsilon for m in mechs),
                    max(m.guarantee().delta for m in mechs),
                ),
            ]
        )

    def guarantee(self) -> Budget:
        return guarantee_of(self.event())

    def requests(self, fields: Fields) -> tuple[Request, ...]:
        from privhist.core.requests import UserKeys

        return (UserKeys(fields),)

    def draw(self, answers: Answers, rng: RandomSource) -> Release:
        from privhist.core.requests import UserKeys
        from privhist.mechanisms.user_level.caps import (
            CAP_CANDIDATES,
            DEFAULT_QUANTILE,
            RECORD_CAP_CANDIDATES,
            dp_degree_cap,
            dp_record_cap,
        )

        source = answers.of(UserKeys)
        k, c = next(iter(self.built))
        cap: dict[str, Any] = {}
        if self.auto_k:
            degrees = source.degree_histogram(CAP_CANDIDATES)
            k = dp_degree_cap(
                degrees, quantile=DEFAULT_QUANTILE, epsilon=self.cap_epsilon, rng=rng
            ).cap
            cap["max_partitions"] = k
            cap["max_partitions_chosen_by"] = "dp quantile of users' distinct keys"
        if self.auto_c:
            records = source.records_histogram(RECORD_CAP_CANDIDATES)
            c = dp_record_cap(
                records, quantile=DEFAULT_QUANTILE, epsilon=self.cap_epsilon, rng=rng
            ).cap
            cap["max_per_partition"] = c
            cap["max_per_partition_chosen_by"] = "dp quantile of users' most records on a key"
        mech = self.built[(k, c)]
        counts = answers.ask(KeyCounts(answers.fields, int(k), int(c)))
        release: Release = mech.release(counts, rng)
        release.diagnostics.setdefault("distinct_keys_counted", len(counts))
        n = int(self.auto_k) + int(self.auto_c)
        parts = " + ".join([f"{self.cap_epsilon:.6g}"] * n + [f"{self.mechanism_epsilon:.6g}"])
        total = self.guarantee()
        cap.update(
            {
                "noise": "discrete_laplace",
                "quantile": DEFAULT_QUANTILE,
                "epsilon": self.cap_epsilon * n,
                "composition": f"basic: ({parts}, {self.delta:g})",
                "total": {"epsilon": total.epsilon, "delta": total.delta},
            }
        )
        release.metadata["cap"] = cap
        state_whole(release, total, Neighbouring.user(int(k), int(c)))
        return release
