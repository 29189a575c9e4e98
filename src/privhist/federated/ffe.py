"""Federated frequency estimation protocols: TFFE (two phases) and MFFE (multi-round).

Source: the paper (federated frequency estimation under user-level distributed DP), Section 4.3,
Algorithm 6 (TFFE), Proposition 4 (its privacy), Appendix D with Algorithm 7 (MFFE) and
Corollary 1; Algorithms 1-5 for the parts.

TFFE (Algorithm 6), on ``n`` users holding count vectors ``x_i`` in ``R^d``:

1. every user computes her Kashin representation ``y_i`` over the public frame ``U`` (``d x D``)
   and sends the DHT of ``||y_i||_2`` (Algorithm 4; :mod:`privhist.federated.dht`) with cPBM
   ``(theta', m')`` to the secure sum;
2. the server estimates the ``gamma*`` quantile ``C_hat`` (Algorithm 5), with
   ``gamma* = 1 - sqrt(D / (4 m n theta^2))`` (equation (5); :mod:`privhist.federated.ocpbm`);
   by default (``clip_rule="squared"``) it instead takes the ``C_hat`` minimising the squared
   form of Theorem 1's bound over the same private histogram with its tail settled
   (:func:`~privhist.federated.ocpbm.histogram_clip`), which lies nearer the best threshold
   where noise and bias are of the same size;
3. every user sends cPBM ``(theta, m, C_hat)`` of ``y_i`` (Algorithms 1, 3);
4. the server decodes ``x_hat = U y_hat`` (Algorithm 2).

The range ``B`` of the quantile histogram is ``K * max_items`` where ``max_items`` is a public
bound on the items a user holds (``||y||_2 <= K ||x||_2 <= K ||x||_1``; Section 5.1 and its
footnote 4). Privacy (Proposition 4): the two phases run on the same users, so their RDP curves
(Lemma 2 with ``2**b - 1`` and ``D`` coordinates) add; equation (8) converts.

MFFE (Algorithm 7): the users are split into ``R`` rounds (``N_r`` users each, every user in one
round). In round ``r`` each user sends cPBM ``(theta, m, C_r)`` of ``y_i`` and cPBM
``(theta', m', C = 1)`` of the indicator ``1[||y_i|| > C_r]`` (one coordinate). The server
decodes ``x_hat_r`` and the fraction above ``C_r``, sets
``gamma_hat_r = 1 - (fraction above)`` (the quantile level of ``C_r``) and updates
``C_{r+1} = C_r exp(-eta (gamma_hat_r - gamma*))`` (the geometric update of Andrew et al. 2021:
``C`` grows while fewer than ``gamma*`` of the users lie below it), with ``gamma*`` of
Corollary 1 (total ``n``). The estimate is ``sum_r (N_r / n) x_hat_r`` (``(1/R) sum_r`` for equal
rounds). Privacy: each round is the composition of its two cPBM sums over its own users; rounds
are disjoint, so the protocol has the RDP of its worst round (parallel composition, Appendix D),
the round with the fewest users.

MFFE's start (``start="dht"``, not in the paper). Algorithm 7 starts at a public ``C_1`` (the
paper: 1). On data whose norms are far above it the first rounds clip almost everything: the
threshold grows at most by ``exp(eta gamma*)`` a round (``gamma_hat >= 0`` up to noise), and
round ``r``'s clipping bias enters the estimate with weight ``N_r / n``. The thresholds depend
on the indicators only, so given them the frequency noise has mean zero, and by Jensen the mean
error is at least the norm of the weighted bias. With ``start="dht"`` the first round is
two-phase, as TFFE: its users first send the DHT of their norms (Algorithm 4 at the
frequencies' ``theta`` with ``m_s = floor(share m D / (2**b - 1))`` trials); the server reads
``C_1`` from it with TFFE's rule (:func:`~privhist.federated.ocpbm.histogram_clip` with
Corollary 1's noise slope for all ``n`` users; the ``gamma`` quantile when ``gamma`` is given);
the same users then send their frequencies with ``m_1 = m - ceil(m_s (2**b - 1) / D)`` trials
and the indicator. The update then targets the estimated level of ``C_1`` in that histogram
(:func:`~privhist.federated.ocpbm.level_at`, at most ``gamma*``) instead of ``gamma*``: TFFE's
rule minimises the squared form of Theorem 1's bound, whose minimiser is not the ``gamma*``
quantile, and Algorithm 7's update keeps ``C`` at a fixed level, so it is given the level of
that minimiser (measured on Table 3, i.i.d. and heterogeneous ``d = 50``, 5 runs: 0.58 and 3.07
against 0.52 and 3.88 with ``gamma*``, Best C* about 0.53 and 3.14).
Privacy: round 1 composes (adaptively; Mironov 2017, Proposition 1)
``m_1 D + m_s (2**b - 1) <= m D`` cPBM trials at ``theta`` and ``m'`` at ``theta'`` over its
``N_1`` users. Lemma 2 is ``g`` times the number of trials at each ``theta``, so its curve lies
below that of an ordinary round of ``N_1`` users, and :func:`mffe_rdp` and
:func:`certified_guarantee` (the worst ordinary round) still bound the protocol. The price:
round 1's frequencies use ``m_1 < m`` trials, and its users take part twice.

Calibration from ``(epsilon, delta)``. Lemma 2 is ``eps(lambda) = m * dim * g_n(lambda)`` with one
``g_n`` for every cPBM sum over the same ``n`` users and the same ``theta``; with
``theta' = theta`` the whole protocol has RDP ``T g_n`` where ``T = m D + m' D'`` (``D' = 2**b - 1``
for TFFE, ``1`` for MFFE with ``n = min_r N_r``). :func:`calibrate_tffe` and
:func:`calibrate_mffe` take the largest ``T`` meeting the target
(:func:`privhist.federated.cpbm_accounting.calibrate_m` with one coordinate), give the quantile
phase ``share`` of it (``m' = floor(share T / D')``, at least 1) and the rest to the frequencies
(``m = floor((T - m' D') / D)``), so the composed guarantee is at most the target; ``m`` is also
capped so that ``n m + 1`` fits the secure sum's integer width.

Reported error bound. :attr:`FfeResult.bound_estimate` is Theorem 1's ``E(C_hat; D)``
(:func:`privhist.federated.ocpbm.error_bound`) with the clipping-bias term computed from the
*private* DHT histogram (each bin at its upper edge, an over-estimate of the norms) and the noise
term ``C_hat sqrt(D / (4 m n theta^2))`` exactly: post-processing, no extra privacy. For MFFE only
the noise term ``sqrt(sum_r (N_r/n)^2 C_r^2 D / (4 m N_r theta^2))`` is known privately.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from privhist.accounting.accountant import guarantee_of
from privhist.accounting.certified import compose_accounts
from privhist.accounting.events import RdpCurveEvent
from privhist.accounting.renyi import (
    RdpCurve,
    certified_epsilon,
    compose,
    parallel_compose,
    sequential_exact,
)
from privhist.core.errors import InputDataError, ValidationError
from privhist.core.random import RandomSource
from privhist.core.validation import check_delta, check_epsilon, check_positive_int
from privhist.federated.cpbm import Cpbm, check_clip, cpbm_decode, secure_sum_modulus
from privhist.federated.cpbm_accounting import (
    calibrate_m,
    certified_log_pi,
    check_theta,
    cpbm_rdp,
    worst_case_account,
)
from privhist.federated.dht import (
    FederatedQuantile,
    check_bits,
    check_gamma,
    encode_signs,
)
from privhist.federated.kashin import (
    DEFAULT_ETA,
    DEFAULT_NU,
    TightFrame,
    kashin_level,
    kashin_representation,
)
from privhist.federated.ocpbm import (
    histogram_clip,
    level_at,
    noise_slope,
    optimal_quantile,
    start_split,
)
from privhist.federated.secure_sum import IdealSecureSum, SecureAggregator
from privhist.federated.user_data import UserCounts

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

#: users per Kashin / cPBM batch
BATCH = 2048
#: keep the representations in memory (instead of recomputing them) below this many floats
CACHE_FLOATS = 1 << 28  # 2 GiB of float64: 10**5 users at D = 2048 fit, so Kashin runs once

AggregatorFactory = Callable[[int, int], SecureAggregator]
Progress = Callable[[int], None]


def _ideal(modulus: int, dimension: int) -> SecureAggregator:
    return IdealSecureSum(modulus, dimension)


# --------------------------------------------------------------------------------------------
# representations


@dataclass
class Representations:
    """Kashin representations of users, cached when small, recomputed batch by batch otherwise.

    Args:
        users: The users' count vectors.
        frame: The public tight frame (``frame.d`` must equal ``users.dimension``).
        batch: Users per batch.
    """

    users: UserCounts
    frame: TightFrame
    batch: int = BATCH
    _cache: F64 | None = field(default=None, repr=False)
    _norms: F64 | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.frame.d != self.users.dimension:
            raise ValidationError(
                "frame",
                "Representations",
                f"a frame with d = {self.users.dimension}",
                f"d = {self.frame.d}",
            )
        check_positive_int(self.batch, "Representations", "batch")

    @property
    def n(self) -> int:
        return self.users.n_users

    def _compute(self, start: int, stop: int) -> F64:
        x = self.users.dense(start, stop)
        return kashin_representation(self.frame, x).coefficients

    def batches(self, progress: Progress | None = None) -> Iterator[F64]:
        """``y`` for consecutive blocks of users."""
        if self._cache is not None:
            for s in range(0, self.n, self.batch):
                yield self._cache[s : s + self.batch]
                if progress is not None:
                    progress(min(self.batch, self.n - s))
            return
        keep = self.n * self.frame.D <= CACHE_FLOATS
        parts: list[F64] = []
        norms: list[F64] = []
        for s in range(0, self.n, self.batch):
            y = self._compute(s, s + self.batch)
            norms.append(np.linalg.norm(y, axis=1))
            if keep:
                parts.append(y)
            yield y
            if progress is not None:
                progress(y.shape[0])
        if self._norms is None:
            self._norms = np.concatenate(norms)
        if keep:
            self._cache = np.concatenate(parts)

    def norms(self, progress: Progress | None = None) -> F64:
        """``||y_i||_2`` for every user."""
        if self._norms is None:
            for _ in self.batches(progress):
                pass
        assert self._norms is not None
        return self._norms

    def array(self) -> F64:
        """All representations as one array (small inputs only)."""
        if self._cache is None:
            parts = list(self.batches())
            if self._cache is None:
                return np.concatenate(parts)
        return self._cache


def range_upper(
    max_items: int,
    eta: float = DEFAULT_ETA,
    nu: float = DEFAULT_NU,
    max_count: int | None = None,
) -> float:
    """``B = K * max_items``: a public bound on ``||y||_2`` (Section 5.1, footnote 4).

    With a public bound ``max_count`` on one item's count in a user's vector (1 for sets of
    items: visited pages, basket items), ``||x||_2 <= sqrt(||x||_1 ||x||_inf)`` gives the
    tighter ``B = K sqrt(max_items min(max_count, max_items))``: on set-valued data the 64 bins
    then cover the norms instead of a range ``sqrt(max_items)`` times too wide.

    >>> round(range_upper(100), 4)
    282.8427
    """
    mi = check_positive_int(max_items, "range_upper", "max_items")
    if max_count is not None:
        mc = min(check_positive_int(max_count, "range_upper", "max_count"), mi)
        return kashin_level(eta, nu) * math.sqrt(mi * mc)
    return kashin_level(eta, nu) * mi


# --------------------------------------------------------------------------------------------
# calibration


@dataclass(frozen=True)
class Calibration:
    """Trials per phase: ``m`` for the frequencies, ``m_quantile`` for the quantile."""

    m: int
    m_quantile: int
    total_trials: int


def _split(
    epsilon: float,
    delta: float,
    n: int,
    theta: float,
    dimension: int,
    quantile_dimension: int,
    share: float,
    sum_bits: int,
    function: str,
) -> Calibration:
    eps = check_epsilon(epsilon, function)
    dl = check_delta(delta, function, positive=True)
    if not 0 < float(share) < 1:
        raise ValidationError("quantile_share", function, "a number in (0, 1)", share)
    try:
        total = calibrate_m(eps, dl, n, theta, 1)
    except ValidationError as exc:
        if exc.parameter != "epsilon":
            raise
        # the smallest epsilon that works is a function of the number of users, an exact fact
        # of the input: say that epsilon is too small, not by how much
        raise ValidationError(
            "epsilon",
            function,
            "large enough for one trial per coordinate with this number of users (the exact "
            "bound depends on the number of users, an input fact, so it is not shown)",
            epsilon,
        ) from None
    mq = max(1, math.floor(share * total / quantile_dimension))
    m = (total - mq * quantile_dimension) // dimension
    if m < 1:
        raise ValidationError(
            "epsilon",
            function,
            f"large enough for m >= 1 with {dimension} coordinates and this number of users "
            "(the number of users is an exact fact of the input, so it is not shown)",
            epsilon,
        )
    m = min(m, ((1 << sum_bits) - 1) // n)
    if m < 1:
        secure_sum_modulus(n, 1, sum_bits)
    mq = min(mq, ((1 << sum_bits) - 1) // n)
    return Calibration(int(m), int(mq), int(total))


def calibrate_tffe(
    epsilon: float,
    delta: float,
    n: int,
    dimension: int,
    *,
    bits: int = 6,
    theta: float = 0.2,
    quantile_share: float = 0.06,
    sum_bits: int = 32,
) -> Calibration:
    """``(m, m')`` for TFFE meeting ``(epsilon, delta)`` (module notes; ``theta' = theta``).

    >>> c = calibrate_tffe(2.8, 1e-4, 10_000, 100)
    >>> tffe_rdp(10_000, 0.2, c.m, 100, c.m_quantile, 6).epsilon(1e-4) <= 2.8
    True
    """
    fn = "calibrate_tffe"
    b = check_bits(bits, fn)
    return _split(
        epsilon,
        delta,
        check_positive_int(n, fn, "n"),
        check_theta(theta, fn),
        check_positive_int(dimension, fn, "dimension"),
        (1 << b) - 1,
        quantile_share,
        sum_bits,
        fn,
    )


def calibrate_mffe(
    epsilon: float,
    delta: float,
    round_users: int,
    dimension: int,
    *,
    theta: float = 0.2,
    quantile_share: float | None = None,
    sum_bits: int = 32,
) -> Calibration:
    """``(m, m')`` for MFFE meeting ``(epsilon, delta)`` with rounds of at least
    ``round_users`` users (default share ``1 / (D + 1)``: ``m' = m``, as the paper's
    ``m = m' = 15``)."""
    fn = "calibrate_mffe"
    dim = check_positive_int(dimension, fn, "dimension")
    share = 1.0 / (dim + 1) if quantile_share is None else quantile_share
    return _split(
        epsilon,
        delta,
        check_positive_int(round_users, fn, "round_users"),
        check_theta(theta, fn),
        dim,
        1,
        share,
        sum_bits,
        fn,
    )


def tffe_rdp(
    n: int,
    theta: float,
    m: int,
    dimension: int,
    m_quantile: int,
    bits: int,
    theta_quantile: float | None = None,
) -> RdpCurve:
    """Proposition 4: Lemma 2 for the DHT phase (``2**b - 1`` coordinates) plus Lemma 2 for the
    frequency phase (``D`` coordinates), composed."""
    tq = theta if theta_quantile is None else theta_quantile
    b = check_bits(bits, "tffe_rdp")
    return compose([cpbm_rdp(n, tq, m_quantile, (1 << b) - 1), cpbm_rdp(n, theta, m, dimension)])


def mffe_rdp(
    round_sizes: Any,
    theta: float,
    m: int,
    dimension: int,
    m_quantile: int,
    theta_quantile: float | None = None,
) -> RdpCurve:
    """Appendix D: per round, frequencies (``D`` coordinates) composed with the indicator
    (1 coordinate); over the disjoint rounds, the pointwise maximum."""
    tq = theta if theta_quantile is None else theta_quantile
    sizes = sorted({int(s) for s in round_sizes})
    if not sizes or sizes[0] < 1:
        raise ValidationError("round_sizes", "mffe_rdp", "positive round sizes", round_sizes)
    return parallel_compose(
        compose([cpbm_rdp(s, theta, m, dimension), cpbm_rdp(s, tq, m_quantile, 1)]) for s in sizes
    )


@dataclass(frozen=True)
class CertifiedGuarantee:
    """Proven epsilons of a TFFE/MFFE run at one delta, beside the float64 one.

    Attributes:
        delta: The delta all three are stated at.
        float_epsilon: The float64 RDP conversion (:meth:`RdpCurve.epsilon`), as reported so far.
        rdp_epsilon: Lemma 2 and equation (8) in interval arithmetic at the orders around the
            float optimum, the curves of the parts added in exact rationals: an upper bound.
        rdp_order: The order giving ``rdp_epsilon``.
        pld_epsilon: The certified PLD composition of the worst-case pair (None when not
            computed; ``pld_note`` says why).
    """

    delta: float
    float_epsilon: float
    rdp_epsilon: float
    rdp_order: float
    pld_epsilon: float | None
    pld_note: str

    @property
    def epsilon(self) -> float:
        """The smallest proven epsilon."""
        return min(self.rdp_epsilon, math.inf if self.pld_epsilon is None else self.pld_epsilon)

    def to_dict(self) -> dict[str, Any]:
        return {
            "delta": self.delta,
            "float_rdp_epsilon": self.float_epsilon,
            "certified_rdp_epsilon": self.rdp_epsilon,
            "certified_rdp_order": self.rdp_order,
            "certified_pld_epsilon": self.pld_epsilon,
            "certified_pld_note": self.pld_note,
            "certified_epsilon": self.epsilon,
        }


#: the certified PLD is computed up to this many composed cPBM coordinate-trials
PLD_MAX_COMPOSITIONS = 512


def certified_guarantee(
    round_sizes: Any,
    theta: float,
    m: int,
    dimension: int,
    m_quantile: int,
    quantile_dimension: int,
    delta: float,
    theta_quantile: float | None = None,
    *,
    pld_max_compositions: int = PLD_MAX_COMPOSITIONS,
) -> CertifiedGuarantee:
    """Certified composition of a TFFE run (one round: ``round_sizes = [n]``,
    ``quantile_dimension = 2**b - 1``) or an MFFE run (``quantile_dimension = 1``).

    Each round composes ``m D`` frequency trials at ``theta`` and ``m' D'`` quantile trials at
    ``theta_quantile`` on the same users; rounds are disjoint, so the worst round bounds the run
    (Appendix D). RDP: Lemma 2 per part (:func:`certified_log_pi`), added exactly, the maximum
    over the distinct round sizes, then equation (8) (the accountant's
    :func:`~privhist.accounting.renyi.certified_epsilon`), at the three
    orders around the float optimum. PLD: the worst-case pair of the smallest round
    (:func:`worst_case_account`; a larger round adds independent users' sums, post-processing)
    composed ``m D`` and ``m' D'`` times with :mod:`privhist.accounting.certified`, when there
    are at most ``pld_max_compositions`` of them (the pessimistic grid adds up to one grid step
    per composition, so beyond a few thousand it is loose as well as slow).

    >>> g = certified_guarantee([40], 0.25, 2, 3, 1, 3, 1e-3)
    >>> g.rdp_epsilon >= g.float_epsilon - 1e-9 and g.pld_epsilon < g.rdp_epsilon
    True
    """
    fn = "certified_guarantee"
    tq = theta if theta_quantile is None else theta_quantile
    sizes = sorted({int(s) for s in round_sizes})
    if not sizes or sizes[0] < 1:
        raise ValidationError("round_sizes", fn, "positive round sizes", round_sizes)
    d = check_delta(delta, fn, positive=True)
    m = check_positive_int(m, fn, "m")
    mq = check_positive_int(m_quantile, fn, "m_quantile")
    dim = check_positive_int(dimension, fn, "dimension")
    qdim = check_positive_int(quantile_dimension, fn, "quantile_dimension")
    curve = parallel_compose(
        compose([cpbm_rdp(s, theta, m, dim), cpbm_rdp(s, tq, mq, qdim)]) for s in sizes
    )
    float_eps = curve.epsilon(d)
    orders = curve.orders
    best = orders.index(curve.best_order(d))

    def rdp_at(lam: float) -> Fraction:
        # the rounds are disjoint (parallel: the largest); within one, the parts add
        return max(
            sequential_exact(
                [
                    (m * dim, certified_log_pi(s, theta, lam)),
                    (mq * qdim, certified_log_pi(s, tq, lam)),
                ]
            )
            for s in sizes
        )

    rdp_best = certified_epsilon(rdp_at, orders[max(best - 1, 0) : best + 2], d)
    count = m * dim + mq * qdim
    pld_eps: float | None = None
    if count > pld_max_compositions:
        note = f"not computed: {count} compositions exceed {pld_max_compositions}"
    else:
        try:
            account = compose_accounts(
                [
                    (worst_case_account(sizes[0], theta), m * dim),
                    (worst_case_account(sizes[0], tq), mq * qdim),
                ]
            )
            pld_eps = account.epsilon_for_delta(d)
            note = f"{count} compositions of the worst-case pair of a round of {sizes[0]}"
        except ValidationError as exc:
            note = f"not computed: {exc}"
    return CertifiedGuarantee(d, float_eps, rdp_best[0], rdp_best[1], pld_eps, note)


# --------------------------------------------------------------------------------------------
# phases


def frequency_phase(
    y_batches: Any,
    frame: TightFrame,
    n: int,
    theta: float,
    m: int,
    clip: float,
    rng: RandomSource,
    *,
    aggregator: AggregatorFactory = _ideal,
    sum_bits: int = 32,
) -> F64:
    """Algorithms 1-3 on every batch of representations: ``x_hat = U y_hat`` (length ``d``)."""
    mech = Cpbm(
        theta=theta,
        m=m,
        clip=check_clip(clip, "frequency_phase"),
        dimension=frame.D,
        n_users=n,
        bits=sum_bits,
    )
    agg = aggregator(mech.modulus, frame.D)
    total = agg.aggregate(mech.encode_batches(y_batches, rng))
    y_hat = mech.decode(total)
    return np.asarray(frame.synthesize(y_hat[None, :])[0])


@dataclass(frozen=True)
class FfeResult:
    """A federated frequency estimate and what was spent on it.

    Attributes:
        estimate: ``x_hat``, the estimated mean count vector (length ``d``).
        protocol: ``"tffe"`` or ``"mffe"``.
        clips: The thresholds used (one for TFFE, one per round for MFFE).
        gamma: The target quantile.
        m, m_quantile, theta: cPBM parameters of the two parts.
        rdp: The protocol's RDP curve; :meth:`epsilon` converts.
        bound_estimate: The privately estimated error bound (module notes).
        noise_bound: Its noise term alone.
        n_users, dimension, frame_dimension: ``n``, ``d``, ``D``.
    """

    estimate: F64
    protocol: str
    clips: tuple[float, ...]
    gamma: float
    m: int
    m_quantile: int
    theta: float
    rdp: RdpCurve
    bound_estimate: float
    noise_bound: float
    n_users: int
    dimension: int
    frame_dimension: int
    extra: dict[str, Any] = field(default_factory=dict)

    def event(self) -> RdpCurveEvent:
        """The run as a privacy event: the protocol's RDP curve (replace-one-user
        neighbours)."""
        event: RdpCurveEvent = self.rdp.to_event()
        return event

    def epsilon(self, delta: float) -> float:
        """The protocol's epsilon at ``delta``: the accountant's guarantee of :meth:`event`
        (equation (8), float64)."""
        return guarantee_of(self.event(), delta).epsilon

    def certified(self, delta: float) -> CertifiedGuarantee:
        """Proven epsilons at ``delta`` beside the float one (:func:`certified_guarantee`)."""
        tq = float(self.extra.get("theta_quantile", self.theta))
        if self.protocol == "tffe":
            sizes: tuple[int, ...] = (self.n_users,)
            qdim = (1 << int(self.extra["bits"])) - 1
        else:
            sizes, qdim = tuple(self.extra["round_sizes"]), 1
        return certified_guarantee(
            sizes, self.theta, self.m, self.frame_dimension, self.m_quantile, qdim, delta, tq
        )


def bias_from_prefix(prefix: Any, n: int, upper: float, bits: int, clip: float) -> float:
    """Theorem 1's bias term ``(1/n) sum_i max(0, v_i - C)`` from private prefix counts.

    ``(1/n) sum_i max(0, v_i - C) = int_C^inf (1 - F(t) / n) dt`` with ``F`` the count of values
    ``<= t``; ``F`` is taken at the lower edge of every bin (each value at its bin's upper edge,
    an over-estimate), from the prefix counts made non-decreasing (running maximum) and clipped
    to ``[0, n]``. Values clamped into the last bin count at ``B``.

    >>> bias_from_prefix([1.0, 2.0, 2.0, 4.0], n=4, upper=4.0, bits=2, clip=2.0)  # (2 + 2) / 4
    1.0
    """
    p = np.clip(np.maximum.accumulate(np.asarray(prefix, dtype=np.float64)), 0.0, n)
    width = float(upper) / (1 << bits)
    lower = np.concatenate([[0.0], p[:-1]])  # F at the lower edge of bin v
    edges_lo = width * np.arange(p.size)
    edges_hi = edges_lo + width
    overlap = np.clip(edges_hi - max(clip, 0.0), 0.0, width)  # part of each bin above C
    return float((overlap * (1.0 - lower / n)).sum())


def tffe(
    users: UserCounts,
    frame: TightFrame,
    rng: RandomSource,
    *,
    m: int,
    m_quantile: int,
    max_items: int,
    max_count: int | None = None,
    theta: float = 0.2,
    theta_quantile: float | None = None,
    bits: int = 6,
    gamma: float | None = None,
    clip_rule: str = "squared",
    aggregator: AggregatorFactory = _ideal,
    sum_bits: int = 32,
    representations: Representations | None = None,
    progress: Progress | None = None,
) -> FfeResult:
    """Algorithm 6 (TFFE) end to end (module notes).

    Args:
        users: The users' count vectors (``d = frame.d``).
        frame: The public tight frame.
        rng: Randomness of the devices (``SecureRandom()`` for real runs).
        m: cPBM trials of the frequency phase.
        m_quantile: cPBM trials ``m'`` of the DHT phase.
        max_items: Public bound on the items a user holds (fixes the range ``B``).
        max_count: Public bound on one item's count per user (1 for sets; tightens ``B``,
            :func:`range_upper`); none if omitted.
        theta: cPBM ``theta`` of the frequency phase.
        theta_quantile: ``theta'`` of the DHT phase (``theta`` if omitted).
        bits: ``b``: ``2**b`` histogram bins.
        gamma: Target quantile; equation (5)'s ``gamma*`` if omitted (others: baselines).
        clip_rule: How the threshold is read from the DHT release when ``gamma`` is omitted:
            ``"squared"`` (default) minimises the squared form of Theorem 1's bound
            (:func:`~privhist.federated.ocpbm.histogram_clip`) over the private
            histogram, capped at the ``gamma*`` quantile; ``"quantile"`` takes the ``gamma*``
            quantile (Algorithm 5, the paper's OcPBM). A given ``gamma`` always uses the
            quantile.
        aggregator: ``(modulus, dimension) -> SecureAggregator`` (ideal sum by default).
        sum_bits: Integer width of the secure sums.
        representations: Precomputed :class:`Representations` of ``users`` (reused).
        progress: Called with the number of users done, twice per user (both phases).

    Returns:
        An :class:`FfeResult`.
    """
    fn = "tffe"
    if clip_rule not in ("squared", "quantile"):
        raise ValidationError("clip_rule", fn, "'squared' or 'quantile'", clip_rule)
    n = users.n_users
    t = check_theta(theta, fn)
    tq = t if theta_quantile is None else check_theta(theta_quantile, fn, "theta_quantile")
    mm = check_positive_int(m, fn, "m")
    mq = check_positive_int(m_quantile, fn, "m_quantile")
    b = check_bits(bits, fn)
    g = optimal_quantile(frame.D, mm, n, t) if gamma is None else check_gamma(gamma, fn)
    upper = range_upper(max_items, max_count=max_count)
    reps = representations or Representations(users, frame)
    if reps.users is not users:
        raise InputDataError(f"{fn}: representations belong to other users")
    dht = FederatedQuantile(upper, b, tq, mq, n, "dht", sum_bits)
    secure_sum_modulus(n, mm, sum_bits)  # fail before any device work
    norms = reps.norms(progress)
    agg = aggregator(secure_sum_modulus(n, mq, sum_bits), dht.dimension)
    release = dht.run(norms, g, rng, agg)
    clip = release.estimate
    rule = "quantile" if gamma is not None else clip_rule
    if rule == "squared":
        # E2 is convex in C; where the noise s C exceeds the bias B(C) at the gamma* quantile
        # (gamma* near 1, the usual case) its minimiser lies below that quantile, so the
        # quantile caps it; the tail is settled first (histogram_clip)
        clip = histogram_clip(release.prefix, dht, noise_slope(frame.D, mm, n, t, fn), g)
    estimate = frequency_phase(
        reps.batches(progress),
        frame,
        n,
        t,
        mm,
        clip,
        rng,
        aggregator=aggregator,
        sum_bits=sum_bits,
    )
    noise = clip * noise_slope(frame.D, mm, n, t, fn)
    bias = bias_from_prefix(release.prefix, n, upper, b, clip)
    return FfeResult(
        estimate=estimate,
        protocol="tffe",
        clips=(clip,),
        gamma=g,
        m=mm,
        m_quantile=mq,
        theta=t,
        rdp=tffe_rdp(n, t, mm, frame.D, mq, b, tq),
        bound_estimate=bias + noise,
        noise_bound=noise,
        n_users=n,
        dimension=frame.d,
        frame_dimension=frame.D,
        extra={"range_upper": upper, "bits": b, "theta_quantile": tq, "clip_rule": rule},
    )


def round_sizes(n: int, rounds: int) -> list[int]:
    """``R`` round sizes as equal as possible (the larger ones first).

    >>> round_sizes(10, 3)
    [4, 3, 3]
    """
    nn = check_positive_int(n, "round_sizes", "n")
    r = check_positive_int(rounds, "round_sizes", "rounds")
    if r > nn:
        raise ValidationError("rounds", "round_sizes", "at most the number of users", r)
    base, extra = divmod(nn, r)
    return [base + (1 if i < extra else 0) for i in range(r)]


def mffe(
    users: UserCounts,
    frame: TightFrame,
    rng: RandomSource,
    *,
    m: int,
    m_quantile: int,
    rounds: int,
    theta: float = 0.2,
    theta_quantile: float | None = None,
    eta: float = 1.0,
    initial_clip: float = 1.0,
    gamma: float | None = None,
    start: str = "public",
    start_share: float = 0.25,
    max_items: int | None = None,
    max_count: int | None = None,
    bits: int = 6,
    aggregator: AggregatorFactory = _ideal,
    sum_bits: int = 32,
    progress: Progress | None = None,
) -> FfeResult:
    """Algorithm 7 (MFFE): rounds of consecutive users in the given order (module notes).

    Users are assigned to rounds in their order in ``users`` (shuffle them first for Corollary
    1's i.i.d. rounds, e.g. with :meth:`UserCounts.subset`).

    Args:
        users: The users' count vectors.
        frame: The public tight frame.
        rng: Randomness of the devices.
        m: cPBM trials of the frequencies.
        m_quantile: cPBM trials ``m'`` of the indicator.
        rounds: ``R``.
        theta: cPBM ``theta``; ``theta_quantile`` is ``theta'`` (``theta`` if omitted).
        eta: Learning rate of the geometric update.
        initial_clip: ``C_1`` with ``start="public"``.
        gamma: Target quantile; Corollary 1's ``1 - sqrt(D / (4 m n theta^2))`` if omitted.
        start: ``"public"`` (Algorithm 7: ``C_1 = initial_clip``) or ``"dht"`` (``C_1`` from a
            DHT of the first round's norms, paid from that round's frequency trials; module
            notes).
        start_share: With ``"dht"``: the share of the first round's ``m D`` frequency trials
            spent on the DHT (:func:`~privhist.federated.ocpbm.start_split`).
        max_items, max_count: With ``"dht"``: the public bounds that fix the DHT's range
            (:func:`range_upper`).
        bits: With ``"dht"``: ``2**bits`` histogram bins.
        aggregator: ``(modulus, dimension) -> SecureAggregator``.
        sum_bits: Integer width of the secure sums.
        progress: Called with the number of users done.
    """
    fn = "mffe"
    n = users.n_users
    t = check_theta(theta, fn)
    tq = t if theta_quantile is None else check_theta(theta_quantile, fn, "theta_quantile")
    mm = check_positive_int(m, fn, "m")
    mq = check_positive_int(m_quantile, fn, "m_quantile")
    e = float(eta)
    if not math.isfinite(e) or e <= 0:
        raise ValidationError("eta", fn, "a finite number > 0", eta)
    c = check_clip(initial_clip, fn)
    g = optimal_quantile(frame.D, mm, n, t) if gamma is None else check_gamma(gamma, fn)
    sizes = round_sizes(n, rounds)
    for s in set(sizes):
        secure_sum_modulus(s, max(mm, mq), sum_bits)
    if start not in ("public", "dht"):
        raise ValidationError("start", fn, "'public' or 'dht'", start)
    m_first, m_start = mm, 0
    if start == "dht":
        if max_items is None:
            raise ValidationError("max_items", fn, "a public bound with start='dht'", None)
        m_start, m_first = start_split(mm, frame.D, bits, start_share)
        start_dht = FederatedQuantile(
            range_upper(max_items, max_count=max_count), bits, t, m_start, sizes[0], "dht", sum_bits
        )
    estimate = np.zeros(frame.d)
    clips: list[float] = []
    levels: list[float] = []
    noise_sq = 0.0
    first = 0
    for r, size in enumerate(sizes):
        part = users.subset(np.arange(first, first + size))
        first += size
        reps = Representations(part, frame)
        m_r = m_first if r == 0 else mm
        if r == 0 and start == "dht":
            agg0 = aggregator(secure_sum_modulus(size, m_start, sum_bits), start_dht.dimension)
            release = start_dht.run(reps.norms(), g, rng, agg0)
            c = release.estimate  # a given gamma: its quantile (Algorithm 5), as in TFFE
            if gamma is None:
                c = histogram_clip(release.prefix, start_dht, noise_slope(frame.D, mm, n, t), g)
                level_1 = level_at(release.prefix, start_dht, c)
                g = min(g, level_1) if level_1 > 0 else g  # the update holds C there
        x_r = frequency_phase(
            reps.batches(), frame, size, t, m_r, c, rng, aggregator=aggregator, sum_bits=sum_bits
        )
        above = (reps.norms() > c).astype(np.int8)[:, None]
        agg = aggregator(secure_sum_modulus(size, mq, sum_bits), 1)
        total = agg.aggregate(
            encode_signs(above[i : i + BATCH], tq, mq, rng) for i in range(0, size, BATCH)
        )
        frac_above = float(cpbm_decode(total, size, mq, tq, 1.0)[0])
        level = 1.0 - frac_above
        estimate += (size / n) * x_r
        clips.append(c)
        levels.append(level)
        noise_sq += (size / n) ** 2 * (c * noise_slope(frame.D, m_r, size, t, fn)) ** 2
        c = c * math.exp(-e * (level - g))
        if progress is not None:
            progress(size)
    noise = math.sqrt(noise_sq)
    return FfeResult(
        estimate=estimate,
        protocol="mffe",
        clips=tuple(clips),
        gamma=g,
        m=mm,
        m_quantile=mq,
        theta=t,
        rdp=mffe_rdp(sizes, t, mm, frame.D, mq, tq),
        bound_estimate=math.nan,
        noise_bound=noise,
        n_users=n,
        dimension=frame.d,
        frame_dimension=frame.D,
        extra={
            "levels": tuple(levels),
            "round_sizes": tuple(sizes),
            "eta": e,
            "theta_quantile": tq,
            "start": start,
            "start_m_quantile": m_start,
            "first_round_m": m_first,
        },
    )
