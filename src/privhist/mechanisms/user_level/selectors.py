"""Weighted Gaussian key selection (WGM) and its iterated form DP-SIPS, integer-exact.

Both select keys from user-level data in which each user holds a *set* of keys, releasing as many
keys as possible under (epsilon, delta)-DP for adding or removing one user; optionally a second
step releases noisy user counts of the selected keys.

Interface. A selector is constructed from privacy parameters and public bounds only, and releases
with ``release_weighted(source, rng)`` from any :class:`privhist.core.weighted.WeightedSource`
(the local engine's :class:`privhist.engines.local.weighting.LocalWeightedSource`; a distributed
engine implements the same two methods). Round ``r`` asks the source for
``weighted_sums(max_keys, scale, exclude=released_so_far)``: every user keeps a uniformly random
subset ``S`` of at most ``Delta0 = max_keys`` of its keys not yet released and gives each the
integer weight ``w_|S| = floor(scale / sqrt(|S|))`` (L2 norm at most ``scale`` units). The
selector adds discrete Gaussian noise ``N_Z(0, sigma2_r)`` (CKS 2020, Algorithm 3; exact) to each
key's weight sum and releases the keys whose noisy sum reaches the integer threshold ``T_r``.

* **WGM** (``wgm``): one round. Gopi, Gulhane, Kulkarni, Shen, Shokouhi & Yekhanin (2020),
  "Differentially Private Set Union", ICML, the weighted Gaussian algorithm and its Theorem 5.1:
  threshold ``rho = max_{t <= Delta0} 1/sqrt(t) + sigma Phi^{-1}((1 - delta_T)^{1/t})``. Here the
  threshold is the integer version of the same rule: the smallest integer ``T`` with
  ``max_t 1 - (1 - Pr[Z >= T - w_t])**t <= delta_T`` for the *discrete* noise and the *rounded*
  weights, with a rigorous upper bound on the discrete tail (outward rounding).
* **DP-SIPS** (``dp-sips``): Swanberg, Desfontaines & Haney (2023), "DP-SIPS: A simpler, more
  scalable mechanism for differentially private partition selection" (arXiv:2301.01998), the
  iterated algorithm of its title: ``R`` rounds of the weighted Gaussian selection, removing the
  keys released so far from every user before the next round so that lighter keys receive the
  weight; the budget grows from round to round. Budget split used here (stated, tested): round ``r``
  of ``R`` receives the zCDP fraction ``f_r = q**(r - 1) / sum_j q**(j - 1)`` with ratio ``q = 6``
  (``R = 3``: 1/43, 6/43, 36/43), and every round the same share ``delta_T / R`` of the threshold
  delta. The ratio was chosen by measurement at (1, 1e-8), ``Delta0 = 50``, mean of 3 runs (retail /
  msweb keys): ``R = 3``: q = 2: 1,564 / 134, q = 4: 1,708 / 140, q = 6: 1,731 / 142, q = 10: 1,718
  / 144; ``R = 2``, q = 6: 1,735 / 140; one round (WGM): 1,420 / 118.

Guarantee (add or remove one user), from :mod:`privhist.mechanisms.user_level._gauss`: round ``r``
changes the weight sums of keys other users also hold by a vector of L2 norm at most ``scale``, so
it is ``rho_r = scale**2 / (2 sigma2_r)``-zCDP given the earlier rounds (CKS Theorem 14; a mixture
over the user's own subset choice stays ``rho_r``-zCDP); rounds compose adaptively to
``rho = sum_r rho_r`` (Bun & Steinke 2016, Lemma 2.3), and the optional count release adds
``rho_c = k_c / (2 sigma2_c)`` (each user counts on at most ``k_c`` selected keys, L2 sensitivity
``sqrt(k_c)``). Keys only the added user holds are released in some round with probability
``Pr[F] <= sum_r max_t 1 - (1 - Pr[Z_r >= T_r - w_t])**t``. The whole release is
``(epsilon, delta_z(rho + rho_c) + Pr[F])``-DP, ``delta_z`` taken at ``epsilon + ln(1 - Pr[F])``;
:meth:`WeightedSelector.certified_delta` recomputes this bound from the rounded parameters (never
above the stated ``delta``).

Calibration: ``(1 - threshold_share) delta`` for the zCDP part (``rho`` the largest with
``delta_z(rho) <= (1 - threshold_share) delta``), ``threshold_share delta`` for ``Pr[F]``. With
counts, ``count_share`` of ``rho`` goes to the counts and the rest to selection. Counts are the
bounded user counts plus independent symmetric noise on a public key set, clipped to at least 1
(a released key has a holder; post-processing), with intervals from the exact discrete Gaussian
quantiles that cover the counted users (:mod:`._counts` states what they cover).

Defaults measured against alternatives (DP-SIPS, keys only, (1, 1e-8), ``Delta0 = 20``, mean of
5 runs, retail / msweb keys; default 1,760 / 143.6): ``threshold_share`` 0.05: 1,663 / 142.4,
0.1: 1,700 / 143.8, 0.2: 1,722 / 141.8, 0.8: 1,705 / 141.6; ``R = 4``, q = 4: 1,700 / 140.4,
q = 6: 1,724 / 143.6; ``R = 5``, q = 3: 1,640 / 136.8; ``R = 2``, q = 4: 1,725 / 142.8; the
threshold delta split 1 : 3 : 9 over the rounds instead of equal: 1,780 / 143.2 (within the
run-to-run spread, not adopted); a different cap per round (5, 10, 20): 1,717 / 142.2,
(10, 20, 50): 1,723 / 143.6, (50, 20, 10): 1,655 / 144.0.

Not offered here: the policy Gaussian of Gopi et al. (2020), in which users in turn move the
weights of their keys toward a cap ``Gamma`` by an L2 step of at most one. Its sensitivity proof
needs every user's update to be 1-Lipschitz in L2 (in gap space the update is the residual of the
projection onto the unit ball intersected with the positive orthant, which is firmly
nonexpansive). Rounding each step down to integer units, even keeping the step norm at most one
unit and never overshooting ``Gamma``, breaks this: with scale 2 and gaps ``(2, 2, 2)`` and
``(2, 2, 3)`` (distance 1) the rounded updates give ``(1, 1, 1)`` and ``(2, 2, 2)`` (distance
``sqrt 3``), and at scale 1024 a one-unit change of the input grows up to 2.45-fold after one
user, so the bound does not survive the users that follow. An exact version needs an integer
update that is itself 1-Lipschitz in L2; none is known here."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, ClassVar

import mpmath
import numpy as np
import numpy.typing as npt

from privhist.accounting.accountant import guarantee_of
from privhist.accounting.events import ZcdpThresholdEvent
from privhist.core.budget import Budget
from privhist.core.constraints import naming_the_class
from privhist.core.errors import ValidationError
from privhist.core.neighbouring import Neighbouring
from privhist.core.random import RandomSource, SecureRandom
from privhist.core.requests import Fields, Request, UserKeys
from privhist.core.validation import Constraint, delta_constraint, float_up
from privhist.core.version import LIBRARY
from privhist.core.weighted import WeightedSource
from privhist.io.release import Release
from privhist.mechanisms.registry import register_weighted
from privhist.mechanisms.user_level._counts import clipped_count_columns, count_statement
from privhist.mechanisms.user_level._gauss import (
    calibrate,
    calibrate_threshold,
    certified_delta,
    release_bound,
    sigma2_for,
    unit_weights,
)
from privhist.noise import DiscreteGaussian, discrete_gaussian

#: the documented data-independent default cap ``Delta0`` (keys a user keeps); the measurements
#: behind it (``benchmarks/bench_user_level.py``) are quoted in :mod:`.caps`
DEFAULT_MAX_KEYS = 20
#: default cap ``k_c`` of the count release (keys a user is counted on among the selected keys)
DEFAULT_COUNT_MAX_KEYS = 20
#: weights are in units of ``1 / scale``; ``floor(scale / sqrt(t))`` loses < 1% for t <= 100
DEFAULT_SCALE = 1024
DEFAULT_THRESHOLD_SHARE = 0.5
DEFAULT_COUNT_SHARE = 0.3
#: DP-SIPS: rounds and the geometric ratio of their zCDP fractions
DEFAULT_ROUNDS = 3
DEFAULT_RATIO = 6.0


class WeightedSelector:
    """Base of the weighted Gaussian selectors (see the module docstring)."""

    name: ClassVar[str]
    summary: ClassVar[str] = ""
    requires_delta: ClassVar[bool] = True
    default_rounds: ClassVar[int] = 1
    #: the geometric ratio of the rounds' zCDP fractions when ``ratio`` is not given
    default_ratio: ClassVar[float] = DEFAULT_RATIO
    #: the share of the zCDP budget the counts take when ``count_share`` is not given
    default_count_share: ClassVar[float] = DEFAULT_COUNT_SHARE

    @classmethod
    def constraints(cls) -> dict[str, Constraint]:
        """What each scalar parameter accepts (checked by the constructor; the contract tests
        generate invalid values from it). ``spent_rho`` must also stay below the zCDP budget."""
        share = Constraint.real(0, 1, open_low=True, open_high=True)
        return {
            "epsilon": Constraint.real(0, open_low=True),
            "delta": delta_constraint(positive=True),
            "max_keys": Constraint.integer(1),
            "scale": Constraint.integer(1, 2**24),
            "rounds": Constraint.integer(1, optional=True),
            "ratio": Constraint.real(0, open_low=True, optional=True),
            "threshold_share": share,
            "counts": Constraint.flag(),
            "count_share": Constraint.real(0, 1, open_low=True, open_high=True, optional=True),
            "count_max_keys": Constraint.integer(1),
            "spent_rho": Constraint.rational(0),
            "confidence": share,
        }

    @naming_the_class
    def __init__(
        self,
        epsilon: float,
        delta: float,
        *,
        max_keys: int = DEFAULT_MAX_KEYS,
        scale: int = DEFAULT_SCALE,
        rounds: int | None = None,
        ratio: float | None = None,
        threshold_share: float = DEFAULT_THRESHOLD_SHARE,
        counts: bool = False,
        count_share: float | None = None,
        count_max_keys: int = DEFAULT_COUNT_MAX_KEYS,
        spent_rho: Fraction | float = 0,
        confidence: float = 0.95,
    ) -> None:
        fn = type(self).__name__
        declared = self.constraints()

        def check(name: str, value: Any) -> Any:
            return declared[name].check(value, name, fn)

        self.epsilon: float = check("epsilon", epsilon)
        self.delta: float = check("delta", delta)
        self.max_keys: int = check("max_keys", max_keys)
        self.scale: int = check("scale", scale)
        self.rounds: int = check("rounds", rounds) or self.default_rounds
        self.ratio: float = check("ratio", self.default_ratio if ratio is None else ratio)
        self.threshold_share: float = check("threshold_share", threshold_share)
        self.counts: bool = check("counts", counts)
        self.count_share: float = check(
            "count_share", self.default_count_share if count_share is None else count_share
        )
        self.count_max_keys: int = check("count_max_keys", count_max_keys)
        spent: Fraction = check("spent_rho", spent_rho)
        self.confidence: float = check("confidence", confidence)
        # -- calibration ----------------------------------------------------------------------
        rho, p_f = calibrate(self.epsilon, self.delta, self.threshold_share)
        if spent >= rho:  # relational: below the zCDP budget of (epsilon, delta)
            raise ValidationError(
                "spent_rho", fn, f"in [0, {float(rho)}) (the zCDP budget)", spent_rho
            )
        #: zCDP spent on this data before the release (a DP cap, :mod:`.caps`), composed exactly
        self.spent_rho = spent
        rho -= spent
        self.rho = rho
        rho_sel = rho * (1 - Fraction(self.count_share)) if counts else rho
        raw = [Fraction(self.ratio) ** r for r in range(self.rounds)]
        self.fractions = [f / sum(raw) for f in raw]
        self.weights = unit_weights(self.scale, self.max_keys)
        #: the threshold failure target of the whole release (``threshold_share delta``)
        self.failure_target = p_f
        self.sigma2s: list[Fraction] = []
        for f in self.fractions:
            s2 = sigma2_for(rho_sel * f, self.scale * self.scale)
            if s2.numerator >= 2**61 or s2 > 2**60:
                raise ValidationError("epsilon", fn, "large enough for a sampleable noise", epsilon)
            self.sigma2s.append(s2)
        self.count_sigma2: Fraction | None = None
        if counts:
            self.count_sigma2 = sigma2_for(rho * Fraction(self.count_share), self.count_max_keys)
        self.thresholds: list[int] = []
        self._finish_calibration()

    def _finish_calibration(self) -> None:
        """The thresholds, once the noise is set: here each round's own rule with an equal share
        of the failure target; a subclass may recalibrate the noise and use its own rule."""
        target = self.failure_target / self.rounds
        self.thresholds = [calibrate_threshold(s2, self.weights, target) for s2 in self.sigma2s]

    # -- guarantee --------------------------------------------------------------------------

    def event(self) -> ZcdpThresholdEvent:
        """The release as a privacy event: :meth:`zcdp_rho` (rounds, counts and ``spent_rho``)
        with the threshold failure :meth:`private_key_bound`, both rounded up, and the calibrated
        point ``(epsilon, delta)`` (:mod:`privhist.accounting.zcdp`)."""
        return ZcdpThresholdEvent(
            float_up(self.zcdp_rho()),
            float_up(Fraction(self.private_key_bound())),
            epsilon=self.epsilon,
            delta=self.delta,
        )

    def bound_event(self) -> ZcdpThresholdEvent:
        """An event that bounds every selector of this ``(epsilon, delta, threshold_share)``,
        whatever its ``max_keys`` and ``spent_rho``: the calibrated zCDP budget and threshold
        failure target (:func:`~privhist.mechanisms.user_level._gauss.calibrate`), which the
        rounded noise and thresholds never exceed. What the ledger records for a release whose
        cap is chosen privately inside the spend (:func:`.caps.auto_selector`). Such a cap
        makes ``spent_rho > 0``; a cumulative-sips instance without one is calibrated by the
        Gaussian profile, whose zCDP parameter is larger, and is not what this bounds."""
        rho, p_f = calibrate(self.epsilon, self.delta, self.threshold_share)
        return ZcdpThresholdEvent(
            float_up(rho), float_up(Fraction(p_f)), epsilon=self.epsilon, delta=self.delta
        )

    def guarantee(self) -> Budget:
        """The accountant's guarantee of :meth:`event` at ``delta`` by basic composition of its
        calibrated point, which the accountant's ``zcdp_threshold`` rule confirms
        (:func:`privhist.accounting.accountant.threshold_delta` of the event at ``epsilon`` is
        :meth:`certified_delta`, at most ``delta``; the tests check it)."""
        return guarantee_of(self.event(), self.delta, rules=("basic",))

    def zcdp_rho(self) -> Fraction:
        """The zCDP parameter of the noise, from the rounded ``sigma2`` values."""
        rho = sum((Fraction(self.scale**2) / (2 * s2) for s2 in self.sigma2s), self.spent_rho)
        if self.count_sigma2 is not None:
            rho += Fraction(self.count_max_keys) / (2 * self.count_sigma2)
        return rho

    def private_key_bound(self) -> float:
        """``Pr[F]``: an upper bound on the chance that a key only the added user holds is
        released in some round."""
        return sum(
            release_bound(s2, t, self.weights)
            for s2, t in zip(self.sigma2s, self.thresholds, strict=True)
        )

    def certified_delta(self) -> float:
        """``delta_z(epsilon + ln(1 - Pr[F])) + Pr[F]``: a proven upper bound on the delta
        achieved (:mod:`privhist.mechanisms.user_level._gauss`, item 3)."""
        return certified_delta(self.zcdp_rho(), self.epsilon, self.private_key_bound())

    def parameters(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "max_keys": self.max_keys,
            "scale": self.scale,
            "rounds": self.rounds,
            "round_fractions": [float(f) for f in self.fractions],
            "thresholds": self.thresholds,
            "thresholds_in_users": [t / self.scale for t in self.thresholds],
            "sigma2": [str(s) for s in self.sigma2s],
            "noise_std_in_users": [math.sqrt(float(s)) / self.scale for s in self.sigma2s],
            "rho": float(self.zcdp_rho()),
            "spent_rho": float(self.spent_rho),
            "threshold_share": self.threshold_share,
            "certified_delta": self.certified_delta(),
            "noise": "discrete_gaussian",
        }
        if self.count_sigma2 is not None:
            out.update(
                {
                    "count_share": self.count_share,
                    "count_max_keys": self.count_max_keys,
                    "count_sigma2": str(self.count_sigma2),
                    "count_noise_std": math.sqrt(float(self.count_sigma2)),
                }
            )
        return out

    # -- analysis ---------------------------------------------------------------------------

    def release_probability(self, round_index: int, weight: int) -> float:
        """Pr[a key with integer weight sum ``weight`` is released in round ``round_index``]."""
        if not hasattr(self, "_dists"):
            self._dists = [DiscreteGaussian(s2) for s2 in self.sigma2s]
        dist = self._dists[round_index]
        return float(dist.sf_mp(self.thresholds[round_index] - int(weight)))

    def release_probabilities(
        self, round_index: int, weights: npt.ArrayLike
    ) -> npt.NDArray[np.float64]:
        """Vectorised :meth:`release_probability` in floats (for planning): the tail of a float
        pmf table on ``|z| <= 40 sigma``."""
        if not hasattr(self, "_sf_tables"):
            self._sf_tables: dict[int, tuple[int, npt.NDArray[np.float64]]] = {}
        if round_index not in self._sf_tables:
            s2 = self.sigma2s[round_index]
            radius = math.ceil(40 * math.sqrt(float(s2))) + 2
            z = np.arange(-radius, radius + 1, dtype=np.int64)
            pmf = np.asarray(DiscreteGaussian(s2).pmf(z), dtype=np.float64)
            self._sf_tables[round_index] = (radius, np.cumsum(pmf[::-1])[::-1])
        radius, sf = self._sf_tables[round_index]
        m = self.thresholds[round_index] - np.asarray(weights, dtype=np.int64)
        idx = np.clip(m + radius, 0, 2 * radius)
        return np.where(m > radius, 0.0, np.where(m < -radius, 1.0, np.minimum(sf[idx], 1.0)))

    def ever_released(self, weights: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """For planning: Pr[a key whose weight sum is ``weights`` in every round is released in
        some round] (rounds are independent given the weights)."""
        w = np.asarray(weights, dtype=np.int64)
        miss = np.ones(w.shape, dtype=np.float64)
        for r in range(self.rounds):
            miss *= 1 - self.release_probabilities(r, w)
        out: npt.NDArray[np.float64] = 1 - miss
        return out

    def release_probability_mp(self, round_index: int, weight: int) -> Any:
        """The same in 160-bit arithmetic, from the pmf normalised on ``|z| <= 14 sigma + 2``
        (the mass outside is below ``1e-40``; the exact tests allow ``1e-30``)."""
        from privhist.mechanisms.user_level.gaussian_threshold import dg_table

        table, _ = _cached_table(self.sigma2s[round_index], dg_table)
        m = self.thresholds[round_index] - int(weight)
        with mpmath.workprec(160):
            return mpmath.fsum(p for z, p in table.items() if z >= m)

    # -- releasing --------------------------------------------------------------------------

    @property
    def neighbouring(self) -> Neighbouring:
        """User-level neighbours: each user keeps at most ``max_keys`` keys (one unit of L2
        weight over them; the count release, if any, counts at most ``count_max_keys``)."""
        return Neighbouring.user(self.max_keys, 1)

    def requests(self, fields: Fields) -> tuple[Request, ...]:
        """Each user's keys, held where the data lives, asked again round by round
        (:mod:`privhist.mechanisms.releasable`)."""
        return (UserKeys(fields),)

    def draw(self, answers: Any, rng: RandomSource) -> Release:
        """The release from the engine's :class:`~privhist.core.requests.UserKeys` answer
        (:meth:`release_weighted`)."""
        return self.release_weighted(answers.of(UserKeys), rng)

    def release_weighted(self, source: WeightedSource, rng: RandomSource | None = None) -> Release:
        """Select keys from ``source`` (and count them when ``counts``). ``rng`` draws the noise
        (``SecureRandom()`` when None); the source draws its users' keep priorities."""
        fn = type(self).__name__
        if not isinstance(source, WeightedSource):
            raise ValidationError("source", fn, "a WeightedSource", type(source).__name__)
        if rng is None:
            rng = SecureRandom()
        if not isinstance(rng, RandomSource):
            raise ValidationError("rng", fn, "a RandomSource", type(rng).__name__)
        released, per_round, info = self._select(source, rng)
        keys = np.concatenate(released) if released else np.zeros(0, dtype=np.int64)
        keys = np.sort(keys, kind="stable")
        columns: dict[str, Any] = {}
        if self.count_sigma2 is not None:
            counted = source.unit_counts(keys, self.count_max_keys)
            assert counted.keys.shape == keys.shape
            noisy = counted.counts + discrete_gaussian(self.count_sigma2, rng, len(counted))
            columns = clipped_count_columns(noisy, self.count_sigma2, self.confidence)
            info["records_counted"] = int(counted.counts.sum())
        meta = self.metadata(rng)
        if self.count_sigma2 is not None:
            meta["counts"] = count_statement(self.count_max_keys, self.confidence)
        meta["released_keys"] = int(keys.shape[0])
        meta["released_per_round"] = per_round
        return Release(keys=keys, metadata=meta, diagnostics=info, **columns)

    def _select(
        self, source: WeightedSource, rng: RandomSource
    ) -> tuple[list[npt.NDArray[Any]], list[int], dict[str, Any]]:
        """The rounds: the keys released in each, their numbers, and the source's facts."""
        released: list[npt.NDArray[Any]] = []
        per_round: list[int] = []
        info: dict[str, Any] = {}
        for r in range(self.rounds):
            exclude = np.concatenate(released) if released else None
            agg = source.weighted_sums(self.max_keys, self.scale, exclude)
            if r == 0:
                info = dict(agg.info)
            noisy = agg.weights + discrete_gaussian(self.sigma2s[r], rng, len(agg))
            new = agg.keys[noisy >= self.thresholds[r]]
            released.append(new)
            per_round.append(int(new.shape[0]))
        return released, per_round, info

    def metadata(self, rng: RandomSource | None = None) -> dict[str, Any]:
        nb = (
            f"user-level (each user keeps at most {self.max_keys} keys, L2 weight <= 1"
            + (f"; counts on at most {self.count_max_keys} selected keys" if self.counts else "")
            + ")"
        )
        meta: dict[str, Any] = {
            "mechanism": self.name,
            "parameters": self.parameters(),
            "guarantee": {
                "epsilon": self.epsilon,
                "delta": self.delta,
                "neighbouring": nb,
                "statement": f"{self.guarantee()} under {nb} neighbours",
            },
            "confidence": self.confidence,
            "library": LIBRARY,
        }
        if rng is not None:
            meta["randomness"] = rng.to_dict()
            if not rng.private:
                meta["warning"] = "drawn from a seeded source: reproducible and NOT private"
        return meta

    @classmethod
    def test_instances(cls) -> list[WeightedSelector]:
        """Small instances for the contract tests: a tiny weight scale keeps exact enumeration
        cheap (the guarantee holds for every scale)."""
        return [
            cls(1.0, 1e-3, max_keys=2, scale=4),
            cls(1.0, 1e-2, max_keys=3, scale=3),
        ]


