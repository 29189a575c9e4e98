"""Reporting curves of the user-level mechanisms, for ``plan``: Pr[release] by users holding a key.

Each function builds nothing from data: it takes a mechanism constructed from (epsilon, delta)
and public bounds and returns, for ``n = 0..max_users``, the probability that a key held by ``n``
users is released. For the weighted selectors this depends on how many keys each holder keeps:
the curve assumes every holder keeps ``degree`` keys (weight ``floor(scale / sqrt(degree))``
each) and that the key's weight does not change between DP-SIPS rounds (in a real run it can
only grow, as holders' other keys are released and removed, so the curve is a lower bound for
DP-SIPS). For Gaussian thresholding on counts, ``n`` users add ``n`` to the count (``c = 1``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import RandomSource
from privhist.core.requests import Fields, Request, UserKeys, UserVotes
from privhist.core.validation import check_positive_int
from privhist.core.weighted import VoteCounts, WeightedSource
from privhist.io.release import Release
from privhist.mechanisms.user_level import GaussianThresholdHistogram, WeightedSelector


def selector_curve(
    mechanism: WeightedSelector, max_users: int, *, degree: int = 1
) -> dict[str, Any]:
    """Pr[release] of a key held by ``n`` users, each keeping ``degree`` keys, all rounds.

    >>> from privhist.mechanisms.user_level import WeightedGaussianSelection
    >>> c = selector_curve(WeightedGaussianSelection(1.0, 1e-6), 60)
    >>> bool(c["probability"][0] < 1e-6 < 0.99 < c["probability"][60])
    True
    """
    fn = "selector_curve"
    if not isinstance(mechanism, WeightedSelector):
        raise ValidationError("mechanism", fn, "a WeightedSelector", type(mechanism).__name__)
    n_max = check_positive_int(max_users, fn, "max_users")
    d = check_positive_int(degree, fn, "degree")
    if d > mechanism.max_keys:
        d = mechanism.max_keys  # a holder keeps at most max_keys keys
    w = mechanism.weights[d - 1]
    n = np.arange(n_max + 1, dtype=np.int64)
    p = mechanism.ever_released(n * w)
    return {
        "mechanism": mechanism.name,
        "users": n,
        "probability": p,
        "degree": d,
        "users_at_half": _first(p, 0.5),
        "users_at_99": _first(p, 0.99),
    }


def gaussian_threshold_curve(
    mechanism: GaussianThresholdHistogram, max_users: int
) -> dict[str, Any]:
    """Pr[release] of a key held by ``n`` users (one record each) under Gaussian thresholding."""
    fn = "gaussian_threshold_curve"
    if not isinstance(mechanism, GaussianThresholdHistogram):
        raise ValidationError(
            "mechanism", fn, "a GaussianThresholdHistogram", type(mechanism).__name__
        )
    p = mechanism.reporting_probability(check_positive_int(max_users, fn, "max_users"))
    return {
        "mechanism": mechanism.name,
        "users": np.arange(p.shape[0], dtype=np.int64),
        "probability": p,
        "users_at_half": _first(p, 0.5),
        "users_at_99": _first(p, 0.99),
    }


def _first(p: npt.NDArray[np.float64], level: float) -> int | None:
    hit = np.flatnonzero(p >= level)
    return int(hit[0]) if hit.size else None


def curves_summary(curves: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """JSON-friendly rows (mechanism, users at 50% and 99% release) for a plan report."""
    return [
        {
            "mechanism": c["mechanism"],
            "users_at_half": c["users_at_half"],
            "users_at_99": c["users_at_99"],
            "max_probability": float(np.max(c["probability"]))
            if len(c["probability"])
            else math.nan,
        }
        for c in curves
    ]


# -- the user-level choice ---------------------------------------------------------------------
#
# ``choose`` is what a release calls to pick the user-level mechanism and its parameters before
# any data is read; the plan it returns states the spend, explains the choice (``explain``: what
# a dry run prints) and, for the default, decides between the candidates from a DP histogram of
# users' numbers of keys bought inside the same spend (``decide``).

#: the share of epsilon the default spends on its two DP statistics (discrete Laplace, half each)
HISTOGRAM_FRACTION = 0.02
#: vote selection when at least this share of users find every key they hold at the vote cap
#: (``UserLevelPlan.decide``): retail.dat, where cumulative-sips releases more keys at (1, 1e-8)
#: and (1, 1e-5), has 0.05 and 0.07; where vote selection releases more (retail at (3, e^-10),
#: msweb) 0.35 and 0.86-0.96 (from 0.19 on retail's baskets split in two)
NON_VOTER_SHARE = 0.1
#: the quantile of users' numbers of keys that sets cumulative-sips' cap in the default plan: a
#: larger cap costs little (the private-key bound grows like ``ln cap``), a smaller one drops
#: heavy users' keys; on retail.dat (the cap sweep's best is 50; 0.9 gives 30) and checked on the
#: retail households (its best, 100)
CAP_QUANTILE = 0.975
#: the count caps ``k_c`` of vote selection's candidates with counts: the degree histogram's
#: 0.9-quantile cap (a candidate of :data:`~privhist.mechanisms.user_level.caps.CAP_CANDIDATES`),
#: at most 20 (:meth:`UserLevelPlan.decide`)
VOTE_COUNT_CAPS = (1, 2, 3, 5, 10, 20)
#: the degrees at which :func:`rank_user_level` tabulates each mechanism in an explanation
EXPLAIN_DEGREES = (1, 5, 20, 100)
#: the caps cumulative-sips may take in the default plan: the DP quantile, at least 5
DEFAULT_PLAN_CAPS = (5, 10, 20, 30, 50, 100, 200, 500, 1000)
#: the largest cap :func:`choose` ranks the selectors at (building a selector costs time linear in
#: its cap); the Session leaves larger caps to the per-key planner
MAX_RANKED_CAP = DEFAULT_PLAN_CAPS[-1]
#: the weighted selectors ranked at a given cap, and the per-key mechanisms ranked beside them
_SELECTORS = ("cumulative-sips", "dp-sips", "wgm")
_PER_KEY = ("optimal-selection", "gaussian-threshold", "stability")
#: the mechanisms a plan with a given cap chooses from (the per-key ones are ranked beside them)
_CHOSEN = ("vote-selection", *_SELECTORS)


def users_at_half(mechanism: Any, degree: int) -> float:
    """The number of users, each holding ``degree`` keys, that a key needs to be released with
    probability 1/2 (the planner's yardstick; smaller is better).

    * vote selection: a holder of ``degree`` keys votes for a given one about once in
      ``degree`` turns, so ``degree`` times the votes released at 1/2;
    * weighted selectors: ``users_at_half`` of :func:`selector_curve` at ``degree`` (holders
      keep ``min(degree, max_keys)`` keys; a holder keeps this key with probability
      ``max_keys / degree`` when ``degree`` is larger);
    * per-key mechanisms (built for ``Neighbouring.user(k, 1)``): a holder keeps this key with
      probability ``min(1, k / degree)``, so the count at 1/2 over that probability.

    Rerouting (votes moving away from keys at the cap, keys leaving the rounds once released)
    is left out on every side.
    """
    from privhist.mechanisms.base import Mechanism
    from privhist.mechanisms.user_level.votes import VoteSelection

    d = check_positive_int(degree, "users_at_half", "degree")
    if isinstance(mechanism, VoteSelection):
        return float(d * mechanism.votes_at(0.5))
    if isinstance(mechanism, WeightedSelector):
        kept = min(d, mechanism.max_keys)
        share = min(1.0, mechanism.max_keys / d)
        w = mechanism.weights[kept - 1]
        horizon = 1 << 22
        lo, hi = 0, 1
        while float(mechanism.ever_released(np.array([int(hi * share * w)]))[0]) < 0.5:
            hi *= 2
            if hi > horizon:
                return math.inf
        while hi - lo > 1:
            mid = (lo + hi) // 2
            p = float(mechanism.ever_released(np.array([int(mid * share * w)]))[0])
            lo, hi = (lo, mid) if p >= 0.5 else (mid, hi)
        return float(hi)
    if isinstance(mechanism, Mechanism):
        k = mechanism.neighbouring.max_partitions_contributed or 1
        share = min(1.0, k / d)
        rp = mechanism.reporting_probability(200_000)
        hit = np.flatnonzero(rp >= 0.5)
        return float(hit[0]) / share if hit.size else math.inf
    raise ValidationError("mechanism", "users_at_half", "a user-level mechanism", mechanism)


def quantile_cap(noisy: npt.ArrayLike, quantile: float) -> int:
    """The smallest candidate cap (:data:`~privhist.mechanisms.user_level.caps.CAP_CANDIDATES`)
    whose bucket and those below hold at least ``quantile`` of the users, each noisy count
    clipped at zero first (:func:`~privhist.mechanisms.user_level.caps.cap_from_histogram`).
    Clipping adds the positive noise of empty buckets, so the cap errs upward on small data
    sets, which costs little (the private-key bound grows like ``ln cap``); the unclipped sums
    err both ways, and a cap too small drops the keys of users holding many. Post-processing.

    >>> quantile_cap([0, 0, 0, 0, 0, 0, 0, 950, 50, -40, 60, -30, 20], 0.9)  # 1,000 of 1,080
    100
    """
    from privhist.mechanisms.user_level.caps import cap_from_histogram

    return cap_from_histogram(noisy, quantile)


def plan_cap(quantile_cap: int) -> int:
    """The cumulative-sips cap of the default plan for a DP quantile cap: the smallest of
    :data:`DEFAULT_PLAN_CAPS` at least as large (so at least 5: below it a cap saves almost
    nothing in the threshold, and such data go to vote selection).

    >>> plan_cap(2), plan_cap(30), plan_cap(1000)
    (5, 30, 1000)
    """
    for c in DEFAULT_PLAN_CAPS:
        if c >= quantile_cap:
            return c
    return DEFAULT_PLAN_CAPS[-1]


@dataclass(frozen=True)
class Decision:
    """The mechanism a plan settled on, and why (JSON-friendly ``reasons``)."""

    name: str
    mechanism: Any
    reasons: dict[str, Any]


class SelectorFamily(Mapping[int, Any]):
    """A weighted selector of one budget at each of a plan's caps, each built the first time it
    is asked for: the default plan needs the one its decision picks, and building one
    calibrates its noise and thresholds (up to about a second at a large cap, the first time in
    a process).

    The first cap's selector (:attr:`probe`) is built at once, so a budget too small for the
    selector is refused before any data is read. What the plan states of the family needs no
    other member: every member is calibrated to the same point ``(epsilon, delta)`` and states
    it (:meth:`WeightedSelector.guarantee`), and a member counts a user on at most its cap
    (``max_keys``) and, with counts, on at most the count cap it shares with the probe.
    :meth:`__getitem__` checks both of every member it builds and refuses one that states more.
    """

    def __init__(self, built: _Built, name: str, caps: tuple[int, ...]) -> None:
        self._built, self.name, self.caps = built, name, caps
        probe = built.get(name, caps[0])
        if probe is None:
            raise ValidationError(
                "epsilon", "choose", f"large enough for {name} at every cap", built.epsilon
            )
        self.probe: WeightedSelector = probe

    def __getitem__(self, cap: int) -> Any:
        if cap not in self.caps:
            raise KeyError(cap)
        mech = self._built.get(self.name, cap)
        stated, own = self.probe.guarantee(), None if mech is None else mech.guarantee()
        if (
            own is None
            or own.epsilon > stated.epsilon
            or own.delta > stated.delta
            or mech.counts != self.probe.counts
            or (mech.counts and mech.count_max_keys != self.probe.count_max_keys)
        ):
            raise ValidationError(
                "cap", "SelectorFamily", f"a cap {self.name} keeps the family's statement", cap
            )
        return mech

    def __iter__(self) -> Iterator[int]:
        return iter(self.caps)

    def __len__(self) -> int:
        return len(self.caps)

    def max_partitions(self) -> int:
        """The most keys any member counts a user on (its cap, or its count cap)."""
        p = self.probe
        return max(max(self.caps), p.count_max_keys if p.counts else 1)


class UserLevelPlan:
    """The user-level release :func:`choose` plans: the spend, the candidates (built from the
    budget and public bounds only, before any data is read), the rule that picks one, and an
    explanation of all of it (:meth:`explain`: what a dry run prints).

    Two kinds. A *fixed* plan holds one mechanism (:attr:`fixed`; ``histogram_epsilon`` is 0)
    and is that mechanism's release. The *default* plan spends ``histogram_epsilon`` on two DP
    statistics and runs the candidate :meth:`decide` picks from them at ``(epsilon -
    histogram_epsilon, delta)``.

    Guarantee of the default plan (add or remove one user). Fix the vote rule's salt and the
    users' priorities (:mod:`~privhist.mechanisms.user_level.votes`, item 1). Given them, the
    release is the adaptive composition of three mechanisms with independent noise: the degree
    histogram with discrete Laplace noise of scale ``2 / histogram_epsilon`` (each user is in one
    bucket: L1 sensitivity 1; ``histogram_epsilon / 2``-DP, CKS 2020 Algorithm 2), the number of
    users with no key below the vote cap with the same noise (sensitivity 1 by item 2 of the
    votes module; ``histogram_epsilon / 2``-DP), and the chosen candidate, which is ``(epsilon -
    histogram_epsilon, delta)``-DP whichever it is (vote selection on the same votes, by items
    2-3 of the votes module; a weighted selector with its own randomness). Adaptive basic
    composition makes the whole ``(epsilon, delta)``-DP for every fixed salt and priorities,
    and the mixture over them keeps it (joint convexity of the hockey-stick divergence, as in
    item 3 of the votes module). When vote selection is not a candidate (a named selector with
    an ``"auto"`` cap) the histogram takes all of ``histogram_epsilon``.
    """

    def __init__(
        self,
        epsilon: float,
        delta: float,
        *,
        keys_only: bool,
        candidates: dict[str, Any],
        histogram_epsilon: float,
        ranking: list[dict[str, Any]] | Callable[[], list[dict[str, Any]]],
        rule: str,
        confidence: float,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.keys_only = keys_only
        self.candidates = candidates
        self.histogram_epsilon = histogram_epsilon
        self._ranking = ranking
        self.rule = rule
        self.confidence = confidence
        #: the weighted selector among the candidates (the default plan's cap-indexed family)
        self.selector_name = next(
            (n for n, m in candidates.items() if n != "vote-selection" and isinstance(m, Mapping)),
            "cumulative-sips",
        )

    @property
    def ranking(self) -> list[dict[str, Any]]:
        """Every applicable mechanism ranked (:func:`rank_user_level`); the default plan's is
        for information only, so it is computed the first time it is asked for (a dry run)."""
        if callable(self._ranking):
            self._ranking = self._ranking()
        return self._ranking

    @property
    def needs_degree_histogram(self) -> bool:
        """Whether :meth:`decide` needs the exact degree histogram (``WeightedSource.
        degree_histogram(CAP_CANDIDATES)``) of the data."""
        return self.histogram_epsilon > 0

    @property
    def needs_votes(self) -> bool:
        """Whether :meth:`decide` needs the vote rule's ``non_voters`` (the engine then casts
        the votes once, with the caps :attr:`vote_caps`; vote selection releases from them)."""
        return self.needs_degree_histogram and "vote-selection" in self.candidates

    @property
    def vote_caps(self) -> tuple[int, int] | None:
        """``(cap, top_cap)`` the votes are cast with (None when no votes are needed)."""
        if not self.needs_votes:
            return None
        vote = next(iter(self.candidates["vote-selection"].values()))
        return vote.cap, vote.top_cap

    @property
    def name(self) -> str:
        """The release's name in the ledger: the mechanism of a fixed plan, else
        ``user-level-default``."""
        fixed = self.fixed
        return fixed.name if fixed is not None else "user-level-default"

    @property
    def neighbouring(self) -> Neighbouring:
        """The relation a ledger records: adding or removing one user, stated with the largest
        number of keys any candidate counts a user on (weighted selectors' ``max_keys`` and
        count caps; vote selection bounds none: one vote per user, whatever it holds)."""
        from privhist.mechanisms.user_level.votes import VoteSelection

        k = 1
        for family in self._families():
            k = max(k, family.max_partitions())
        for m in self._mechanisms():
            if isinstance(m, WeightedSelector):
                k = max(k, m.max_keys, m.count_max_keys if m.counts else 1)
            elif isinstance(m, VoteSelection):
                k = max(k, m.neighbouring.max_partitions_contributed)
            else:
                k = max(k, m.neighbouring.max_partitions_contributed)
        return Neighbouring.user(k, 1)

    @property
    def fixed(self) -> Decision | None:
        """The decision of a fixed plan (None for the default plan)."""
        if self.needs_degree_histogram:
            return None
        ((name, mech),) = self.candidates.items()
        return Decision(name, mech, {"rule": self.rule})

    def event(self) -> Any:
        """The privacy event the ledger records: the histogram (pure ``histogram_epsilon``) and a
        release no worse than every candidate's ``(epsilon', delta')``, composed."""
        from privhist.accounting.composition import ApproxDPEvent, composed

        worst_eps = max(m.guarantee().epsilon for m in self._mechanisms())
        worst_delta = max(m.guarantee().delta for m in self._mechanisms())
        parts = [ApproxDPEvent(worst_eps, worst_delta)]
        if self.needs_degree_histogram:
            parts.insert(0, ApproxDPEvent(self.histogram_epsilon, 0.0))
        return composed(parts)

    def guarantee(self) -> Any:
        """``(epsilon, delta)`` by basic composition of :meth:`event`'s parts, summed exactly
        (never above the request: :func:`choose` splits epsilon so)."""
        from privhist.core.budget import Budget
        from privhist.core.validation import float_up

        exact = Fraction(self.histogram_epsilon) + max(
            Fraction(m.guarantee().epsilon) for m in self._mechanisms()
        )
        dlt = max(m.guarantee().delta for m in self._mechanisms())
        return Budget(self.epsilon if exact <= Fraction(self.epsilon) else float_up(exact), dlt)

    def _families(self) -> list[SelectorFamily]:
        return [m for m in self.candidates.values() if isinstance(m, SelectorFamily)]

    def _mechanisms(self) -> list[Any]:
        """The built candidates whose statements bound the release's; a family of selectors
        stands in by its probe, whose guarantee every member keeps (:class:`SelectorFamily`)."""
        out: list[Any] = []
        for m in self.candidates.values():
            if isinstance(m, SelectorFamily):
                out.append(m.probe)
            else:
                out.extend(m.values() if isinstance(m, Mapping) else [m])
        return out

    def explain(self) -> dict[str, Any]:
        """What a dry run prints: the spend, the candidates and the rule, and every applicable
        mechanism ranked by :func:`users_at_half`."""
        spend: dict[str, Any] = {
            "total": {"epsilon": self.epsilon, "delta": self.delta},
            "composition": "basic (the DP statistics, then the chosen release)"
            if self.needs_degree_histogram
            else "a single release",
        }
        if self.needs_degree_histogram:
            votes = "vote-selection" in self.candidates
            spend["degree_histogram"] = {
                "epsilon": self.histogram_epsilon / 2 if votes else self.histogram_epsilon,
                "noise": "discrete_laplace",
                "buckets": "users by number of distinct keys",
            }
            if votes:
                spend["non_voters"] = {
                    "epsilon": self.histogram_epsilon / 2,
                    "noise": "discrete_laplace",
                    "statistic": "users who find every key they hold at the vote cap",
                }
        spend["release"] = {
            "epsilon": self.epsilon - self.histogram_epsilon,
            "delta": self.delta,
        }
        names = {
            n: (sorted(m) if isinstance(m, Mapping) else None) for n, m in self.candidates.items()
        }
        return {
            "choice": self.rule,
            "candidates": {n: ({"caps": c} if c else {}) for n, c in names.items()},
            "keys_only": self.keys_only,
            "spend": spend,
            "ranking": self.ranking,
        }

    def decide(self, degree_histogram: npt.ArrayLike, non_voters: int | None, rng: Any) -> Decision:
        """Pick the mechanism (default plan) from two DP statistics, each bought with half of
        ``histogram_epsilon`` (discrete Laplace; everything after is post-processing):

        * the histogram of users by their number of keys (``degree_histogram``, exact; each user
          in one bucket): its :data:`CAP_QUANTILE` quantile gives the cumulative-sips cap
          (:func:`quantile_cap`, :func:`plan_cap`), its total the number of users ``N``;
        * the number of users with no key below the vote cap in the vote rule run with the
          plan's vote caps
          (``non_voters``, exact; it changes by at most one with one user, item 2 of
          :mod:`~privhist.mechanisms.user_level.votes`).

        Vote selection when at least :data:`NON_VOTER_SHARE` of the users have no key below the
        vote cap (every key they hold already had enough votes: votes are plentiful where they
        are needed), else cumulative-sips. Vote selection with counts counts each user on at
        most ``k_c`` released keys, ``k_c`` the histogram's 0.9-quantile cap
        (:func:`~privhist.mechanisms.user_level.caps.dp_degree_cap`: nine users in ten are
        counted on all the keys they hold) and at most 20; its count noise is the one of smaller
        expected absolute error at that ``k_c`` (:mod:`~privhist.mechanisms.user_level.votes`,
        item 4). ``non_voters`` may be None for a plan whose candidates do not
        include vote selection."""
        fixed = self.fixed
        if fixed is not None:
            return fixed
        from privhist.mechanisms.user_level.caps import dp_degree_cap
        from privhist.noise import discrete_laplace, rational_at_least

        votes = "vote-selection" in self.candidates
        half = self.histogram_epsilon / 2 if votes else self.histogram_epsilon
        choice = dp_degree_cap(degree_histogram, epsilon=half, rng=rng)
        noisy = choice.noisy_histogram
        sips: Mapping[int, Any] = self.candidates[self.selector_name]
        cap = plan_cap(quantile_cap(noisy, CAP_QUANTILE))
        reasons: dict[str, Any] = {
            "rule": self.rule,
            "degree_histogram": choice.to_dict(),
            "cap": cap,
        }
        if not votes:
            return Decision(self.selector_name, sips[cap], reasons)
        if non_voters is None:
            raise ValidationError("non_voters", "decide", "the vote rule's non-voters", None)
        scale = rational_at_least(1 / Fraction(half), 2**20)
        noisy_nv = int(non_voters) + int(discrete_laplace(scale, rng, 1)[0])
        users = float(np.asarray(noisy, dtype=np.float64).sum())  # unbiased: summed unclipped
        use_votes = noisy_nv >= NON_VOTER_SHARE * users
        reasons.update(
            {
                "noisy_users": users,
                "noisy_non_voters": noisy_nv,
                "non_voter_share": noisy_nv / users if users > 0 else None,
                "threshold": NON_VOTER_SHARE,
            }
        )
        if use_votes:
            by_cap: dict[int, Any] = self.candidates["vote-selection"]
            k_c = min(choice.cap, VOTE_COUNT_CAPS[-1]) if not self.keys_only else 0
            reasons["count_max_keys"] = k_c if k_c else None
            return Decision("vote-selection", by_cap[k_c], reasons)
        return Decision(self.selector_name, sips[cap], reasons)

    def requests(self, fields: Fields) -> tuple[Request, ...]:
        """What the plan asks of the data (:mod:`privhist.mechanisms.releasable`): a fixed plan
        its mechanism's requests; the default plan the users' keys (the degree histogram, the
        selectors' rounds, the counts) and, with vote selection among its candidates, the votes
        cast once under the candidates' caps (:attr:`vote_caps`)."""
        fixed = self.fixed
        if fixed is not None:
            out: tuple[Request, ...] = fixed.mechanism.requests(fields)
            return out
        caps = self.vote_caps
        keys = UserKeys(fields)
        return (keys,) if caps is None else (keys, UserVotes(fields, *caps))

    def draw(self, answers: Any, rng: RandomSource) -> Release:
        """Decide (:meth:`decide`) and release from the engine's answers; the release's metadata
        gains ``choice`` (the decision and its reasons) and ``plan_guarantee``."""
        fixed = self.fixed
        if fixed is not None:
            return self._stated(fixed, fixed.mechanism.draw(answers, rng))
        votes = None if self.vote_caps is None else self._votes(answers.of(UserVotes))
        return self._released(answers.of(UserKeys), votes, rng)

    def release(self, source: Any, vote_source: Any, rng: Any) -> Any:
        """Decide and release on one machine: ``source`` a
        :class:`~privhist.core.weighted.WeightedSource` (degree histogram, held sums, unit
        counts), ``vote_source`` a :class:`~privhist.mechanisms.user_level.votes.VoteSource` of
        the same data (it casts the votes once: the decision's statistic and, when vote
        selection is chosen, its release use the same votes). The release's metadata gains
        ``choice`` (the decision and its reasons)."""
        fixed = self.fixed
        if fixed is not None:
            if fixed.name == "vote-selection":
                return self._stated(fixed, fixed.mechanism.release(vote_source, rng))
            if isinstance(fixed.mechanism, WeightedSelector):
                return self._stated(fixed, fixed.mechanism.release_weighted(source, rng))
            raise ValidationError(
                "mechanism",
                "UserLevelPlan.release",
                "a selector (per-key mechanisms release from counts)",
                fixed.name,
            )
        caps = self.vote_caps
        votes = None if caps is None else self._votes(vote_source.vote_counts(*caps))
        return self._released(source, votes, rng)

    def _votes(self, votes: Any) -> VoteCounts:
        if not isinstance(votes, VoteCounts):
            raise ValidationError("votes", "UserLevelPlan", "VoteCounts", type(votes).__name__)
        return votes

    def _released(
        self, source: WeightedSource, votes: VoteCounts | None, rng: RandomSource
    ) -> Release:
        """The default plan's release: the decision from the degree histogram and the votes'
        non-voters, then the chosen mechanism on the same source and votes."""
        from privhist.mechanisms.user_level.caps import CAP_CANDIDATES

        if not isinstance(source, WeightedSource):
            raise ValidationError(
                "source", "UserLevelPlan", "a WeightedSource", type(source).__name__
            )
        hist = source.degree_histogram(CAP_CANDIDATES)
        decision = self.decide(hist, None if votes is None else votes.non_voters, rng)
        mech = decision.mechanism
        if decision.name == "vote-selection":
            # the candidates share one selection budget, so one pair of caps (vote_caps)
            assert votes is not None and (mech.cap, mech.top_cap) == self.vote_caps
            release: Release = mech.release_votes(votes, source, rng)
        else:
            release = mech.release_weighted(source, rng)
        return self._stated(decision, release)

    def _stated(self, decision: Decision, release: Release) -> Release:
        """The release's metadata states the whole plan: its guarantee (the spend; the chosen
        mechanism's own part moves to ``mechanism_guarantee``), the relation the ledger records
        (as per-key releases state theirs), and the choice with its reasons."""
        meta = release.metadata
        state_whole(release, self.guarantee(), self.neighbouring)
        meta["choice"] = {"mechanism": decision.name, **decision.reasons}
        meta["plan_guarantee"] = {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "composition": "basic" if self.needs_degree_histogram else "single release",
        }
        return release


