"""The runner: calibration per epsilon, one (dataset, B, epsilon) cell at a time (in worker
processes if asked), and TrieHH++ on the Shakespeare words."""

from __future__ import annotations

import concurrent.futures
import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from privhist.core.errors import PrivhistError, ValidationError
from privhist.core.random import SeededRandom
from privhist.experiments import _common
from privhist.experiments.sample_threshold.data import (
    Words,
    bucket_distribution,
    read_words,
    sample_histogram,
)
from privhist.experiments.sample_threshold.metrics import mean_absolute_error, top_k_recall
from privhist.experiments.sample_threshold.settings import (
    ALPHA,
    BASELINES,
    DATASETS,
    DELTA,
    HH_EPSILON,
    HH_LEVELS,
    HH_TOP,
    I64,
    MECHANISMS,
    PAPER_THRESHOLD,
    Settings,
)
from privhist.mechanisms.sampling.sample_threshold import sample_units


@dataclass(frozen=True)
class Calibration:
    """The sample-and-threshold parameters at one epsilon: the rate and both thresholds."""

    epsilon: float
    sampling_rate: Fraction
    threshold_paper: int
    threshold_exact: int
    threshold_theorem1: int
    delta_paper: float
    delta_exact: float


def calibrate(epsilon: float, delta: float = DELTA, alpha: Fraction = ALPHA) -> Calibration:
    """Rate ``alpha (1 - e^-eps)``, the paper's ``tau = 20`` and the exact smallest ``tau``, each
    certified by :class:`~privhist.mechanisms.sampling.SampleAndThreshold`."""
    from privhist.mechanisms.sampling import SampleAndThreshold
    from privhist.mechanisms.sampling.profile import chernoff_threshold

    exact = SampleAndThreshold(epsilon, delta, alpha=alpha)
    p = exact.sampling_rate
    paper = SampleAndThreshold(epsilon, delta, sampling_rate=p, threshold=PAPER_THRESHOLD)
    return Calibration(
        epsilon=epsilon,
        sampling_rate=p,
        threshold_paper=paper.threshold,
        threshold_exact=exact.threshold,
        threshold_theorem1=chernoff_threshold(float(p), epsilon, delta),
        delta_paper=paper.delta_exact,
        delta_exact=exact.delta_exact,
    )


# -- one configuration --------------------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    """One (dataset, B, epsilon) cell of the grid, with everything a worker process needs."""

    dataset: str
    buckets: int
    calibration: Calibration
    population: int
    reps: int
    seed: int
    delta: float
    baselines: bool
    words: Words | None = None