_TABLES: dict[Fraction, tuple[dict[int, Any], Any]] = {}


def _cached_table(s2: Fraction, build: Any) -> tuple[dict[int, Any], Any]:
    if s2 not in _TABLES:
        _TABLES[s2] = build(s2)
    return _TABLES[s2]


@register_weighted
class WeightedGaussianSelection(WeightedSelector):
    """WGM: one round of weighted Gaussian selection (Gopi et al. 2020, Thm 5.1).

    >>> import polars as pl
    >>> from privhist import SeededRandom
    >>> from privhist.engines.local.weighting import LocalWeightedSource
    >>> users = pl.DataFrame({"user": list(range(200)) + [7], "key": ["a"] * 200 + ["b"]})
    >>> m = WeightedGaussianSelection(1.0, 1e-6)
    >>> m.certified_delta() <= 1e-6
    True
    >>> m.release_weighted(LocalWeightedSource(users, SeededRandom(0)), SeededRandom(1)).keys
    array(['a'], dtype=object)
    """

    name = "wgm"
    summary = "weighted Gaussian key selection, each user spreading an L2 unit over its keys"
    default_rounds = 1


@register_weighted
class DPSIPS(WeightedSelector):
    """DP-SIPS: rounds of weighted Gaussian selection, released keys removed between rounds
    (Swanberg, Desfontaines & Haney 2023, arXiv:2301.01998; budget split in the module
    docstring).

    Three hundred users hold two keys each: all hold ``"a"``, half ``"b"`` and half ``"c"``. Keys
    only (the default) releases the key set; ``counts=True`` gives 30 % of the budget to noisy user
    counts of the selected keys, with 95 % intervals:

    >>> import polars as pl
    >>> from privhist import SeededRandom
    >>> from privhist.engines.local.weighting import LocalWeightedSource
    >>> users = pl.DataFrame({
    ...     "user": [u for u in range(300) for _ in range(2)],
    ...     "key": [k for u in range(300) for k in ("a", "b" if u < 150 else "c")],
    ... })
    >>> m = DPSIPS(1.0, 1e-6)
    >>> m.rounds, m.max_keys, m.certified_delta() <= 1e-6
    (3, 20, True)
    >>> m.release_weighted(LocalWeightedSource(users, SeededRandom(0)), SeededRandom(1)).keys
    array(['a', 'b', 'c'], dtype=object)
    >>> with_counts = DPSIPS(1.0, 1e-6, counts=True)
    >>> release = with_counts.release_weighted(
    ...     LocalWeightedSource(users, SeededRandom(0)), SeededRandom(1))
    >>> release.to_polars().select("key", "count", "lower", "upper").rows()
    [('a', 260, 185, 335), ('b', 155, 80, 230), ('c', 193, 118, 268)]
    """

    name = "dp-sips"
    summary = "iterated weighted Gaussian selection, released keys removed between rounds"
    default_rounds = DEFAULT_ROUNDS

    @classmethod
    def test_instances(cls) -> list[WeightedSelector]:
        return [
            cls(1.0, 1e-3, max_keys=2, scale=4, rounds=2),
            cls(1.0, 1e-2, max_keys=3, scale=3, rounds=3),
        ]