def state_whole(release: Release, whole: Any, neighbouring: Neighbouring) -> None:
    """Make ``release``'s metadata state the whole spend of a plan (``whole``, a
    :class:`~privhist.core.budget.Budget`) under ``neighbouring``, the relation the ledger
    records: the chosen mechanism's own guarantee moves to ``mechanism_guarantee``."""
    meta = release.metadata
    if "guarantee" in meta:
        meta["mechanism_guarantee"] = meta["guarantee"]
    meta["guarantee"] = {
        "epsilon": whole.epsilon,
        "delta": whole.delta,
        "neighbouring": neighbouring.describe(),
        "statement": f"{whole} under {neighbouring.describe()} neighbours",
    }
    meta.setdefault("neighbouring", neighbouring.to_dict())


class _Built:
    """Mechanisms of one budget built for planning, by (name, cap): construction calibrates
    noise and thresholds (a fraction of a second each), a plan asks for the same ones at several
    degrees, and a dry run and the release that follows plan twice (:func:`_build` caches).
    ``count_caps``: count the released keys on at most the cap (a cap the caller stated bounds
    every part of the release), else the mechanisms' own count caps."""

    def __init__(
        self,
        epsilon: float,
        delta: float,
        keys_only: bool,
        confidence: float,
        count_caps: bool = False,
    ) -> None:
        self.epsilon, self.delta = epsilon, delta
        self.keys_only, self.confidence = keys_only, confidence
        self.count_caps = count_caps

    def get(
        self,
        name: str,
        cap: int | None,
        count_cap: int | None = None,
        count_delta_share: Fraction | None = None,
    ) -> Any:
        """The mechanism ``name`` at cap ``cap`` (vote selection: no cap) counting on
        ``count_cap`` keys (None: the cap when ``count_caps``, else the default), or None when
        the budget does not allow it (a :class:`ValidationError` at construction). Vote
        selection takes ``count_delta_share`` (None: its default)."""
        if count_cap is None and self.count_caps:
            count_cap = cap
        return _build(
            name,
            cap,
            count_cap,
            self.epsilon,
            self.delta,
            self.keys_only,
            self.confidence,
            count_delta_share,
        )


