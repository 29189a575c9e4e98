"""``privhist simulate sample-and-threshold``: one federated round over a simulated fleet.

The population comes from a file (one client per record, its ``--key`` value being the client's
item; ``--text`` files give one client per word) or from ``--zipf N`` (``N`` clients over
``--support`` items in deterministic Zipf proportions). The round is
:func:`privhist.federated.sample_threshold.simulate_round`; the release summary and its error
against the true counts (known only because this is a simulation) are printed.

**Fixed-size cohorts** (Section 3.2): ``--cohort-size M`` samples at rate ``M / N`` where ``N`` is
``--population-bound``, a *public* upper bound on the number of clients (for ``--zipf N`` it
defaults to ``N``, the simulated fleet's declared size). The rate and the cohort's failure
probability are never taken from the data: the number of clients read from a file is private,
so a file needs an explicit bound, and a file with more clients than the bound is refused.
"""

from __future__ import annotations

import argparse
from fractions import Fraction
from typing import Any

from privhist.cli.common import INPUT_FORMAT_HELP, SECURE_SUM_HELP, counted
from privhist.core.errors import ValidationError

FN = "simulate sample-and-threshold"


def register(sub: Any) -> None:
    p = sub.add_parser("simulate", help="simulate a federated protocol round")
    inner = p.add_subparsers(dest="protocol", metavar="PROTOCOL", required=True)
    s: argparse.ArgumentParser = inner.add_parser(
        "sample-and-threshold", help="server samples, clients send items, aggregator thresholds"
    )
    s.add_argument("input", nargs="?", help="file of client items (one client per record)")
    s.add_argument("--key", help="the column holding each client's item")
    s.add_argument("--text", action="store_true", help="plain text: one client per word")
    s.add_argument("--format", help=INPUT_FORMAT_HELP)
    s.add_argument("--zipf", type=int, metavar="N", help="simulate N clients with Zipf items")
    s.add_argument("--support", type=int, default=2**14, help="Zipf: number of items (2^14)")
    s.add_argument("--exponent", type=float, default=1.1, help="Zipf exponent (1.1)")
    s.add_argument("--epsilon", type=float, required=True, help="epsilon of the round's release")
    s.add_argument("--delta", type=float, required=True, help="delta of the round's release")
    s.add_argument("--sampling-rate", type=float, help="Poisson rate p in (0, 1 - e^-eps]")
    s.add_argument("--threshold", type=int, help="release items sampled at least this often")
    s.add_argument(
        "--cohort-size",
        type=int,
        metavar="M",
        help="fixed-size cohort with M expected participants (rate M / population bound; "
        "Section 3.2)",
    )
    s.add_argument(
        "--population-bound",
        type=int,
        metavar="N",
        help="public upper bound on the clients, for --cohort-size (default: --zipf N)",
    )
    s.add_argument("--slack", type=float, default=10.0, help="cohort slack c in m + c sqrt(m)")
    s.add_argument("--top", type=int, default=10, help="rows of the summary (10)")
    s.add_argument("--seed", type=int, help="reproducible, NOT private randomness")
    s.add_argument("--no-progress", action="store_true", help="no progress display")
    s.add_argument(
        "--secure-sum",
        choices=["ideal", "secagg", "secagg+"],
        default="ideal",
        help=SECURE_SUM_HELP,
    )
    s.set_defaults(run=run)


def _population(args: argparse.Namespace) -> Any:
    from privhist.federated.population import Population

    if args.zipf is not None:
        if args.input is not None:
            raise ValidationError("--zipf", FN, "not given together with an INPUT file", args.zipf)
        return Population.zipf(args.zipf, args.support, args.exponent)
    if args.input is None:
        raise ValidationError("INPUT", FN, "a file, or --zipf N", None)
    fmt = "text" if args.text else args.format
    if fmt != "text" and args.key is None:
        raise ValidationError("--key", FN, "given for a table file (or use --text)", None)
    from privhist.engines.local.federated_data import read_population

    return read_population(
        args.input, key=args.key or "key", format=fmt, progress=not args.no_progress
    )


