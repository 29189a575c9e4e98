"""Caps users need not guess: data-independent defaults and a DP quantile of user degrees.

A user-level release needs a cap: ``Delta0`` (``max_keys``), the most keys a user keeps for the
weighted selectors, or ``k`` (``max_partitions_contributed``) for count mechanisms. Too small a
cap throws most of each user's data away; too large a one adds noise (``sqrt(k)`` for Gaussian
counts, ``k`` for per-key Laplace composition) or spreads a user's unit of weight thin.

Defaults (data-independent, measured by ``benchmarks/bench_user_level.py`` on ``retail.dat`` and
``anonymous-msweb.data``; see the README section "User-level histograms"):

* :data:`DEFAULT_SELECTOR_CAP` = 20 for WGM, DP-SIPS and cumulative-sips. Keys released by
  DP-SIPS at (1, 1e-8) against ``Delta0`` = 1, 2, 5, 10, 20, 50, 100 (mean of 2 runs):
  ``retail.dat`` 505, 817, 1,336, 1,644, 1,751, 1,728, 1,676; ``anonymous-msweb.data`` 136, 145,
  146, 145, 143, 142, 138. 20 is the best cap on retail and within 2% of the best on msweb (WGM
  is flat from 20 to 100 on both).
  A larger cap spreads a heavy user's unit of weight over keys others already carry; a smaller
  one drops the keys of users holding many. The same cap serves cumulative-sips (the user-level
  default): for ``Delta0`` = 1..100 as above (mean of 2 runs) retail 347, 708, 1,404, 1,921,
  2,220, 2,294, 2,247; msweb 98, 124, 146, 152, 152, 153, 152; msweb.test 28, 38, 52, 51, 52,
  52, 48: 20 is within 4% of the best on each.
* :data:`DEFAULT_COUNT_CAP` = 10 for Gaussian thresholding on counts (``k``): retail 316, 503,
  874, 1,069, 1,019, 589, 338 keys for k = 1..100 as above (peak at 10), msweb 94, 104, 108, 99,
  80, 58, 46 (10 within 9% of the best, 5). On msweb's 5,000 held-out users
  (``anonymous-msweb.test``, mean of 2 runs) DP-SIPS releases 36, 44, 47, 47, 46, 44, 43 keys
  for ``Delta0`` = 1..100 (20 within 2% of the best) and Gaussian thresholding 24, 28, 30, 24,
  18, 12, 9 for k = 1..100 (10 is 20% below the best, 5, on this small sample). The count step
  of the selectors uses 20 (``DEFAULT_COUNT_MAX_KEYS``): it counts only already selected keys,
  and on retail its mean absolute error is lower at 20 (37) than at 10 (63) or 50 (57).

* ``c`` (records per user and key) defaults to 1 for per-key mechanisms: on ``retail.dat`` and
  ``anonymous-msweb.data`` every user holds exactly one record per key (the records histogram
  over :data:`RECORD_CAP_CANDIDATES` is ``[88162, 0, ...]`` and ``[32711, 0, ...]``), so
  ``c = 1`` loses nothing there and any larger ``c`` only adds noise. No third user-level
  dataset is in the shared data (``adult.data`` holds one record per person and the Shakespeare
  text has no users), so these defaults rest on the two datasets (and msweb's held-out
  ``anonymous-msweb.test`` users, swept by the benchmark).

DP cap (``auto``). :func:`dp_degree_cap` releases a histogram of users by their number of
distinct keys over the public buckets :data:`CAP_CANDIDATES` (each user falls in exactly one
bucket, so adding or removing a user changes one count by 1: L1 and L2 sensitivity 1) with
discrete Gaussian noise of variance ``1 / (2 rho_q)`` (``rho_q``-zCDP, CKS 2020 Theorem 14) or
discrete Laplace noise of scale ``1 / epsilon_q`` (``epsilon_q``-DP, CKS Algorithm 2), and takes
as cap the smallest candidate below which the noisy counts put at least a ``quantile`` share of
the users (post-processing). With Gaussian noise the spend composes *exactly* with the zCDP
selectors (the two rho add; :func:`auto_selector` gives the selector ``spent_rho``, which its
``certified_delta`` includes); with Laplace noise, ``epsilon_q`` composes with a per-key
mechanism run at ``(epsilon - epsilon_q, delta)`` by basic composition
(:func:`auto_count_cap`).

DP records cap (``max_per_partition="auto"``). :func:`dp_record_cap` does the same for ``c``
from the histogram of users by their *largest* number of records on one key over
:data:`RECORD_CAP_CANDIDATES` (one bucket per user, so sensitivity 1 again; a histogram of
(user, key) pairs by multiplicity would not be, as one user holds many pairs), with discrete
Laplace noise of scale ``1 / epsilon_c`` (``epsilon_c``-DP). The Session spends 5% of epsilon on
each cap it chooses and runs the per-key mechanism, built for every candidate ``(k, c)`` before
any data is read, at ``(epsilon - epsilon_k - epsilon_c, delta)``: basic composition gives
``(epsilon, delta)`` for the whole, charged as one spend.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource, SecureRandom
from privhist.core.validation import check_probability
from privhist.core.weighted import WeightedSource
from privhist.mechanisms.user_level._gauss import calibrate, sigma2_for
from privhist.mechanisms.user_level.selectors import (
    DEFAULT_MAX_KEYS,
    DEFAULT_THRESHOLD_SHARE,
    WeightedSelector,
)
from privhist.noise import discrete_gaussian, discrete_laplace, rational_at_least

#: the public buckets (and possible caps) of the DP degree quantile
CAP_CANDIDATES: Final[tuple[int, ...]] = (1, 2, 3, 5, 10, 20, 30, 50, 100, 200, 500, 1000)
DEFAULT_SELECTOR_CAP: Final[int] = DEFAULT_MAX_KEYS
DEFAULT_COUNT_CAP: Final[int] = 10
#: the public buckets (and possible caps) of the DP records-per-key quantile
RECORD_CAP_CANDIDATES: Final[tuple[int, ...]] = (1, 2, 3, 5, 10, 20, 50, 100)
#: default quantile of user degrees and share of the budget spent on it
DEFAULT_QUANTILE: Final[float] = 0.9
DEFAULT_CAP_FRACTION: Final[float] = 0.05


@dataclass(frozen=True)
class CapChoice:
    """A cap chosen with differential privacy, with what it cost."""

    cap: int
    noisy_histogram: npt.NDArray[np.int64]
    quantile: float
    noise: str  # "discrete_gaussian" or "discrete_laplace"
    rho: Fraction | None = None  # zCDP spent (Gaussian)
    epsilon: float | None = None  # pure DP spent (Laplace)
    candidates: tuple[int, ...] = CAP_CANDIDATES

    def to_dict(self) -> dict[str, Any]:
        return {
            "cap": self.cap,
            "quantile": self.quantile,
            "noise": self.noise,
            "rho": None if self.rho is None else float(self.rho),
            "epsilon": self.epsilon,
            "buckets": list(self.candidates),
            "noisy_histogram": self.noisy_histogram.tolist(),
        }


def cap_from_histogram(
    noisy: npt.ArrayLike, quantile: float, candidates: tuple[int, ...] = CAP_CANDIDATES
) -> int:
    """The smallest candidate cap whose bucket and those below hold at least a ``quantile`` share
    of the (noisy, clipped at 0) users; the largest candidate when none does.

    >>> cap_from_histogram([5, 3, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0], 0.8)
    2
    """
    h = np.maximum(np.asarray(noisy, dtype=np.float64), 0.0)
    total = h.sum()
    if total <= 0:
        return candidates[0]
    share = np.cumsum(h[: len(candidates)]) / total
    hit = np.flatnonzero(share >= quantile)
    return candidates[int(hit[0])] if hit.size else candidates[-1]


def dp_degree_cap(
    histogram: npt.ArrayLike,
    *,
    quantile: float = DEFAULT_QUANTILE,
    rho: Fraction | float | None = None,
    epsilon: float | None = None,
    rng: RandomSource | None = None,
    candidates: tuple[int, ...] = CAP_CANDIDATES,
    function: str = "dp_degree_cap",
) -> CapChoice:
    """A DP quantile of user degrees from the exact ``histogram`` over ``candidates``
    (:data:`CAP_CANDIDATES`; :func:`dp_record_cap` passes :data:`RECORD_CAP_CANDIDATES`).

    Give exactly one of ``rho`` (discrete Gaussian, ``rho``-zCDP) or ``epsilon`` (discrete
    Laplace, ``epsilon``-DP).
    """
    fn = function
    q = check_probability(quantile, fn, "quantile", open_low=True)
    h = np.asarray(histogram)
    if h.shape != (len(candidates) + 1,) or (h.size and h.dtype.kind not in "iu"):
        raise ValidationError(
            "histogram", fn, f"{len(candidates) + 1} integer counts", f"shape {h.shape}"
        )
    rng = rng or SecureRandom()
    if (rho is None) == (epsilon is None):
        raise ValidationError("rho", fn, "given exactly when epsilon is not", (rho, epsilon))
    if rho is not None:
        r = Fraction(rho)
        if r <= 0:
            raise ValidationError("rho", fn, "> 0", rho)
        noisy = h.astype(np.int64) + discrete_gaussian(sigma2_for(r, 1), rng, h.size)
        cap = cap_from_histogram(noisy, q, candidates)
        return CapChoice(cap, noisy, q, "discrete_gaussian", rho=r, candidates=candidates)
    assert epsilon is not None
    if not epsilon > 0:
        raise ValidationError("epsilon", fn, "> 0", epsilon)
    scale = rational_at_least(1 / Fraction(epsilon), 2**20)
    noisy = h.astype(np.int64) + discrete_laplace(scale, rng, h.size)
    return CapChoice(
        cap_from_histogram(noisy, q, candidates),
        noisy,
        q,
        "discrete_laplace",
        epsilon=float(epsilon),
        candidates=candidates,
    )


def dp_record_cap(
    histogram: npt.ArrayLike,
    *,
    quantile: float = DEFAULT_QUANTILE,
    epsilon: float,
    rng: RandomSource | None = None,
) -> CapChoice:
    """A DP cap ``c`` (records per user and key): the ``quantile`` of users' largest number of
    records on one key, from the exact ``histogram`` over :data:`RECORD_CAP_CANDIDATES`
    (:meth:`privhist.engines.local.weighting.LocalWeightedSource.records_histogram`).

    Each user falls in one bucket (sensitivity 1), so discrete Laplace noise of scale
    ``1 / epsilon`` makes the noisy histogram, and the cap read from it, ``epsilon``-DP
    (CKS 2020, Algorithm 2; post-processing).

    >>> from privhist import SeededRandom
    >>> h = [0, 950, 0, 0, 50, 0, 0, 0, 0]  # 950 users hold at most 2 records per key
    >>> dp_record_cap(h, epsilon=1.0, rng=SeededRandom(0)).cap
    2
    """
    return dp_degree_cap(
        histogram,
        quantile=quantile,
        epsilon=epsilon,
        rng=rng,
        candidates=RECORD_CAP_CANDIDATES,
        function="dp_record_cap",
    )


def auto_selector(
    cls: type[WeightedSelector],
    epsilon: float,
    delta: float,
    source: WeightedSource,
    *,
    quantile: float = DEFAULT_QUANTILE,
    cap_fraction: float = DEFAULT_CAP_FRACTION,
    rng: RandomSource | None = None,
    **options: Any,
) -> tuple[WeightedSelector, CapChoice]:
    """A selector of class ``cls`` whose ``max_keys`` is a DP ``quantile`` of user degrees.

    ``cap_fraction`` of the zCDP budget that ``(epsilon, delta)`` allows goes to the quantile; the
    selector is built with the rest (``spent_rho``), so its ``certified_delta`` covers both parts
    (zCDP composes by adding rho, exactly).
    """
    fn = "auto_selector"
    f = check_probability(cap_fraction, fn, "cap_fraction", open_low=True, open_high=True)
    share = options.get("threshold_share", DEFAULT_THRESHOLD_SHARE)
    rho, _ = calibrate(epsilon, delta, share)
    rho_q = rho * Fraction(f)
    choice = dp_degree_cap(
        source.degree_histogram(CAP_CANDIDATES), quantile=quantile, rho=rho_q, rng=rng
    )
    return cls(epsilon, delta, max_keys=choice.cap, spent_rho=rho_q, **options), choice


def auto_count_cap(
    source: WeightedSource,
    epsilon: float,
    *,
    quantile: float = DEFAULT_QUANTILE,
    cap_fraction: float = DEFAULT_CAP_FRACTION,
    rng: RandomSource | None = None,
) -> tuple[CapChoice, float]:
    """A DP cap ``k`` for a per-key (pure-DP part) mechanism: ``cap_fraction * epsilon`` on the
    quantile (discrete Laplace); returns the choice and the epsilon left for the mechanism
    (basic composition: run it at ``(epsilon - spent, delta)``)."""
    fn = "auto_count_cap"
    f = check_probability(cap_fraction, fn, "cap_fraction", open_low=True, open_high=True)
    eps_q = float(epsilon) * f
    choice = dp_degree_cap(
        source.degree_histogram(CAP_CANDIDATES), quantile=quantile, epsilon=eps_q, rng=rng
    )
    return choice, float(epsilon) - eps_q