def _vote_candidates(built: _Built, counts: bool) -> dict[int, Any]:
    """Vote selection keyed by its count cap ``k_c`` (:data:`VOTE_COUNT_CAPS`; 0 keys only),
    all with one selection budget (the votes are cast once, with one pair of caps, before the
    decision): each takes the count noise of smaller expected absolute error, and the delta
    goes to the selection whole when none of them is Gaussian, else half of it."""
    if not counts:
        return {0: built.get("vote-selection", None)}
    own = {k: built.get("vote-selection", None, k) for k in VOTE_COUNT_CAPS}
    splits = {(m.epsilon_selection, m.delta_selection) for m in own.values()}
    if len(splits) == 1:
        return own
    from privhist.mechanisms.user_level.votes import COUNT_DELTA_SHARE

    return {k: built.get("vote-selection", None, k, COUNT_DELTA_SHARE) for k in VOTE_COUNT_CAPS}


@functools.lru_cache(maxsize=512)
def _build(
    name: str,
    cap: int | None,
    count_cap: int | None,
    epsilon: float,
    delta: float,
    keys_only: bool,
    confidence: float,
    count_delta_share: Fraction | None = None,
) -> Any:
    """See :class:`_Built` (mechanisms are not changed after construction, so sharing is safe)."""
    from privhist.core.neighbouring import Neighbouring
    from privhist.mechanisms.registry import get, weighted_registry
    from privhist.mechanisms.user_level.votes import VoteSelection

    counts = not keys_only
    kw: dict[str, Any] = {"counts": counts, "confidence": confidence}
    if counts and count_cap is not None:
        kw["count_max_keys"] = count_cap
    try:
        if name == "vote-selection":
            if counts and count_delta_share is not None:
                kw["count_delta_share"] = count_delta_share
            return VoteSelection(epsilon, delta, **kw)
        if name in weighted_registry():
            if cap is not None:
                kw["max_keys"] = cap
            return weighted_registry()[name](epsilon, delta, **kw)
        cls = get(name)
        opts: dict[str, Any] = {}
        if keys_only:
            if not any(o.name == "keys_only" for o in cls.options):
                return None
            opts["keys_only"] = True
        return cls(epsilon, delta, Neighbouring.user(cap or 1, 1), confidence=confidence, **opts)
    except ValidationError:
        return None


