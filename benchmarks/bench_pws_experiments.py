"""Private weighted sampling experiments: how long the paper's figures take to compute, printed.

    python benchmarks/bench_pws_experiments.py

* Figure 2 (expected fraction of keys reported by PWS and SbH for Zipf[1] and Zipf[2] over
  10**6 keys, eps = 0.1, 33 values of delta from 1 to 1e-8): target <= 30 s;
* Figure 4 (ppswor, 25 values of tau, Zipf[0.5], Zipf[1], Zipf[2]);
* Figures 5-6 (Algorithm 4 matrices, MLE bias / variance / NRMSE, three epsilons);
* the whole ``privhist experiment pws`` computation without the plots.
Each line shows the best of a few runs and, where there is one, the ratio to the target.
"""

from __future__ import annotations

from _harness import best_seconds as best
from _harness import line
from privhist.experiments import pws


def figure2() -> None:
    for a in pws.FIGURE2_ALPHAS:
        v, c = pws.frequency_histogram(pws.zipf_frequencies(pws.ZIPF_KEYS, a))
        pws.fraction_rows_by_delta("z", v, c, pws.FIGURE2_EPSILON, pws.FIGURE2_DELTAS)


def figure4() -> None:
    for a in pws.FIGURE4_ALPHAS:
        v, c = pws.frequency_histogram(pws.zipf_frequencies(pws.ZIPF_KEYS, a))
        pws.fraction_rows_by_tau(
            "z", v, c, pws.SAMPLED_EPSILON, pws.SAMPLED_DELTA, pws.FIGURE4_TAUS
        )


def main() -> None:
    line(
        "Figure 2 (10**6 Zipf keys, 2 alphas x 33 deltas)",
        best(figure2),
        30.0,
        digits=3,
        ratio_digits=3,
    )
    line("Figure 4 (10**6 Zipf keys, 3 alphas x 25 taus, ppswor)", best(figure4), digits=3)
    settings = pws.Settings(retail=None, shakespeare=None)
    res = pws.run_experiment(settings)
    for name, sec in res.timings.items():
        line(f"experiment pws, no plots: {name}", sec, digits=3)


if __name__ == "__main__":
    main()
