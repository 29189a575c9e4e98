"""Cumulative-evidence DP-SIPS: rounds of weighted Gaussian selection in which a key's noisy
weights from *all* rounds so far decide its release, not the current round's alone.

DP-SIPS (Swanberg, Desfontaines & Haney 2023; :class:`~.selectors.DPSIPS`) splits its budget
over rounds and judges each round on that round's noise alone, so a light key that is not
released in the last round has thrown away the evidence of the earlier ones. Here round ``r``
adds discrete Gaussian noise ``Z_r ~ N_Z(0, sigma2_r)`` (CKS 2020, exact) to each candidate key's
integer weight sum ``W_r`` as DP-SIPS does, and keeps a running statistic

    S_r = sum_(j <= r) c_j (W_j + Z_j),        c_j a positive integer proportional to 1 / sigma2_j,

the inverse-variance combination, so that in the last round a key is judged with the noise of
the whole budget. A key is released in the first round with ``S_r >= T_r``. Everything else is
DP-SIPS: released keys leave every user, so light keys get more weight in later rounds.

One change to the users' side makes the analysis work: each user *holds* one uniformly random
subset of at most ``Delta0`` of its keys for the whole release
(:meth:`privhist.core.weighted.WeightedSource.held_sums`), and in round ``r`` gives each of its
``t_r`` held, not yet released keys the weight ``w_t = floor(scale / sqrt(t_r))``. Released keys
are not replaced by other keys of the user (DP-SIPS draws a fresh subset every round). The
candidates of a round are the keys some user still holds.

Guarantee (adding or removing one user ``u``; the structure of
:mod:`privhist.mechanisms.user_level._gauss`, items 1-3):

1. **Keys someone else holds.** Such a key is a candidate in every round until it is released,
   with and without ``u`` (the other users' held subsets do not depend on ``u``), and ``u``
   changes the round's weight sums by a vector of L2 norm at most ``scale`` units. Treat every
   round's whole noisy vector on these keys as the output: round ``r`` is
   ``scale**2 / (2 sigma2_r)``-zCDP given the earlier rounds (CKS Theorem 14, multivariate; a
   mixture over ``u``'s own subset stays zCDP), the rounds compose to ``rho = sum_r rho_r`` (Bun &
   Steinke 2016, Lemma 2.3), and the statistics ``S_r`` and the released sets are
   post-processing. The optional counts add their ``rho_c`` as in :mod:`.selectors`.
2. **Keys only ``u`` holds ("private").** There are ``P <= Delta0`` of them, all in ``u``'s held
   subset. Let ``F`` be the event that one is released, and ``Q_A`` the run with ``u`` in which
   private keys are never released (their noise is still drawn). Before ``F`` every private key
   is still held, so in every round ``t_r >= P`` and a private key's weight is at most ``w_P``;
   its statistic is then at most ``C_r w_P + sum_(j <= r) c_j Z_j`` with ``C_r = sum_(j <= r)
   c_j``, whatever the other keys did. The coupling argument of ``_gauss`` item 3 applies
   unchanged (an event about the other keys does not depend on the private keys' noise, and
   given the history of the other keys ``F`` has probability at most ``p_F``), so the release is
   ``(epsilon, delta_z(epsilon + ln(1 - p_F)) + p_F)``-DP with
   ``p_F = sum_r max_(P <= Delta0) P Pr[sum_(j <= r) c_j Z_j >= T_r - C_r w_P]`` (a union bound
   over rounds and private keys).
3. **The tail of a sum of discrete Gaussians.** For ``Z ~ N_Z(0, s2)`` with ``s2 >= 1`` and
   ``G ~ N(0, s2)``, ``Z`` is stochastically below ``G + 2``: for integers ``m >= 1``,
   ``Pr[Z >= m] <= Phi_bar((m - 1) / s)`` (the sum of the decreasing ``f(x) = exp(-x**2 / 2s2)``
   over ``x >= m`` is at most ``int_(m-1)^inf f``, and the normaliser ``sum_x f(x)`` is at least
   ``sqrt(2 pi s2)`` by Poisson summation, every term positive); for ``m <= 0``, with
   ``k = 1 - m``, ``Pr[Z >= m] = 1 - Pr[Z >= k]`` and ``Pr[Z >= k] >= Phi_bar(k / s) / (1 +
   theta)`` (the sum is at least ``int_k^inf f``; the normaliser at most ``sqrt(2 pi s2) (1 +
   theta)``, ``theta = 2 sum_(j >= 1) exp(-2 pi**2 s2 j**2)``), and ``Phi_bar(k / s) / (1 +
   theta) >= Phi_bar((k + 1) / s)`` because ``Phi_bar(a) / Phi_bar(a + h)`` grows with ``a``
   (log-concavity), so it is at least ``1 / (2 Phi_bar(h)) >= 1 + 2 h phi(h) >= 1 + 0.48 / s``
   with ``h = 1/s <= 1``, while ``theta <= 2.01 exp(-2 pi**2 s2)`` (below ``6e-9`` at ``s2 = 1``
   and falling much faster than ``1 / s``), so the ratio exceeds ``1 + theta`` at every ``s >=
   1``. Sums of independent terms
   keep the order, so ``sum_j c_j Z_j`` is stochastically below ``N(2 C_r, V_r)`` with ``V_r =
   sum_j c_j**2 sigma2_j``, and ``Pr[sum_j c_j Z_j >= x] <= Phi_bar((x - 2 C_r) / sqrt(V_r))``,
   evaluated in 60-digit arithmetic and rounded up (:func:`sum_tail_upper`).

4. **The noise part without zCDP.** Item 1 converts zCDP to (epsilon, delta), which costs about
   5 % of noise. The lemma of item 3 gives the exact Gaussian profile instead, up to a tiny
   shift. In round ``r`` (given the history and every user's subset) the output on the keys
   others hold is ``N_Z(mu_i + d_i, sigma2)`` against ``N_Z(mu_i, sigma2)`` coordinatewise, with
   integer ``d`` (``u``'s weights), ``||d||_2 <= scale`` and ``||d||_1 <= l1 = max_t t w_t <=
   sqrt(Delta0) scale``. The privacy loss of the output is ``L = ||d||**2 / (2 sigma2) + sum_i
   (d_i / sigma2) Z_i`` (the discrete Gaussian's normaliser does not change under integer
   shifts), in both directions (``Z`` is symmetric); by the lemma, ``L`` is stochastically below
   ``a + eta + sqrt(2a) N(0, 1)`` with ``a = ||d||**2 / (2 sigma2)`` and ``eta = 2 l1 / sigma2``:
   the privacy loss of the continuous Gaussian mechanism plus ``eta``. Since ``(1 -
   exp(epsilon - x))_+`` increases in ``x``, and the Gaussian profile ``delta_G(e; mu) =
   Phi(-e / mu + mu / 2) - exp(e) Phi(-e / mu - mu / 2)`` increases in ``mu`` at every real ``e``
   (a Gaussian with a smaller shift is a post-processing of one with a larger shift), an
   induction from the last round back (each step conditions on the history; the remaining
   rounds' bound is an increasing function of the loss so far; sums of independent Gaussian
   losses are Gaussian losses with the ``mu**2`` added) bounds the hockey-stick divergence of
   the whole transcript, in both directions, by ``delta_G(epsilon - eta_tot; mu_tot)`` with
   ``mu_tot**2 = sum_r scale**2 / sigma2_r`` and ``eta_tot = sum_r 2 l1 / sigma2_r`` (the count
   release, with ``||d||_2**2, ||d||_1 <= k_c``, adds ``k_c / sigma2_c`` and ``2 k_c /
   sigma2_c``). Mixtures over the users' subsets keep the bound: the held subsets are drawn
   before the first round, and the count step's subset is a function of a random order of
   ``u``'s keys that can be drawn then too, so every round is analysed given them (hockey-stick
   divergences are jointly convex). The two directions are two inductions of the same form:
   each round's conditional loss has the same law both ways (the transcripts' laws need not).
   Item 2's coupling then gives ``(epsilon, delta_G(epsilon + ln(1 - p_F) -
   eta_tot; mu_tot) + p_F)``-DP (:meth:`CumulativeSIPS.certified_delta`, in 50-digit arithmetic,
   rounded up); the noise is calibrated to it. With a cap bought privately first
   (``spent_rho > 0``) the zCDP route of item 1 is used instead, so the two parts compose in
   zCDP. ``eta_tot`` is ``3e-4`` at the defaults at (1, 1e-8), ``2e-2`` with counts; where the
   count term would leave more noise than the zCDP route (counts at a large epsilon, e.g. (3,
   1e-5) with a count share of 0.3), or a variance would fall below 1, the zCDP route is used.

Counts. With ``counts``, ``count_share = 0.15`` of the budget (``mu**2``, or zCDP ``rho``) goes
to the count release, counted on ``count_max_keys = 20`` released keys per user (DP-SIPS and WGM
keep 0.3). Measured on ``retail.dat`` at (0.98, 1e-8), (0.98, 1e-5) and (2.94, e^-10) (one run
each; ``count_share`` 0.1 / 0.15 / 0.2 / 0.3): keys 2,060 / 1,968 / 1,903 / 1,729, 3,704 / 3,591 /
3,460 / 3,172, 8,008 / 7,823 / 7,715 / 7,387; count MAE 61.3 / 50.2 / 43.5 / 36.7, 44.9 / 38.6 /
34.5 / 29.0, 18.3 / 16.5 / 15.5 / 14.2. Shares 0.1 to 0.2 keep at least 0.9 of the best
published keys-only selector's keys (1,774, 3,257, 7,288) and at most half of PipelineDP's
Gaussian count MAE (67.6, 45.8, 24.5) at every budget, 0.3 does not; 0.15 is the middle of that
range. On the held-out retail households (1, 1e-8), 0.1 / 0.15 / 0.2 / 0.3 give 729 / 691 / 646
/ 569 keys (goal 598) at MAE 116 / 108 / 106 / 94 (goal 454). ``count_max_keys`` 10 instead of 20
raises retail's MAE to 65-73 (users holding more than 10 released keys are dropped).

``T_r`` is the smallest integer for which round ``r``'s term of ``p_F`` is at most its share
of ``threshold_share * delta`` (:func:`round_targets`: 80 % to the last round, the rest in equal
parts); the zCDP budget is calibrated as for DP-SIPS. Defaults (``R = 6`` rounds, zCDP fractions
in ratio 1.5, ``Delta0 = 20``, last-round share 0.8) were chosen by measurement at (1, 1e-8) on
retail and msweb, the same values for both, with the noise still calibrated by the zCDP route. A
double-precision simulation of the rule (mean of 3 runs, equal round shares) gave ``R = 4``,
ratio 2: 1,997 / 148.3 keys; ``R = 5``, 1.5: 2,041 / 147.0; ``R = 6``, 1.5: 2,046 / 148.7; ``R =
8``, 1: 2,037 / 147.7 (per-round DP-SIPS in the same simulation: 1,710 / 142.7). On the release
path (mean of 5 runs), the last round's share of the threshold delta: 1/6: 2,045.2 / 149.8; 0.5:
2,069.0 / 150.0; 0.8: 2,098.2 / 151.6; 0.9: 2,087.4 / 150.2; with ``threshold_share`` 0.3 at
0.8: 2,085.4 / 151.6; ``R = 8``, ratio 1.3 at 0.8: 2,129.4 / 150.4; ``Delta0 = 10`` at 0.5:
1,786.2 / 149.6. With item 4's calibration the defaults release 2,237.0 / 153.4 (mean of 5 runs,
``benchmarks/bench_user_level.py``, which measures the defaults against the peers).
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from statistics import NormalDist
from typing import Any, ClassVar

import mpmath
import numpy as np
import numpy.typing as npt

from privhist.accounting.zcdp import with_threshold_failure
from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource
from privhist.core.weighted import WeightedSource
from privhist.mechanisms.registry import register_weighted
from privhist.mechanisms.user_level._gauss import calibrate, sigma2_for
from privhist.mechanisms.user_level.selectors import (
    WeightedSelector,
)
from privhist.noise import discrete_gaussian

#: rounds and the geometric ratio of their zCDP fractions (module notes)
CUMULATIVE_ROUNDS = 6
CUMULATIVE_RATIO = 1.5
#: the share of the budget (``mu**2``, or zCDP ``rho``) the count release takes with ``counts``
#: (module notes, "Counts")
CUMULATIVE_COUNT_SHARE = 0.15
#: the share of the private-key bound given to the last round's threshold (module notes)
LAST_ROUND_SHARE = 0.8
#: the combination weights c_r are integers up to this value
COMBINATION_RESOLUTION = 64
_DPS = 60
_MARGIN = mpmath.mpf(10) ** -30


def combination_weights(sigma2s: list[Fraction]) -> list[int]:
    """Positive integers ``c_r`` proportional to ``1 / sigma2_r`` (rounded so that the largest
    is :data:`COMBINATION_RESOLUTION`, then divided by their common divisor). Any positive public
    integers keep the guarantee; these make the last statistic the inverse-variance combination
    of the rounds.

    >>> combination_weights([Fraction(4), Fraction(2), Fraction(1)])
    [1, 2, 4]
    """
    inv = [1 / s for s in sigma2s]
    top = max(inv)
    c = [max(1, round(COMBINATION_RESOLUTION * x / top)) for x in inv]
    g = math.gcd(*c)
    return [x // g for x in c]


def round_targets(p_f: float, rounds: int) -> list[float]:
    """The share of the private-key bound ``p_F`` each round's threshold is set for:
    :data:`LAST_ROUND_SHARE` to the last round (where most keys are released), the rest in
    equal parts to the others; rounded down so that the parts add up to at most ``p_F``.

    >>> [round(x, 3) for x in round_targets(1.0, 3)]
    [0.1, 0.1, 0.8]
    """
    if rounds == 1:
        return [p_f * (1 - 1e-12)]
    rest = p_f * (1 - LAST_ROUND_SHARE) / (rounds - 1)
    return [x * (1 - 1e-12) for x in [rest] * (rounds - 1) + [p_f * LAST_ROUND_SHARE]]


def gaussian_profile_upper(epsilon: float, mu2: Fraction, eta: Fraction) -> float:
    """``delta_G(epsilon - eta; mu) = Phi(-e / mu + mu / 2) - exp(e) Phi(-e / mu - mu / 2)``
    at ``e = epsilon - eta``, ``mu = sqrt(mu2)``, in 50-digit arithmetic and rounded up (item 4).

    >>> round(gaussian_profile_upper(1.0, Fraction(1), Fraction(0)), 6)  # mu = 1, epsilon = 1
    0.126937
    """
    with mpmath.workdps(50):
        m2 = mpmath.mpf(mu2.numerator) / mu2.denominator
        mu = mpmath.sqrt(m2)
        e = mpmath.mpf(epsilon) - mpmath.mpf(eta.numerator) / eta.denominator
        d = mpmath.ncdf(-e / mu + mu / 2) - mpmath.exp(e) * mpmath.ncdf(-e / mu - mu / 2)
        return min(1.0, float(d * (1 + _MARGIN)) * (1 + 1e-12) + 1e-300)


@lru_cache(maxsize=65536)
def sum_tail_upper(x: int, shift: int, variance: Fraction) -> float:
    """``Phi_bar((x - shift) / sqrt(variance))`` rounded up (module notes, item 3): an upper
    bound on ``Pr[sum_j c_j Z_j >= x]`` with ``shift = 2 sum_j c_j`` and ``variance = sum_j
    c_j**2 sigma2_j``.

    >>> sum_tail_upper(0, 0, Fraction(1)) >= 0.5
    True
    """
    with mpmath.workdps(_DPS):
        v = mpmath.mpf(variance.numerator) / variance.denominator
        z = (mpmath.mpf(x) - shift) / mpmath.sqrt(2 * v)
        p = mpmath.erfc(z) / 2
        return min(1.0, float(p * (1 + _MARGIN)) * (1 + 1e-12))


@register_weighted
class CumulativeSIPS(WeightedSelector):
    """Cumulative-evidence DP-SIPS: each key's noisy weights of all rounds so far, combined by
    inverse variance, decide its release (module notes: algorithm, proof, defaults).

    Three hundred users hold two keys each: all hold ``"a"``, half ``"b"`` and half ``"c"``:

    >>> import polars as pl
    >>> from privhist import SeededRandom
    >>> from privhist.engines.local.weighting import LocalWeightedSource
    >>> users = pl.DataFrame({
    ...     "user": [u for u in range(300) for _ in range(2)],
    ...     "key": [k for u in range(300) for k in ("a", "b" if u < 150 else "c")],
    ... })
    >>> m = CumulativeSIPS(1.0, 1e-6)
    >>> m.rounds, m.max_keys, m.certified_delta() <= 1e-6
    (6, 20, True)
    >>> m.release_weighted(LocalWeightedSource(users, SeededRandom(0)), SeededRandom(1)).keys
    array(['a', 'b', 'c'], dtype=object)
    """

    name = "cumulative-sips"
    summary = "iterated weighted Gaussian selection deciding on the evidence of all rounds so far"
    default_rounds = CUMULATIVE_ROUNDS
    default_ratio = CUMULATIVE_RATIO
    default_count_share = CUMULATIVE_COUNT_SHARE
    uses_held_subsets: ClassVar[bool] = True

    def _finish_calibration(self) -> None:
        """Item 4's calibration (or the zCDP route), then the combination weights and the
        thresholds of the running statistics (module notes)."""
        fn = type(self).__name__
        #: whether the guarantee is item 4's Gaussian profile (else item 1's zCDP conversion)
        self.gaussian_profile = self.spent_rho == 0
        if self.gaussian_profile:
            self._calibrate_gaussian()
        if min(self.sigma2s) < 1:  # item 3 needs sigma2 >= 1 unit
            raise ValidationError("scale", fn, "large enough that every sigma2 >= 1", self.scale)
        if min(self.weights) < 1:  # a held key must be a candidate in every round
            raise ValidationError("scale", fn, "at least sqrt(max_keys)", self.scale)
        self.combine = combination_weights(self.sigma2s)
        self.cum_weight: list[int] = []
        self.cum_variance: list[Fraction] = []
        c_sum, var = 0, Fraction(0)
        for c, s2 in zip(self.combine, self.sigma2s, strict=True):
            c_sum += c
            var += c * c * s2
            self.cum_weight.append(c_sum)
            self.cum_variance.append(var)
        self.targets = round_targets(self.delta * self.threshold_share, self.rounds)
        self.thresholds = [self._threshold(r, t) for r, t in enumerate(self.targets)]

    # -- the Gaussian profile (item 4) ------------------------------------------------------

    def _sigma2s_for(self, mu2: Fraction) -> tuple[list[Fraction], Fraction | None]:
        """Round and count variances for a total ``mu**2`` (split as the zCDP budget is:
        ``count_share`` to the counts, the rest over the rounds by ``fractions``)."""
        rho = mu2 / 2
        rho_sel = rho * (1 - Fraction(self.count_share)) if self.counts else rho
        s2s = [sigma2_for(rho_sel * f, self.scale * self.scale) for f in self.fractions]
        c2 = None
        if self.counts:
            c2 = sigma2_for(rho * Fraction(self.count_share), self.count_max_keys)
        return s2s, c2

    def _profile_parts(self, s2s: list[Fraction], c2: Fraction | None) -> tuple[Fraction, Fraction]:
        """``(mu_tot**2, eta_tot)`` of item 4 for these variances, as exact rationals."""
        l1 = max(t * w for t, w in enumerate(self.weights, start=1))
        mu2 = sum((Fraction(self.scale**2) / v for v in s2s), Fraction(0))
        eta = sum((Fraction(2 * l1) / v for v in s2s), Fraction(0))
        if c2 is not None:
            mu2 += Fraction(self.count_max_keys) / c2
            eta += Fraction(2 * self.count_max_keys) / c2
        return mu2, eta

    def _calibrate_gaussian(self) -> None:
        """The largest ``mu_tot`` (bisection over ``mu**2``) whose rounded variances keep
        ``delta_G(epsilon + ln(1 - p_F target) - eta_tot; mu_tot)`` within the noise's share;
        the zCDP route stays when that gives more noise than it (a large count ``eta``, with
        counts at a large epsilon) or a variance below 1 (the lemma's condition)."""
        _, p_f = calibrate(self.epsilon, self.delta, self.threshold_share)
        eps_z = self.epsilon + math.log1p(-p_f) * (1 + 1e-12)
        target = self.delta * (1 - self.threshold_share) * (1 - 1e-9)

        def ok(mu2: Fraction) -> bool:
            s2s, c2 = self._sigma2s_for(mu2)
            if min(s2s) < 1 or (c2 is not None and c2 < 1):
                return False
            m2, eta = self._profile_parts(s2s, c2)
            return gaussian_profile_upper(eps_z, m2, eta) <= target

        lo = Fraction(2) * self.rho  # mu**2 of the zCDP calibration
        if not ok(lo):
            self.gaussian_profile = False
            return
        hi = lo * 2
        while ok(hi):
            lo, hi = hi, hi * 2
        for _ in range(40):
            mid = (lo + hi) / 2
            mid = Fraction(round(mid * 2**48), 2**48)
            if mid <= lo or mid >= hi:
                break
            lo, hi = (mid, hi) if ok(mid) else (lo, mid)
        self.sigma2s, self.count_sigma2 = self._sigma2s_for(lo)
        self.rho = lo / 2

    def certified_delta(self) -> float:
        """Item 4 (``gaussian_profile``): ``delta_G(epsilon + ln(1 - p_F) - eta_tot; mu_tot) +
        p_F``, rounded up; else the zCDP bound of the base class."""
        if not self.gaussian_profile:
            return super().certified_delta()
        mu2, eta = self._profile_parts(self.sigma2s, self.count_sigma2)
        return with_threshold_failure(
            lambda e: gaussian_profile_upper(e, mu2, eta), self.epsilon, self.private_key_bound()
        )

    # -- thresholds and the private-key bound -----------------------------------------------

    def round_bound(self, r: int, threshold: int) -> float:
        """``max_P P Pr[sum_(j <= r) c_j Z_j >= threshold - C_r w_P]``, an upper bound (module
        notes, items 2 and 3)."""
        C, V = self.cum_weight[r], self.cum_variance[r]
        worst = 0.0
        for P, w in enumerate(self.weights, start=1):
            worst = max(worst, min(1.0, P * sum_tail_upper(threshold - C * w, 2 * C, V)))
        return worst

    def _threshold(self, r: int, target: float) -> int:
        """The smallest integer ``T`` with :meth:`round_bound` ``<= target``: the double
        precision Gaussian quantile gives a start within a unit or two, and the certified
        bound decides the last steps (it decreases in ``T``)."""
        C, V = self.cum_weight[r], self.cum_variance[r]
        sd = math.sqrt(float(V))
        quantile = NormalDist().inv_cdf
        T = max(
            math.ceil(C * (w + 2) - sd * quantile(min(0.5, target / P)))
            for P, w in enumerate(self.weights, start=1)
        )
        while self.round_bound(r, T) > target:
            T += 1
        while self.round_bound(r, T - 1) <= target:
            T -= 1
        return T

    def private_key_bound(self) -> float:
        """``p_F``: the sum over rounds of :meth:`round_bound` at the thresholds."""
        return sum(self.round_bound(r, t) for r, t in enumerate(self.thresholds))

    def parameters(self) -> dict[str, Any]:
        out = super().parameters()
        # the thresholds apply to S_r = sum_j c_j (W_j + Z_j): in users, divide by scale C_r
        out["thresholds_in_users"] = [
            t / (self.scale * c) for t, c in zip(self.thresholds, self.cum_weight, strict=True)
        ]
        out["combination_weights"] = list(self.combine)
        out["subsets"] = "held for the whole release (released keys are not replaced)"
        return out

    # -- planning ---------------------------------------------------------------------------

    def ever_released(self, weights: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """For planning: ``Pr[S_R >= T_R]`` for a key whose weight sum is ``weights`` in every
        round, with the noise taken as Gaussian. The key is released by the last round whenever
        ``S_R >= T_R``, so this is a lower bound on its release probability, up to the normal
        approximation."""
        from scipy.special import ndtr  # the normal cdf (here: scipy.stats is slow to import)

        w = np.asarray(weights, dtype=np.float64)
        r = self.rounds - 1
        mean = self.cum_weight[r] * w
        sd = math.sqrt(float(self.cum_variance[r]))
        out: npt.NDArray[np.float64] = ndtr((mean - self.thresholds[r]) / sd)
        return out

    # -- releasing --------------------------------------------------------------------------

    def _select(
        self, source: WeightedSource, rng: RandomSource
    ) -> tuple[list[npt.NDArray[Any]], list[int], dict[str, Any]]:
        released: list[npt.NDArray[Any]] = []
        per_round: list[int] = []
        info: dict[str, Any] = {}
        prev_keys: npt.NDArray[Any] | None = None
        prev_stat = np.zeros(0, dtype=np.int64)
        for r in range(self.rounds):
            exclude = np.concatenate(released) if released else None
            agg = source.held_sums(self.max_keys, self.scale, exclude)
            if r == 0:
                info = dict(agg.info)
            noisy = agg.weights + discrete_gaussian(self.sigma2s[r], rng, len(agg))
            stat = self.combine[r] * noisy
            if prev_keys is not None and len(agg):
                pos = np.searchsorted(prev_keys, agg.keys)
                pos = np.minimum(pos, max(prev_keys.shape[0] - 1, 0))
                if prev_keys.shape[0] == 0 or not (prev_keys[pos] == agg.keys).all():
                    raise ValidationError(
                        "source",
                        type(self).__name__,
                        "held subsets: every candidate was a candidate in the earlier rounds",
                        "a new key in a later round",
                    )
                stat = stat + prev_stat[pos]
            new = agg.keys[stat >= self.thresholds[r]]
            keep = stat < self.thresholds[r]
            prev_keys, prev_stat = agg.keys[keep], stat[keep]
            released.append(new)
            per_round.append(int(new.shape[0]))
        return released, per_round, info

    @classmethod
    def test_instances(cls) -> list[WeightedSelector]:
        return [
            cls(1.0, 1e-3, max_keys=2, scale=4, rounds=2, ratio=1.0),
            cls(1.0, 1e-2, max_keys=3, scale=3, rounds=3, ratio=2.0),
        ]