def rank_user_level(
    epsilon: float,
    delta: float,
    *,
    keys_only: bool,
    degree: int,
    max_keys: int | None = None,
    confidence: float = 0.95,
    built: _Built | None = None,
) -> list[dict[str, Any]]:
    """Every applicable user-level mechanism at ``(epsilon, delta)``, ranked by
    :func:`users_at_half` for holders of ``degree`` keys (ties: the count noise, then the
    name): vote selection (no cap), the weighted selectors with ``Delta0 = max_keys`` and the
    per-key mechanisms with ``k = max_keys`` (``degree`` when ``max_keys`` is None: each at the
    cap that keeps all of such a holder's keys). Rows: name, cap, users at 1/2, count noise
    standard deviation, and the mechanism (``"mechanism"``, not JSON)."""
    b = built or _Built(epsilon, delta, keys_only, confidence)
    cap = degree if max_keys is None else max_keys
    rows: list[dict[str, Any]] = []
    for name, c in [("vote-selection", None)] + [(n, cap) for n in _SELECTORS + _PER_KEY]:
        mech = b.get(name, c)
        if mech is None:
            continue
        std = math.nan
        if getattr(mech, "count_noise", None) is not None:  # vote selection
            std = mech.count_noise.std()
        elif getattr(mech, "count_sigma2", None) is not None:
            std = math.sqrt(float(mech.count_sigma2))
        elif not isinstance(mech, WeightedSelector) and hasattr(mech, "noise_std"):
            std = mech.noise_std()
        rows.append(
            {
                "mechanism_name": name,
                "cap": c,
                "users_at_half": users_at_half(mech, degree),
                "count_noise_std": None if math.isnan(std) else std,
                "mechanism": mech,
            }
        )
    rows.sort(
        key=lambda r: (
            r["users_at_half"],
            math.inf if r["count_noise_std"] is None else r["count_noise_std"],
            r["mechanism_name"],
        )
    )
    return rows


