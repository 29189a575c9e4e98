"""The two metrics of Section 5: mean absolute error per bucket (Figure 1) and top-k recall
(Figure 2)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from privhist.core.errors import ValidationError


def mean_absolute_error(estimates: npt.ArrayLike, truth: npt.ArrayLike, population: int) -> float:
    """Mean over buckets of ``|estimate - true count|``, as a fraction of the population size
    (the y-axis of the paper's Figure 1).

    Buckets a mechanism does not report have estimate 0.

    >>> mean_absolute_error([10.0, 0.0, 5.0], [12, 1, 5], 100)
    0.01
    """
    est = np.asarray(estimates, dtype=np.float64)
    tru = np.asarray(truth, dtype=np.float64)
    if est.shape != tru.shape or est.ndim != 1 or est.size == 0:
        raise ValidationError(
            "estimates",
            "mean_absolute_error",
            f"a non-empty vector shaped like truth {tru.shape}",
            f"shape {est.shape}",
        )
    if population <= 0:
        raise ValidationError("population", "mean_absolute_error", "> 0", population)
    return float(np.abs(est - tru).mean() / population)


def top_k_recall(
    estimates: npt.ArrayLike,
    truth: npt.ArrayLike,
    k: int,
    reported: npt.ArrayLike | None = None,
) -> float:
    """Recall of the true top-``k`` buckets among the ``k`` largest reported estimates
    (Section 5, "Recall results": "whether the histogram correctly reports the (true) top-10% of
    items among the 10% of largest items recovered").

    Only buckets with a positive true count can be heavy, so ``k`` is first lowered to the number
    of such buckets, ``k'``. The true top set is every bucket whose count is at least the
    ``k'``-th largest count (so ties at the boundary are not decided by bucket order); the
    recovered set is the ``k'`` reported buckets with the largest estimates (ties broken by
    bucket index); the recall is the fraction of the recovered set that is in the true top set.
    ``reported`` marks the buckets a mechanism reports (sample-and-threshold: the released ones;
    default: all). With fewer than ``k'`` reported buckets the missing ones count as misses.

    >>> top_k_recall([9.0, 0.0, 7.0, 1.0], [10, 8, 6, 1], 2)
    0.5
    >>> top_k_recall([9.0, 8.0, 0.0, 0.0], [10, 8, 6, 1], 2, reported=[True, True, False, False])
    1.0
    """
    est = np.asarray(estimates, dtype=np.float64)
    tru = np.asarray(truth, dtype=np.int64)
    fn = "top_k_recall"
    if est.shape != tru.shape or est.ndim != 1:
        raise ValidationError(
            "estimates", fn, f"a vector shaped like truth {tru.shape}", f"shape {est.shape}"
        )
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValidationError("k", fn, "an integer >= 1", k)
    positive = int(np.count_nonzero(tru > 0))
    if positive == 0:
        raise ValidationError("truth", fn, "at least one positive count", "all zero")
    kk = min(int(k), positive)
    cutoff = np.sort(tru)[::-1][kk - 1]
    idx = np.arange(est.size)
    cand = idx if reported is None else idx[np.asarray(reported, dtype=np.bool_)]
    chosen = cand[np.lexsort((cand, -est[cand]))][:kk]
    hits = int(np.count_nonzero(tru[chosen] >= cutoff))
    return hits / kk
