"""``privhist plan pws``: end-to-end reporting probabilities of private weighted sampling, and with
``--frequencies`` the sanitized-frequency matrix (Algorithm 4, the certified integer matrix a
release draws from, at any delta) and its estimator table.

Without ``--sampling`` there is no sampling (``q = 1``, the ``pws`` histogram); with
``--sampling ppswor|priority --tau T [--power P]`` the sample is a threshold sample with
``q_i = Pr[u < tau i**P]`` (Cohen, Geri, Sarlos & Stemmer, equation 1).

``--plot FILE`` draws the plan as the other planners draw theirs: Pr[reported] by the key's
frequency, end to end (sampled, then kept by the sanitiser) and, with ``--sampling``, the
sampling probability ``q_i`` it starts from, so the gap between the two curves is what privacy
costs at each frequency.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from privhist.cli.common import add_once, check_plot_path, note, print_report
from privhist.core.errors import ValidationError

NAME = "pws"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_once(
        parser,
        "--sampling",
        choices=["ppswor", "priority"],
        help="[pws] threshold sampling scheme before sanitising (default: no sampling)",
    )
    add_once(parser, "--tau", type=float, help="[pws] sampling threshold tau (> 0)")
    add_once(parser, "--power", type=float, default=1.0, help="[pws] f(i) = i**power (>= 0)")
    add_once(
        parser,
        "--frequencies",
        action="store_true",
        help="[pws] also print the frequency matrix pi_(i,j) and the estimator table",
    )
    add_once(
        parser,
        "--plot",
        metavar="FILE",
        help="[pws] also draw Pr[reported] by frequency, and with --sampling the sampling "
        "probability q_i (PNG/SVG/PDF)",
    )


def build_plan(
    epsilon: float,
    delta: float,
    max_count: int,
    *,
    sampling: str | None = None,
    tau: float | None = None,
    power: float = 1.0,
    frequencies: bool = False,
) -> dict[str, Any]:
    """The plan as a JSON-friendly dict (see the module notes)."""
    import numpy as np

    from privhist.core.validation import check_delta, check_epsilon, check_positive_int
    from privhist.mechanisms._grid import ONE
    from privhist.mechanisms.sampling.pws import estimators as est
    from privhist.mechanisms.sampling.pws.keys import reporting_probabilities, threshold_L
    from privhist.mechanisms.sampling.pws.sanitize import grid_frequency_sanitizer
    from privhist.mechanisms.sampling.pws.schemes import grid_inclusion, inclusion_probabilities
    from privhist.planning.plan import MAX_PLAN_COUNT

    fn = "plan pws"
    eps = check_epsilon(epsilon, fn)
    dl = check_delta(delta, fn, positive=True)
    m = check_positive_int(max_count, fn, "max_count")
    if m > MAX_PLAN_COUNT:
        raise ValidationError("--max-count", fn, f"<= {MAX_PLAN_COUNT} (the largest accepted)", m)
    if sampling is None:
        if tau is not None:
            raise ValidationError("--tau", fn, "given only with --sampling", tau)
        q = np.ones(m + 1)
        q[0] = 0.0
    else:
        if tau is None:
            raise ValidationError("--tau", fn, "a number > 0 with --sampling", None)
        q = inclusion_probabilities(m, sampling, tau, power)  # type: ignore[arg-type]
    pi = reporting_probabilities(q, eps, dl)
    out: dict[str, Any] = {
        "mechanism": "pws",
        "epsilon": eps,
        "delta": dl,
        "sampling": sampling or "none",
        "tau": tau,
        "power": power,
        "L": threshold_L(eps, dl),
        "inclusion_probability": q.tolist(),
        "reporting_probability": pi.tolist(),
    }
    if frequencies:
        if m > 2000:
            raise ValidationError(
                "--max-count", fn, "<= 2000 with --frequencies (the largest accepted)", m
            )
        # the certified matrix a release draws from (on a finer grid below delta = 2**-42)
        Q = np.minimum(np.floor(q * float(ONE)), float(ONE)).astype(np.int64)
        if sampling is not None:
            Q = grid_inclusion(np.arange(m + 1), sampling, tau, power)  # type: ignore[arg-type]
        P = grid_frequency_sanitizer(Q, eps, dl).matrix
        a = est.mle_estimator(P)
        stats = est.estimator_stats(P, a)
        out["frequency_matrix"] = [[float(x) for x in row[: i + 1]] for i, row in enumerate(P)]
        out["estimator_table"] = {
            "estimator": "MLE, equation (9)",
            "estimate_for_token": a.tolist(),
            "bias": stats.bias.tolist(),
            "variance": stats.variance.tolist(),
            "mse": stats.mse.tolist(),
        }
    return out


def plot_plan(plan: dict[str, Any], path: str | Path) -> Path:
    """Draw a plan of :func:`build_plan`: its end-to-end reporting probability by frequency and,
    when it samples, the inclusion probability ``q_i`` of the sample."""
    from privhist.planning.plot import plot_curves

    sampled = plan["sampling"] != "none"
    reported = "Pr[reported]: " + ("sampled, then sanitised" if sampled else "sanitised")
    curves: list[tuple[str, Any]] = [(reported, plan["reporting_probability"])]
    if sampled:
        scheme = f"{plan['sampling']}, tau {plan['tau']:g}, power {plan['power']:g}"
        curves.append((f"Pr[sampled]: q_i ({scheme})", plan["inclusion_probability"]))
    title = (
        "Probability that a key is reported, by its frequency (pws)\n"
        f"({plan['epsilon']:g}, {plan['delta']:g})-DP, element-level neighbours"
    )
    return plot_curves(
        curves,
        path,
        title=title,
        xlabel="frequency of the key",
        ylabel="probability",
        highlight=reported,
    )


def run(args: argparse.Namespace) -> int:
    check_plot_path(args.plot, "plan pws")
    report = build_plan(
        args.epsilon,
        args.delta,
        args.max_count,
        sampling=args.sampling,
        tau=args.tau,
        power=args.power,
        frequencies=args.frequencies,
    )
    if args.plot:
        note(f"plot written to {plot_plan(report, args.plot)}")
    if not args.json:
        rp = report["reporting_probability"]
        half = next((i for i, p in enumerate(rp) if p >= 0.5), None)
        report = {
            "mechanism": "pws",
            "guarantee": f"({report['epsilon']}, {report['delta']})-DP, element-level",
            "sampling": report["sampling"],
            "count_at_half": half,
            "reporting_probability": [round(p, 6) for p in rp],
        }
    print_report(report, args.json)
    return 0