def _public_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "mechanism"} for r in rows]


def choose(
    epsilon: float,
    delta: float,
    *,
    keys_only: bool = False,
    max_partitions: int | str | None = None,
    mechanism: str = "default",
    confidence: float = 0.95,
    votes: bool = True,
) -> UserLevelPlan:
    """Plan a user-level release from its budget and public bounds only (no data).

    Args:
        epsilon, delta: the whole release's guarantee.
        keys_only: release keys only (else keys and noisy counts).
        max_partitions: ``None`` (no cap given), an integer cap (``Delta0`` of the weighted
            selectors, ``k`` of the per-key mechanisms) or ``"auto"`` (a cap chosen
            privately inside the spend).
        mechanism: ``"default"`` or a name (``vote-selection``, a weighted selector, or a
            per-key mechanism).
        confidence: of count intervals.
        votes: whether the engine can cast vote selection's votes
            (:class:`~privhist.core.requests.UserVotes`); without, vote selection is left out of
            the choice and the default plan is cumulative-sips at the DP quantile cap.

    Returns:
        A :class:`UserLevelPlan`. A named mechanism with an integer cap or none gives a fixed
        plan of it. ``"default"`` with an integer cap gives the best of
        :func:`rank_user_level` for holders of ``max_partitions`` keys (the most a user holds,
        as the caller stated). ``"default"`` with no cap or ``"auto"`` gives the default plan
        (a DP degree histogram, then :meth:`UserLevelPlan.decide` between vote selection and
        cumulative-sips). A weighted selector with ``"auto"`` gives that selector at the
        histogram's 0.975-quantile cap.

    Example:
        >>> plan = choose(1.0, 1e-8, keys_only=True)
        >>> plan.needs_degree_histogram, sorted(plan.candidates)
        (True, ['cumulative-sips', 'vote-selection'])
        >>> choose(1.0, 1e-8, keys_only=True, max_partitions=50).fixed.name
        'cumulative-sips'
    """
    from privhist.core.validation import check_delta, check_epsilon
    from privhist.mechanisms.registry import weighted_registry

    fn = "choose"
    counts = not keys_only
    eps = check_epsilon(epsilon, fn)
    dlt = check_delta(delta, fn, positive=True)
    if isinstance(max_partitions, str) and max_partitions != "auto":
        raise ValidationError("max_partitions", fn, "an integer, 'auto' or None", max_partitions)
    cap = (
        None
        if max_partitions is None or max_partitions == "auto"
        else check_positive_int(max_partitions, fn, "max_partitions")
    )
    if cap is not None and cap > MAX_RANKED_CAP:
        raise ValidationError(
            "max_partitions", fn, f"at most {MAX_RANKED_CAP} (the largest ranked cap)", cap
        )
    auto_selector = max_partitions == "auto" and mechanism in weighted_registry()
    if mechanism != "default" and not auto_selector:
        built = _Built(eps, dlt, keys_only, confidence, count_caps=cap is not None)
        mech = built.get(mechanism, cap)
        if mech is None:  # not buildable: let the constructor say why
            from privhist.mechanisms.registry import get

            if mechanism not in weighted_registry() and mechanism != "vote-selection":
                get(mechanism)
            raise ValidationError("mechanism", fn, "buildable at this budget", mechanism)
        rows = rank_user_level(
            eps, dlt, keys_only=keys_only, degree=cap or 1, max_keys=cap, built=built
        )
        return UserLevelPlan(
            eps,
            dlt,
            keys_only=keys_only,
            candidates={mechanism: mech},
            histogram_epsilon=0.0,
            ranking=_public_rows(rows),
            rule=f"{mechanism}: named by the caller",
            confidence=confidence,
        )
    if cap is not None:
        built = _Built(eps, dlt, keys_only, confidence, count_caps=True)
        rows = rank_user_level(eps, dlt, keys_only=keys_only, degree=cap, max_keys=cap, built=built)
        chosen = _CHOSEN if votes else _SELECTORS
        best = next(r for r in rows if r["mechanism_name"] in chosen)
        return UserLevelPlan(
            eps,
            dlt,
            keys_only=keys_only,
            candidates={best["mechanism_name"]: best["mechanism"]},
            histogram_epsilon=0.0,
            ranking=_public_rows(rows),
            rule=(
                f"{best['mechanism_name']}: among the key selectors ({', '.join(chosen)}), the "
                "fewest users needed for a key to be released with probability 1/2 when each "
                f"holds max_partitions = {cap} keys; the per-key mechanisms are ranked for "
                "information (the yardstick leaves out that selectors move weight away from "
                "released keys, which on every benchmark data set releases more keys with "
                "smaller count errors than a per-key mechanism at the same cap)"
            ),
            confidence=confidence,
        )
    eps_q = eps * HISTOGRAM_FRACTION
    eps_r = eps - eps_q
    while Fraction(eps_q) + Fraction(eps_r) > Fraction(eps):  # exactly at most epsilon
        eps_r = math.nextafter(eps_r, 0.0)
    built = _Built(eps_r, dlt, keys_only, confidence)
    name = "cumulative-sips" if mechanism == "default" else mechanism
    candidates: dict[str, Any] = {name: SelectorFamily(built, name, DEFAULT_PLAN_CAPS)}
    if mechanism == "default" and votes:
        # keyed by the count cap k_c (0 when keys only): min(the 0.9-quantile cap, 20) (decide)
        candidates["vote-selection"] = _vote_candidates(built, counts)
        rule = (
            "two DP statistics: a histogram of users' numbers of keys and the number of users "
            f"who find every key they hold at the vote cap; vote-selection when those are at "
            f"least {NON_VOTER_SHARE:g} of the users, else cumulative-sips at the histogram's "
            "0.975-quantile cap (UserLevelPlan.decide)"
        )
    else:
        rule = f"{name} at the 0.975-quantile cap of a DP histogram of users' numbers of keys"
        if not votes:
            rule += " (the engine cannot cast vote selection's votes)"

    def explained() -> list[dict[str, Any]]:
        rows = []
        for d in EXPLAIN_DEGREES:
            ranked = rank_user_level(eps_r, dlt, keys_only=keys_only, degree=d, built=built)
            rows.append(
                {
                    "degree": d,
                    "ranking": [
                        {
                            "mechanism": r["mechanism_name"],
                            "cap": r["cap"],
                            "users_at_half": r["users_at_half"],
                        }
                        for r in ranked
                    ],
                }
            )
        return rows

    plan = UserLevelPlan(
        eps,
        dlt,
        keys_only=keys_only,
        candidates=candidates,
        histogram_epsilon=eps_q,
        ranking=explained,
        rule=rule,
        confidence=confidence,
    )
    return plan