@dataclass
class Cell:
    """Per-repetition metrics of every mechanism in one cell."""

    task: Task
    truth_total: int
    zero_mae: float
    mae: dict[str, list[float]] = field(default_factory=dict)
    recall: dict[str, list[float]] = field(default_factory=dict)
    released: dict[str, list[float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: the k-th largest true count (k = B/10) over the population size
    kth_fraction: float = math.nan


_POPULATIONS: dict[tuple[str, int, int, int], I64] = {}


def population_counts(task: Task) -> I64:
    """The fixed population histogram of a (dataset, B) pair (cached per process)."""
    key = (task.dataset, task.buckets, task.population, task.seed)
    if key not in _POPULATIONS:
        if task.dataset == "shakespeare":
            if task.words is None:
                raise ValidationError("words", "population_counts", "given for shakespeare", None)
            counts = task.words.histogram(task.buckets)
        else:
            rng = SeededRandom(_common.derived_seed(task.seed, "population", *key[:3]))
            pmf = bucket_distribution(task.dataset, task.buckets)
            counts = sample_histogram(pmf, task.population, rng)
        _POPULATIONS[key] = counts
    return _POPULATIONS[key]


def _baselines(task: Task) -> tuple[list[tuple[str, Any]], list[str]]:
    """The baseline mechanisms of one cell, and notes on those that cannot be calibrated."""
    if not task.baselines:
        return [], []
    from privhist.federated import baselines as fb

    eps, delta, b = task.calibration.epsilon, task.delta, task.buckets
    p = float(task.calibration.sampling_rate)
    out: list[tuple[str, Any]] = [("central", fb.CentralGeometric(eps, delta, b, sampling_rate=p))]
    notes = []
    # every contacted client sends noise, so n_clients is the cohort the paper's fixed-size
    # scheme contacts (Section 3.2): m + c sqrt(m) for the expected sample m = p n, c = 10;
    # the sample exceeds it with probability below exp(-c^2 / 3) = 3e-15
    m = p * _clients(task)
    cohort = math.ceil(m + 10 * m**0.5)
    try:
        out.append(("shuffle", _shuffle(eps, delta, cohort, b)))
    except ValidationError as exc:
        notes.append(
            f"shuffle Bernoulli left out for {task.dataset}, B = {b}, epsilon = {eps}: "
            f"no calibration for {cohort} clients ({exc})"
        )
    out.append(("hadamard", fb.HadamardResponse(eps, b)))
    return out, notes


@functools.lru_cache(maxsize=64)
def _shuffle(epsilon: float, delta: float, clients: int, buckets: int) -> Any:
    """One exactly calibrated shuffle baseline per parameters (the calibration is the costly
    part; the binomial and geometric cells of one (B, epsilon) share it)."""
    from privhist.federated.baselines import ShuffleBernoulli

    return ShuffleBernoulli(epsilon, delta, clients, buckets)


def _clients(task: Task) -> int:
    return task.words.tokens if task.dataset == "shakespeare" and task.words else task.population


def run_cell(task: Task) -> Cell:
    """All repetitions of all mechanisms in one cell.

    Each repetition draws one Poisson sample of the clients with the mechanism's own sampling
    step (:func:`~privhist.mechanisms.sampling.sample_threshold.sample_units`, Section 3.1) and
    gives it to every mechanism: both thresholds keep the buckets whose sampled count reaches
    ``tau`` and estimate ``count / p``, as
    :meth:`~privhist.mechanisms.sampling.SampleAndThreshold.release` does; the baselines see the
    sampled clients (compared "while sampling the same expected number of clients", end of
    Section 3.3).
    ``release`` is not called itself because it would draw a fresh sample per threshold.
    """
    truth = population_counts(task)
    n = int(truth.sum())
    cal = task.calibration
    p = cal.sampling_rate
    pf = float(p)
    k = max(1, task.buckets // 10)
    rng = SeededRandom(
        _common.derived_seed(task.seed, "mechanisms", task.dataset, task.buckets, cal.epsilon)
    )
    cell = Cell(task, n, mean_absolute_error(np.zeros(truth.size), truth, n))
    cell.kth_fraction = float(np.sort(truth)[::-1][k - 1]) / n
    thresholds = {"st-paper": cal.threshold_paper, "st-exact": cal.threshold_exact}
    baselines, cell.notes = _baselines(task)
    for name in [*thresholds, *(b[0] for b in baselines)]:
        cell.mae[name], cell.recall[name] = [], []
    bucket_ids = np.arange(task.buckets, dtype=np.int64)
    for _ in range(task.reps):
        sampled = sample_units(truth, p, rng)
        for name, tau in thresholds.items():
            released = sampled >= tau
            est = np.where(released, sampled / pf, 0.0)
            cell.mae[name].append(mean_absolute_error(est, truth, n))
            cell.recall[name].append(top_k_recall(est, truth, k, reported=released))
            cell.released.setdefault(name, []).append(float(released.mean()))
        if baselines:
            items = np.repeat(bucket_ids, sampled)
            for name, mech in baselines:
                est = np.asarray(mech.estimate(items, rng), dtype=np.float64) / pf
                cell.mae[name].append(mean_absolute_error(est, truth, n))
                cell.recall[name].append(top_k_recall(est, truth, k))
    return cell


def _run_cell_in_worker(task: Task) -> Cell | str:
    """:func:`run_cell` for a worker process: privhist errors come back as their message (their
    exception classes do not survive pickling)."""
    try:
        return run_cell(task)
    except PrivhistError as exc:
        return f"{task.dataset}, B = {task.buckets}, epsilon = {task.calibration.epsilon}: {exc}"


def _unwrap(result: Cell | str) -> Cell:
    if isinstance(result, str):
        raise PrivhistError(result)
    return result


def cell_rows(cell: Cell, figure: str) -> list[dict[str, Any]]:
    """The CSV rows (one per mechanism) of a finished cell."""
    t, cal = cell.task, cell.task.calibration
    rows = []
    for name in cell.mae:
        mae_m, mae_s = _common.mean_se(cell.mae[name])
        rec_m, rec_s = _common.mean_se(cell.recall[name])
        rel = cell.released.get(name)
        tau: int | None = {"st-paper": cal.threshold_paper, "st-exact": cal.threshold_exact}.get(
            name
        )
        rows.append(
            {
                "dataset": t.dataset,
                "buckets": t.buckets,
                "figure": figure,
                "population": cell.truth_total,
                "epsilon": cal.epsilon,
                "delta": t.delta,
                "mechanism": name,
                "sampling_rate": float(cal.sampling_rate),
                "threshold": tau,
                "reps": t.reps,
                "mae_mean": mae_m,
                "mae_se": mae_s,
                "recall_mean": rec_m,
                "recall_se": rec_s,
                "k": max(1, t.buckets // 10),
                "released_fraction_mean": _common.mean_se(rel)[0] if rel else math.nan,
                "zero_mae": cell.zero_mae,
                "kth_fraction": cell.kth_fraction,
            }
        )
    return rows


# -- the whole grid -----------------------------------------------------------------------------


@dataclass
class Results:
    """Everything an experiment run measured, before anything is written."""

    settings: Settings
    rows: list[dict[str, Any]]
    calibrations: list[Calibration]
    datasets: tuple[str, ...]
    baselines: tuple[str, ...]
    notes: list[str]
    heavy_hitters: list[dict[str, Any]]
    seconds: float = 0.0


def run_experiment(
    settings: Settings, progress: Callable[[int, int], None] | None = None
) -> Results:
    """Run the grid (in ``settings.workers`` processes) and return the results.

    ``progress(done, total)`` is called after each finished cell.
    """
    started = time.perf_counter()
    notes: list[str] = []
    words: Words | None = None
    datasets = ["binomial", "geometric"]
    if settings.shakespeare is not None:
        if settings.shakespeare.is_file():
            words = read_words(settings.shakespeare)
            datasets.append("shakespeare")
        else:
            notes.append(
                f"Shakespeare skipped: {settings.shakespeare} is absent (pass --shakespeare PATH)"
            )
    baselines = BASELINES
    calibrations = [calibrate(e, settings.delta) for e in settings.epsilons]
    bucket_sizes = sorted(set(settings.figure1) | set(settings.figure2), reverse=True)
    tasks = [
        Task(
            dataset=d,
            buckets=b,
            calibration=c,
            population=settings.population,
            reps=settings.reps,
            seed=settings.seed,
            delta=settings.delta,
            baselines=bool(baselines),
            words=words if d == "shakespeare" else None,
        )
        for b in bucket_sizes
        for d in datasets
        for c in calibrations
    ]
    cells: list[Cell] = []
    if settings.workers > 1 and len(tasks) > 1:
        with concurrent.futures.ProcessPoolExecutor(settings.workers) as pool:
            futures = [pool.submit(_run_cell_in_worker, t) for t in tasks]
            for fut in concurrent.futures.as_completed(futures):
                cells.append(_unwrap(fut.result()))
                if progress is not None:
                    progress(len(cells), len(tasks))
    else:
        for t in tasks:
            cells.append(run_cell(t))
            if progress is not None:
                progress(len(cells), len(tasks))
    rows = []
    for cell in cells:
        notes.extend(cell.notes)
        fig = "1" if cell.task.buckets in settings.figure1 else "2"
        rows.extend(cell_rows(cell, fig))
    order = {m: i for i, m in enumerate(MECHANISMS)}
    rows.sort(
        key=lambda r: (
            DATASETS.index(r["dataset"]),
            r["buckets"],
            r["epsilon"],
            order[r["mechanism"]],
        )
    )
    hh: list[dict[str, Any]] = []
    if settings.heavy_hitters and words is not None:
        hh = heavy_hitter_recall(words, settings)
    elif words is not None:
        notes.append("heavy hitters (TrieHH++) not run in --quick mode")
    return Results(
        settings=settings,
        rows=rows,
        calibrations=calibrations,
        datasets=tuple(datasets),
        baselines=baselines,
        notes=notes,
        heavy_hitters=hh,
        seconds=time.perf_counter() - started,
    )


def heavy_hitter_recall(
    words: Words,
    settings: Settings,
    *,
    epsilon: float = HH_EPSILON,
    levels: int = HH_LEVELS,
    top: Sequence[int] = HH_TOP,
    level_epsilon: float | None = None,
) -> list[dict[str, Any]]:
    """TrieHH++ (Section 4.1) on the words at total ``(epsilon, delta)`` over ``levels`` levels,
    and the one-shot histogram of whole words (the Remark of Section 4.1) at the same budget:
    recall of the true top-``k`` words over ``settings.reps`` runs.

    Returns the rows of ``heavy_hitters.csv``.
    """
    from privhist.federated.population import Population
    from privhist.federated.triehh import TrieHH, one_shot_heavy_hitters
    from privhist.mechanisms.sampling import SampleAndThreshold

    delta = settings.delta
    pop = Population.from_counts(np.array(words.words, dtype=object), words.counts)
    order = np.lexsort((np.arange(len(words.words)), -words.counts))
    names = np.array(words.words, dtype=object)
    hh = TrieHH(epsilon, delta, levels=levels, level_epsilon=level_epsilon)
    one = SampleAndThreshold(epsilon, delta)
    found: dict[str, list[set[str]]] = {"triehh++": [], "one-shot": []}
    seconds: dict[str, list[float]] = {"triehh++": [], "one-shot": []}
    for rep in range(settings.reps):
        rng = SeededRandom(_common.derived_seed(settings.seed, "heavy-hitters", rep))
        t = time.perf_counter()
        res = hh.run(pop, rng)
        seconds["triehh++"].append(time.perf_counter() - t)
        found["triehh++"].append(set(res.items.tolist()))
        t = time.perf_counter()
        rel = one_shot_heavy_hitters(pop, one, rng)
        seconds["one-shot"].append(time.perf_counter() - t)
        found["one-shot"].append(set(rel.keys.tolist()))
    comp = hh.composition
    info = {
        "triehh++": (
            levels,
            comp.method,
            comp.guarantee.epsilon,
            hh.mechanism.sampling_rate,
            hh.mechanism.threshold,
        ),
        "one-shot": (
            1,
            "single release",
            one.guarantee().epsilon,
            one.sampling_rate,
            one.threshold,
        ),
    }
    rows = []
    for method, runs in found.items():
        lv, how, g_eps, rate, tau = info[method]
        for k in top:
            truth = set(names[order[:k]].tolist())
            mean, se = _common.mean_se([len(truth & f) / k for f in runs])
            rows.append(
                {
                    "method": method,
                    "epsilon": epsilon,
                    "delta": delta,
                    "levels": lv,
                    "composition": how,
                    "guarantee_epsilon": g_eps,
                    "sampling_rate": float(rate),
                    "threshold": tau,
                    "k": k,
                    "reps": settings.reps,
                    "recall_mean": mean,
                    "recall_se": se,
                    "items_found_mean": float(np.mean([len(f) for f in runs])),
                    "seconds_per_run": float(np.mean(seconds[method])),
                }
            )
    return rows