def _population_bound(args: argparse.Namespace) -> int | None:
    """The public bound ``N`` of a fixed-size cohort (None without ``--cohort-size``)."""
    if args.cohort_size is None:
        if args.population_bound is not None:
            raise ValidationError(
                "--population-bound", FN, "given only with --cohort-size", args.population_bound
            )
        return None
    if args.sampling_rate is not None:
        raise ValidationError(
            "--cohort-size",
            FN,
            "not given with --sampling-rate (it sets the rate)",
            args.sampling_rate,
        )
    bound = args.population_bound
    if bound is None:
        if args.zipf is None:
            raise ValidationError(
                "--population-bound",
                FN,
                "given with --cohort-size for a file: a public upper bound on the clients (the "
                "rate M / N must not come from the number of clients in the data)",
                None,
            )
        bound = args.zipf
    if bound < 2:
        raise ValidationError("--population-bound", FN, "an integer >= 2", bound)
    if not 1 <= args.cohort_size < bound:
        raise ValidationError(
            "--cohort-size",
            FN,
            f"between 1 and the population bound minus one ({bound - 1})",
            args.cohort_size,
        )
    return int(bound)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from privhist.core.random import default_source
    from privhist.federated.sample_threshold import simulate_round
    from privhist.mechanisms.sampling.cohort import FixedSizeCohort
    from privhist.mechanisms.sampling.sample_threshold import SampleAndThreshold

    if args.top < 0:
        raise ValidationError("--top", FN, "an integer >= 0", args.top)
    rate: Any = args.sampling_rate
    bound = _population_bound(args)
    if bound is not None:
        rate = Fraction(args.cohort_size, bound)
    # every parameter is fixed (and checked) before the data is read
    mech = SampleAndThreshold(
        args.epsilon, args.delta, sampling_rate=rate, threshold=args.threshold
    )
    cohort = None
    if bound is not None:
        cohort = FixedSizeCohort(bound, mech.sampling_rate, slack=args.slack)
    pop = _population(args)
    rng = default_source(args.seed)
    from privhist.federated.secagg.aggregator import secure_sum_option

    res = simulate_round(
        pop, mech, rng, cohort=cohort, secure_sum=secure_sum_option(args.secure_sum)
    )
    r, d = res.release, res.diagnostics
    g = r.metadata["guarantee"]
    print(f"guarantee      {g['statement']}")
    print(f"sampling_rate  {float(mech.sampling_rate):.6g}")
    print(f"threshold      {mech.threshold}")
    if cohort is not None:
        contacted = counted(cohort.cohort_size, "client")
        print(f"cohort         {contacted} contacted, {counted(d.dummies, 'dummy', 'dummies')}")
    print(f"released       {counted(len(r), 'item')}")
    if r.values is not None and r.estimates is not None and args.top:
        order = np.lexsort((np.arange(len(r)), -r.values))[: args.top].tolist()
        print(f"{'item':<24} {'sampled':>10} {'estimate':>14} {'true':>14}")
        for i in order:
            true = int(d.true_counts_of_released[i])
            print(f"{r.keys[i]!s:<24} {int(r.values[i]):>10} {r.estimates[i]:>14.1f} {true:>14}")
    print("simulation diagnostics (exact, NOT private):")
    print(f"  clients                    {d.clients}")
    print(f"  distinct items             {d.distinct_items}")
    print(f"  participants               {d.participants}")
    print(f"  mean absolute error        {d.mean_absolute_error:.6g}")
    print(f"  mean abs error / clients   {d.mean_absolute_error_fraction:.3e}")
    print(f"  max absolute error         {d.max_absolute_error:.6g}")
    if not rng.private:
        print("warning        seeded randomness: reproducible and NOT private")
    return 0
