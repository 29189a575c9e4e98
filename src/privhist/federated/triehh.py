"""TrieHH++: federated heavy hitters from sample-and-threshold histograms of prefixes.

Bharadwaj & Cormode 2022, Section 4.1 (after Zhu, Kairouz, McMahan, Sun and Li 2020, TrieHH).
Every client holds one string over a public ``alphabet``; the string is extended by a
``terminator`` (not in the alphabet). The protocol runs ``L`` levels. At level ``l`` every client
whose string's ``(l - 1)``-prefix is a node of the current trie, and whose terminated string has at
least ``l`` characters, votes for its ``l``-prefix; the level's votes form a sample-and-threshold
histogram (:class:`~privhist.mechanisms.sampling.SampleAndThreshold`), and every released prefix
becomes a node of the trie carrying its sampled count and the estimate ``count / p`` ("TrieHH++":
counts on every node). A node ending with the terminator is a complete item: the heavy hitters
are those nodes. Strings longer than ``L - 1`` characters can only appear as prefixes.

**Sampling.** Each level samples the clients afresh (Poisson at the level's rate ``p``,
independently of the other levels), as TrieHH contacts a new set of clients in every round. On
aggregated counts a level costs one exact ``Binomial(count, p)`` per distinct eligible prefix
(:func:`privhist.noise.binomial`), so a run costs ``O(L x distinct items)``.

**What is composed, and why it is valid.** Fix neighbouring populations that differ by one client
(add/remove). Consider the *unrestricted* level-``l`` histogram: every client votes for its
``l``-prefix (if its terminated string is long enough), sampled and thresholded. A prefix's sampled
count depends only on the clients holding that prefix, so the restricted histogram the protocol
releases (prefixes whose parent is in the trie) is the unrestricted one restricted to those keys —
a function of the unrestricted histograms of levels ``1..l`` (post-processing, as the paper's
proof of its Lemma in Section 4.1 argues). The ``L`` unrestricted histograms use independent
samples, so the run is post-processing of ``L`` independent mechanisms. In each, the added client
moves one key's count by one (one vote per level), so each level's privacy is exactly the per-key
profile of sample-and-threshold at ``(p, tau)``
(:mod:`privhist.mechanisms.sampling.profile`). Three bounds on the whole run are reported:

* **basic** composition (Dwork & Roth 2014, Theorem 3.16): ``(L eps_l, L delta_l)`` where
  ``delta_l`` is the level's certified delta at ``eps_l`` — the paper's Lemma in Section 4.1;
* **advanced** composition (Dwork & Roth 2014, Theorem 3.20; the paper quotes it after its Lemma)
  with ``delta' = delta - L delta_l``;
* **PLD** composition of the exact per-level profile. Write ``P_c`` for the level's output with
  the client (its key at count ``c``) and ``Q_c`` without it (count ``c - 1``). The tradeoff
  functions ``T(Q_c, P_c)`` (type I error measured under ``Q_c``, type II under ``P_c``) over all
  counts ``c`` are bounded below by the convex, piecewise-linear
  ``g(x) = max(0, max_i (1 - delta_i - e^eps_i x), (1 - p)(1 - x))`` where ``delta_i`` is the
  certified ``sup_c H_(e^eps_i)(P_c || Q_c)`` (adding the client, Lemma B of the profile module)
  on a grid of ``eps_i``, and ``(1 - p)(1 - x)`` is Lemma A (removing the client is pure
  ``ln(1 / (1 - p))``: ``Q_c <= P_c / (1 - p)`` pointwise). The pair ``(P*, Q*)`` with
  ``T(Q*, P*) = g`` (:func:`privhist.accounting.pairs.dominating_pair`) dominates every
  ``(P_c, Q_c)`` in both hockey-stick directions; adaptive composition of dominating pairs is
  valid (Zhu, Dong & Wang 2022, "Optimal accounting of differential privacy via characteristic
  function", Theorem 10). The same client is added at every level, so composing ``(P*, Q*)``
  with itself (and ``(Q*, P*)`` with itself) covers both orders of the neighbouring pair. It is
  composed ``L`` times twice:

  - ``pld_certified``: :class:`privhist.accounting.certified.CertifiedAccount`, pessimistic
    discretisation on a ``2^-14`` grid with every rounding outwards -- a proven upper bound
    (the proof is in that module);
  - ``pld``: ``dp_accounting``'s float64 FFT composition with pessimistic discretisation
    (``symmetric=False``), an estimate, reported beside it for comparison.

The run's privacy event is that pair with its per-level point, composed ``L`` times
(:func:`privhist.mechanisms.sampling.pair.threshold_pair_event`); the bounds are the accountant's
(:func:`privhist.accounting.accountant.account`). The guarantee is the one of basic, advanced and
certified PLD with the smallest epsilon, all
stated at the same total ``delta`` (the float ``pld`` is never used as the guarantee; while
calibrating, a quick search uses it, and the final level epsilon is checked with the certified
composition). *Precision:* the ``delta_i`` are certified upper bounds (interval arithmetic); the
envelope and the atoms are float64, lowered by ``1e-14`` before the pair is built (the tests
check that the pair lies below the exact envelope in 60-digit arithmetic).

**One-shot variant** (the Remark after the Lemma of Section 4.1): :func:`one_shot_heavy_hitters`
releases one sample-and-threshold histogram over whole items, ``(eps, delta)`` with no factor
``L``.

**Alphabet.** Every character of every item must be in the alphabet: otherwise a
:class:`~privhist.core.errors.ValidationError` of the parameter ``alphabet`` names the first
uncovered character (items in sorted order), or, with ``drop_unknown=True``, clients whose item
has an uncovered character are dropped (each client's inclusion depends only on its own item, so
the guarantee is unchanged; the number dropped is a non-private diagnostic).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from privhist.accounting.accountant import account, float_pld
from privhist.accounting.events import DominatingPairEvent
from privhist.accounting.pairs import dominating_pair as dominating_pair
from privhist.core.budget import Budget
from privhist.core.constraints import Constraint, Declared
from privhist.core.errors import InputDataError, ValidationError
from privhist.core.random import RandomSource, SecureRandom
from privhist.core.text import counted
from privhist.core.validation import (
    check_delta,
    check_epsilon,
    check_positive_int,
    delta_constraint,
    float_up,
)
from privhist.federated.population import Population
from privhist.federated.secure_sum import AggregatorFactory, secure_histogram
from privhist.federated.triehh_intervals import node_interval
from privhist.io.release import Release
from privhist.mechanisms.sampling.pair import threshold_pair_event
from privhist.mechanisms.sampling.sample_threshold import SampleAndThreshold
from privhist.noise import binomial

I64 = npt.NDArray[np.int64]

__all__ = [
    "DEFAULT_ALPHABET",
    "HeavyHitters",
    "LevelsComposition",
    "TrieHH",
    "compose_levels",
    "dominating_pair",
    "one_shot_heavy_hitters",
]

#: the characters of words read by the text reader (:data:`privhist.io.readers.WORD_PATTERN`)
#: the most trie levels (the longest item a run can find)
MAX_LEVELS = 256

DEFAULT_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789'"
DEFAULT_TERMINATOR = "$"
#: grid of the certified PLD composition (:mod:`privhist.accounting.certified`)
CERTIFIED_STEP = Fraction(1, 2**14)


# --------------------------------------------------------------------------------------------
# the per-level dominating pair and the three compositions


def _pld(
    p: Fraction, tau: int, level_epsilon: float, levels: int, vdi: float, certified: bool = True
) -> Any:
    """The float64 PLD of ``levels`` levels (:func:`privhist.accounting.accountant.float_pld`)."""
    event = threshold_pair_event(p, tau, level_epsilon, None, levels, certified=certified)
    return float_pld(event, vdi)


@dataclass(frozen=True)
class LevelsComposition:
    """The privacy of ``levels`` sample-and-threshold levels, three ways, at one total delta.

    Every bound is the accountant's (:func:`privhist.accounting.accountant.account`) for
    :attr:`run_event`, the levels' dominating pair with their per-level point.

    Attributes:
        levels: ``L``.
        level: the per-level ``(eps_l, delta_l)`` (certified delta at ``eps_l``).
        sampling_rate: the levels' rate ``p``; ``threshold``: their ``tau``.
        delta: the total delta every bound below is stated at.
        basic: ``(L eps_l, L delta_l)``.
        advanced: advanced composition at ``delta``, None when ``L delta_l >= delta``.
        pld: ``dp_accounting``'s float64 PLD estimate: the smallest epsilon with delta at most
            ``delta`` (reported, not certified).
        pld_certified: the certified PLD bound (:mod:`privhist.accounting.certified`), None
            while calibrating or when no epsilon reaches ``delta``.
        method: which of basic, advanced and pld_certified has the smallest epsilon (that one
            is the guarantee); ``pld`` stands in for ``pld_certified`` only in the quick
            evaluations of the calibration search.
    """

    levels: int
    level: Budget
    sampling_rate: Fraction
    threshold: int
    delta: float
    basic: Budget
    advanced: Budget | None
    pld: Budget | None
    pld_certified: Budget | None = None
    certified: bool = True
    method: str = "basic"
    run_event: DominatingPairEvent | None = field(default=None, compare=False, repr=False)

    @property
    def guarantee(self) -> Budget:
        """The tightest of the proven bounds (the accountant's choice, :attr:`method`)."""
        b = {
            "basic": self.basic,
            "advanced": self.advanced,
            "pld": self.pld,
            "pld_certified": self.pld_certified,
        }[self.method]
        assert b is not None
        return b

    def event(self) -> DominatingPairEvent:
        """The run as a privacy event: the per-level dominating pair (module notes) with its
        per-level point, composed ``levels`` times."""
        if self.run_event is not None and self.certified:
            return self.run_event
        return threshold_pair_event(
            self.sampling_rate, self.threshold, self.level.epsilon, self.level.delta, self.levels
        )

    def to_dict(self) -> dict[str, Any]:
        def show(b: Budget | None) -> dict[str, float] | None:
            return None if b is None else {"epsilon": b.epsilon, "delta": b.delta}

        return {
            "levels": self.levels,
            "per_level": show(self.level),
            "sampling_rate": float(self.sampling_rate),
            "threshold": self.threshold,
            "basic": show(self.basic),
            "advanced": show(self.advanced),
            "pld": show(self.pld),
            "pld_certified": show(self.pld_certified),
            "used": self.method,
            "guarantee": show(self.guarantee),
        }


def compose_levels(
    mechanism: SampleAndThreshold,
    levels: int,
    delta: float,
    *,
    value_discretization_interval: float = 1e-4,
    _certified: bool = True,
) -> LevelsComposition:
    """Basic, advanced, float PLD and certified PLD composition of ``levels`` runs of
    ``mechanism`` at total ``delta``, by the accountant (module notes).

    ``mechanism`` must be record-level add/remove (one vote per client and level).

    >>> comp = compose_levels(SampleAndThreshold(0.2, 1e-9), 5, 1e-8)
    >>> comp.method, comp.guarantee == comp.pld_certified
    ('pld_certified', True)
    >>> abs(comp.pld_certified.epsilon - comp.pld.epsilon) < 0.01
    True
    """
    fn = "compose_levels"
    if not isinstance(mechanism, SampleAndThreshold):
        raise ValidationError("mechanism", fn, "a SampleAndThreshold", type(mechanism).__name__)
    if mechanism.neighbouring.l0_sensitivity != 1:
        raise ValidationError(
            "mechanism", fn, "add/remove neighbours (one key)", mechanism.neighbouring.describe()
        )
    n = check_positive_int(levels, fn, "levels")
    d = check_delta(delta, fn, positive=True)
    vdi = check_epsilon(value_discretization_interval, fn, "value_discretization_interval")
    eps_l = float(mechanism.epsilon_key)
    level = Budget(eps_l, mechanism.delta_exact)
    floor = float_up(n * Fraction(level.delta))
    if floor > d:
        raise ValidationError(
            "delta", fn, f"at least levels x the per-level delta ({floor:.3g})", delta
        )
    event = threshold_pair_event(
        mechanism.sampling_rate, mechanism.threshold, eps_l, level.delta, n, certified=_certified
    )
    rules = ("basic", "advanced", "pld_certified") if _certified else ("basic", "advanced", "pld")
    acc = account(
        event,
        d,
        rules=rules,
        report=("pld",),
        step=CERTIFIED_STEP,
        value_discretization_interval=vdi,
    )
    basic = acc.bounds["basic"]
    assert basic is not None  # the per-level deltas add up to at most d (checked above)
    return LevelsComposition(
        levels=n,
        level=level,
        sampling_rate=mechanism.sampling_rate,
        threshold=mechanism.threshold,
        delta=d,
        basic=basic,
        advanced=acc.bounds["advanced"],
        pld=acc.bounds["pld"],
        pld_certified=acc.bounds.get("pld_certified"),
        certified=_certified,
        method=acc.rule,
        run_event=event,
    )


# --------------------------------------------------------------------------------------------
# the protocol


@dataclass(frozen=True)
class HeavyHitters:
    """The result of a TrieHH++ run.

    ``items`` (complete items, terminator removed, sorted) with their sampled ``counts`` and
    ``estimates`` (``count / p``) at the level where they were completed; ``nodes`` maps every
    trie node (prefix, terminator included where complete) to ``(level, count, estimate)``;
    ``intervals`` maps every node to ``(lower, upper)``, a confidence interval for the number of
    clients holding that prefix, valid given the node's release
    (:mod:`privhist.federated.triehh_intervals`); ``lower`` / ``upper`` are the items' intervals;
    ``metadata`` holds the parameters and the guarantee; ``diagnostics`` exact, NON-private facts
    (clients, items dropped for the alphabet) that are never part of the output.
    """

    items: npt.NDArray[Any]
    counts: npt.NDArray[np.int64]
    estimates: npt.NDArray[np.float64]
    nodes: dict[str, tuple[int, int, float]]
    metadata: dict[str, Any]
    diagnostics: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    intervals: dict[str, tuple[int, int]] = field(default_factory=dict)
    lower: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    upper: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def release(self) -> Release:
        """The complete items as a :class:`~privhist.io.release.Release` (for the writers),
        with the interval for each item's number of clients as ``lower`` / ``upper``."""
        return Release(
            keys=self.items,
            values=self.counts,
            estimates=self.estimates,
            lower=self.lower,
            upper=self.upper,
            metadata=self.metadata,
        )

    def node_table(self) -> list[dict[str, Any]]:
        """Every trie node as ``{prefix, level, count, estimate, lower, upper}``, sorted by
        level then prefix."""
        rows = []
        for k in sorted(self.nodes, key=lambda v: (self.nodes[v][0], v)):
            level, count, est = self.nodes[k]
            lo, hi = self.intervals[k]
            row = {"prefix": k, "level": level, "count": count, "estimate": est}
            rows.append({**row, "lower": lo, "upper": hi})
        return rows

    def prefixes(self, level: int) -> list[str]:
        """The trie nodes of one level, sorted."""
        return sorted(k for k, v in self.nodes.items() if v[0] == level)


def check_alphabet(
    population: Population, alphabet: str, drop_unknown: bool, function: str
) -> tuple[Population | None, int]:
    """Check (or, with ``drop_unknown``, enforce) that every item is a string over ``alphabet``.

    Returns the population to use (None when every client was dropped) and the number of clients
    dropped.
    """
    allowed = set(alphabet)
    bad = np.zeros(len(population), dtype=bool)
    for i, item in enumerate(population.items.tolist()):
        if not isinstance(item, str):
            raise ValidationError("items", function, "strings", type(item).__name__)
        if not allowed.issuperset(item):
            if not drop_unknown:
                # a parameter error (alphabet, with drop_unknown), which the command line
                # restates with its flags
                ch = next(c for c in item if c not in allowed)
                raise ValidationError(
                    "alphabet",
                    function,
                    "a string holding every character of the items "
                    f"({ch!r}, in the item {item!r}, is not in it), or given with drop_unknown "
                    "to drop such items",
                    alphabet,
                )
            bad[i] = True
    if not bad.any():
        return population, 0
    dropped = int(population.counts[bad].sum())
    if bad.all():
        return None, dropped
    kept = Population.from_counts(population.items[~bad], population.counts[~bad])
    return kept, dropped


class TrieHH(Declared):
    """TrieHH++ with ``levels`` sample-and-threshold levels (see the module notes).

    Either give the per-level budget (``level_epsilon``, ``level_delta``: each level is
    ``SampleAndThreshold(level_epsilon, level_delta)``, exact calibration, and the whole run's
    guarantee at total ``delta`` is the tightest of the proven compositions), or only the total
    ``epsilon`` and ``delta``: the per-level epsilon is then the largest (bisection, 10 steps)
    whose tightest composition meets ``(epsilon, delta)``, with ``level_delta = delta / (2 L)``.

    >>> from privhist import SeededRandom
    >>> hh = TrieHH(epsilon=4.0, delta=1e-6, levels=3, level_epsilon=1.0, alphabet="hi")
    >>> pop = Population.from_counts(["hi", "ih"], [50000, 3])
    >>> hh.run(pop, SeededRandom(0)).items.tolist()
    ['hi']
    >>> hh.composition.method, hh.composition.guarantee.epsilon < 3.0
    ('pld_certified', True)
    """

    declared: ClassVar[dict[str, Constraint]] = {
        "epsilon": Constraint.real(0, open_low=True),
        "delta": delta_constraint(positive=True),
        # one level per character of the longest item found; the composition's cost grows with
        # the levels (PLD over L releases), and an item of more than 256 characters is no word
        "levels": Constraint.integer(1, MAX_LEVELS, limit_note="the largest accepted"),
        "drop_unknown": Constraint.flag(),
        "level_epsilon": Constraint.real(0, open_low=True, optional=True),
        "level_delta": delta_constraint(positive=True)._replace(optional=True),
        "alpha": SampleAndThreshold.constraints()["alpha"],
        "value_discretization_interval": Constraint.real(0, open_low=True),
        "confidence": Constraint.real(0, 1, open_low=True, open_high=True),
    }

    def __init__(
        self,
        epsilon: float,
        delta: float,
        *,
        levels: int = 10,
        alphabet: str = DEFAULT_ALPHABET,
        terminator: str = DEFAULT_TERMINATOR,
        drop_unknown: bool = False,
        level_epsilon: float | None = None,
        level_delta: float | None = None,
        alpha: float | Fraction | None = None,
        value_discretization_interval: float = 1e-4,
        confidence: float = 0.95,
    ) -> None:
        fn = "TrieHH"
        self.confidence: float = self.check_parameter("confidence", confidence)
        self.epsilon: float = self.check_parameter("epsilon", epsilon)
        self.delta: float = self.check_parameter("delta", delta)
        self.levels: int = self.check_parameter("levels", levels)
        # structured parameters: checked by type and against each other
        if not isinstance(alphabet, str) or not alphabet:
            raise ValidationError("alphabet", fn, "a non-empty string", alphabet)
        if not isinstance(terminator, str) or len(terminator) != 1:
            raise ValidationError("terminator", fn, "one character", terminator)
        if terminator in alphabet:
            raise ValidationError("terminator", fn, "a character not in the alphabet", terminator)
        self.alphabet = "".join(sorted(set(alphabet)))
        self.terminator = terminator
        self.drop_unknown: bool = self.check_parameter("drop_unknown", drop_unknown)
        self.check_parameter("alpha", alpha)  # each level's SampleAndThreshold converts it
        self.alpha = alpha
        vdi = value_discretization_interval
        self.vdi: float = self.check_parameter("value_discretization_interval", vdi)
        given_delta = self.check_parameter("level_delta", level_delta)
        self.level_delta: float = (
            self.delta / (2 * self.levels) if given_delta is None else given_delta
        )
        given_epsilon = self.check_parameter("level_epsilon", level_epsilon)
        if given_epsilon is not None:
            self.level_epsilon: float = given_epsilon
            self.mechanism, self.composition = self._evaluate(self.level_epsilon)
            if self.composition.guarantee.epsilon > self.epsilon:
                raise ValidationError(
                    "level_epsilon",
                    fn,
                    f"small enough that {self.levels} levels meet epsilon {self.epsilon:g} "
                    f"(they give {self.composition.guarantee.epsilon:.6g} by "
                    f"{self.composition.method} composition)",
                    level_epsilon,
                )
        else:
            self.level_epsilon, self.mechanism, self.composition = self._calibrate()

    def _evaluate(
        self, eps_l: float, quick: bool = False
    ) -> tuple[SampleAndThreshold, LevelsComposition]:
        m = SampleAndThreshold(eps_l, self.level_delta, alpha=self.alpha)
        vdi = max(self.vdi, 1e-3) if quick else self.vdi
        comp = compose_levels(
            m, self.levels, self.delta, value_discretization_interval=vdi, _certified=not quick
        )
        return m, comp

    def _calibrate(self) -> tuple[float, SampleAndThreshold, LevelsComposition]:
        """Bisection (geometric, 8 steps) on the per-level epsilon with float64 profiles and a
        coarse PLD grid, then the certified evaluation, stepping down by 2% until it meets the
        target; the per-level epsilon ``epsilon / L`` (basic composition) always does."""
        floor = self.epsilon / self.levels
        lo, hi = floor, self.epsilon
        for _ in range(8):
            mid = math.sqrt(lo * hi)
            try:
                ok = self._evaluate(mid, quick=True)[1].guarantee.epsilon <= self.epsilon
            except ValidationError:
                ok = False
            lo, hi = (mid, hi) if ok else (lo, mid)
        eps_l = lo
        while True:
            m, comp = self._evaluate(eps_l)
            if comp.guarantee.epsilon <= self.epsilon or eps_l <= floor:
                break
            eps_l = max(floor, eps_l * 0.98)
        if comp.guarantee.epsilon > self.epsilon:  # pragma: no cover - float rounding at L eps_l
            raise ValidationError("epsilon", "TrieHH", "reachable by the levels", self.epsilon)
        return eps_l, m, comp

    def parameters(self) -> dict[str, Any]:
        m = self.mechanism
        return {
            "levels": self.levels,
            "alphabet": self.alphabet,
            "terminator": self.terminator,
            "drop_unknown": self.drop_unknown,
            "level_epsilon": self.level_epsilon,
            "level_delta": self.level_delta,
            "sampling_rate": float(m.sampling_rate),
            "sampling_rate_exact": f"{m.sampling_rate.numerator}/{m.sampling_rate.denominator}",
            "threshold": m.threshold,
            "resampling": "independent Poisson sample of the clients at every level",
            "confidence": self.confidence,
            "intervals": (
                "per node, for the number of clients holding the prefix: selective "
                "Clopper-Pearson given release (Binomial(N, p) conditioned on >= threshold), "
                "coverage >= confidence for each released node"
            ),
        }

    def metadata(self, rng: RandomSource | None = None) -> dict[str, Any]:
        g = self.composition.guarantee
        meta: dict[str, Any] = {
            "mechanism": "triehh++",
            "parameters": self.parameters(),
            "composition": self.composition.to_dict(),
            "guarantee": {
                "epsilon": g.epsilon,
                "delta": g.delta,
                "neighbouring": "add or remove one client",
                "statement": (
                    f"({g.epsilon:.6g}, {g.delta:.3g})-DP under add or remove one client "
                    f"neighbours ({self.composition.method} composition of "
                    f"{counted(self.levels, 'level')})"
                ),
            },
        }
        if rng is not None:
            meta["randomness"] = rng.to_dict()
            if not rng.private:
                meta["warning"] = "drawn from a seeded source: reproducible and NOT private"
        return meta

    def _candidates(self, level: int, nodes: dict[str, tuple[int, int, float]]) -> Any:
        """The public candidates of ``level``: the surviving ``(level - 1)``-prefixes (not ended
        by the terminator) extended by every character and the terminator, sorted."""
        chars = sorted(set(self.alphabet) | {self.terminator})
        parents = [""]
        if level > 1:
            parents = [
                k for k, v in nodes.items() if v[0] == level - 1 and not k.endswith(self.terminator)
            ]
        return np.array(sorted(a + c for a in parents for c in chars))

    def _secure_votes(
        self,
        keys: Any,
        sampled: I64,
        level: int,
        nodes: dict[str, tuple[int, int, float]],
        secure_sum: AggregatorFactory,
    ) -> I64:
        """The level's sampled votes as the secure sum of one-hot vectors over its candidates."""
        cand = self._candidates(level, nodes)
        pos = np.searchsorted(cand, keys)
        if pos.size and (pos.max() >= cand.size or not np.array_equal(cand[pos], keys)):
            raise InputDataError("TrieHH.run: a prefix outside the level's public candidates")
        hist = secure_histogram(sampled, secure_sum, positions=pos, dimension=cand.size)
        return np.asarray(hist[pos], dtype=np.int64)

    def run(
        self,
        population: Population,
        rng: RandomSource | None = None,
        secure_sum: AggregatorFactory | None = None,
    ) -> HeavyHitters:
        """Run the ``L`` levels over ``population`` (items: strings over the alphabet).

        With ``secure_sum`` (``(modulus, dimension) -> SecureAggregator``) each level's votes are
        summed by that secure sum: every sampled client sends the one-hot vector of its prefix
        over the level's public candidates (the previous level's surviving prefixes extended
        by every character and the terminator), and the server sees only that histogram
        (:func:`~privhist.federated.secure_sum.secure_histogram`). The output is the same.
        """
        fn = "TrieHH.run"
        if not isinstance(population, Population):
            raise ValidationError("population", fn, "a Population", type(population).__name__)
        if rng is None:
            rng = SecureRandom()
        if not isinstance(rng, RandomSource):
            raise ValidationError("rng", fn, "a RandomSource", type(rng).__name__)
        pop, dropped = check_alphabet(population, self.alphabet, self.drop_unknown, fn)
        p, tau = self.mechanism.sampling_rate, self.mechanism.threshold
        pf = float(p)
        nodes: dict[str, tuple[int, int, float]] = {}
        if pop is not None:
            words = [w + self.terminator for w in pop.items.tolist()]
            counts = pop.counts
            alive = np.ones(len(words), dtype=bool)  # (l-1)-prefix is in the trie
            lengths = np.array([len(w) for w in words], dtype=np.int64)
            for level in range(1, self.levels + 1):
                eligible = np.flatnonzero(alive & (lengths >= level))
                if eligible.size == 0:
                    break
                prefixes = np.array([words[i][:level] for i in eligible.tolist()])
                keys, inverse = np.unique(prefixes, return_inverse=True)
                inverse = inverse.reshape(-1)
                totals = np.zeros(keys.shape[0], dtype=np.int64)
                np.add.at(totals, inverse, counts[eligible])
                sampled = binomial(totals, p, rng)
                if secure_sum is not None:
                    sampled = self._secure_votes(keys, sampled, level, nodes, secure_sum)
                keep = sampled >= tau
                for k, v in zip(keys[keep].tolist(), sampled[keep].tolist(), strict=True):
                    nodes[k] = (level, int(v), v / pf)
                alive = np.zeros(len(words), dtype=bool)
                alive[eligible[keep[inverse]]] = True
        done = sorted(k for k in nodes if k.endswith(self.terminator))
        items = np.array([k[:-1] for k in done], dtype=object if not done else None)
        cnt = np.array([nodes[k][1] for k in done], dtype=np.int64)
        est = cnt / pf
        diagnostics = {"clients": population.size, "dropped_for_alphabet": dropped}
        intervals = {
            k: node_interval(v[1], p, tau, self.confidence) for k, v in sorted(nodes.items())
        }
        lower = np.array([intervals[k][0] for k in done], dtype=np.int64)
        upper = np.array([intervals[k][1] for k in done], dtype=np.int64)
        meta = self.metadata(rng)
        return HeavyHitters(items, cnt, est, nodes, meta, diagnostics, intervals, lower, upper)


def one_shot_heavy_hitters(
    population: Population, mechanism: SampleAndThreshold, rng: RandomSource | None = None
) -> Release:
    """The Remark of Section 4.1: one sample-and-threshold histogram over whole items, with the
    mechanism's ``(eps, delta)`` and no factor ``L``."""
    if not isinstance(population, Population):
        raise ValidationError(
            "population", "one_shot_heavy_hitters", "a Population", type(population).__name__
        )
    return mechanism.release(population.to_counts(), rng)
