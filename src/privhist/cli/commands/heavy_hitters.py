"""``privhist heavy-hitters``: TrieHH++ (or its one-shot variant) over a file of client items.

Each record (``--key COLUMN``) or word (``--text``) is one client's item. Prints the items found,
their sampled counts and estimates, and the run's guarantee by basic, advanced and PLD
composition (the tightest is used); ``--output`` writes the items atomically (CSV, JSON or
Parquet by extension), and nothing is written on failure.
"""

from __future__ import annotations

import argparse
from typing import Any

from privhist.cli.common import add_ledger_arguments, charged, open_ledger
from privhist.core.errors import ValidationError

FN = "heavy-hitters"


def register(sub: Any) -> None:
    from privhist.federated.triehh import DEFAULT_ALPHABET, DEFAULT_TERMINATOR

    p = sub.add_parser("heavy-hitters", help="TrieHH++ heavy hitters over client items")
    p.add_argument("input", help="file of client items (one client per record)")
    p.add_argument("--key", help="the column holding each client's item")
    p.add_argument("--text", action="store_true", help="plain text: one client per word")
    p.add_argument("--format", help="input format when the file name does not tell")
    p.add_argument("--epsilon", type=float, required=True, help="total epsilon of the run")
    p.add_argument("--delta", type=float, required=True, help="total delta of the run")
    p.add_argument("--levels", type=int, help="trie levels L (10)")
    p.add_argument("--level-epsilon", type=float, help="per-level epsilon (default: calibrated)")
    p.add_argument(
        "--alphabet", default=DEFAULT_ALPHABET, help=f"item characters ({DEFAULT_ALPHABET!r})"
    )
    p.add_argument("--terminator", default=DEFAULT_TERMINATOR, help="end-of-item character")
    p.add_argument("--drop-unknown", action="store_true", help="drop items outside the alphabet")
    p.add_argument(
        "--one-shot",
        action="store_true",
        help="one sample-and-threshold histogram of whole items (no factor L)",
    )
    p.add_argument("--top", type=int, default=25, help="rows printed (25; 0 = all)")
    p.add_argument("-o", "--output", help="write the items here (.csv, .json, .parquet)")
    p.add_argument("--seed", type=int, help="reproducible, NOT private randomness")
    p.add_argument("--no-progress", action="store_true", help="no progress display")
    p.add_argument("--secure-sum", choices=["ideal", "secagg", "secagg+"], default="ideal")
    add_ledger_arguments(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from privhist.core.random import default_source
    from privhist.federated.population import Population
    from privhist.federated.triehh import TrieHH, check_alphabet, one_shot_heavy_hitters
    from privhist.io.writers import check_destination, write_release
    from privhist.mechanisms.sampling.sample_threshold import SampleAndThreshold

    if args.top < 0:
        raise ValidationError("--top", FN, "an integer >= 0", args.top)
    if args.output is not None:
        check_destination(args.output, function=FN)
    if args.one_shot:
        for flag, value in (("--levels", args.levels), ("--level-epsilon", args.level_epsilon)):
            if value is not None:
                raise ValidationError(
                    flag, FN, "not given with --one-shot (one histogram, no trie levels)", value
                )
    fmt = "text" if args.text else args.format
    if fmt != "text" and args.key is None:
        raise ValidationError("--key", FN, "given for a table file (or use --text)", None)
    rng = default_source(args.seed)
    if args.one_shot:
        mech = SampleAndThreshold(args.epsilon, args.delta)
        ledger = open_ledger(args, mech.guarantee(), FN)
        pop = Population.from_file(
            args.input, key=args.key or "key", format=fmt, progress=not args.no_progress
        )
        kept, dropped = check_alphabet(pop, args.alphabet, args.drop_unknown, FN)
        if kept is None:
            raise ValidationError("--alphabet", FN, "covering at least one item", args.alphabet)
        with charged(ledger, args, mech.guarantee(), f"{FN} --one-shot"):
            release = one_shot_heavy_hitters(kept, mech, rng)
        print(f"guarantee      {release.metadata['guarantee']['statement']} (one-shot)")
        print(f"sampling_rate  {float(mech.sampling_rate):.6g}")
        print(f"threshold      {mech.threshold}")
    else:
        hh = TrieHH(
            args.epsilon,
            args.delta,
            levels=10 if args.levels is None else args.levels,
            alphabet=args.alphabet,
            terminator=args.terminator,
            drop_unknown=args.drop_unknown,
            level_epsilon=args.level_epsilon,
        )
        ledger = open_ledger(args, hh.composition.guarantee, FN)
        pop = Population.from_file(
            args.input, key=args.key or "key", format=fmt, progress=not args.no_progress
        )
        with charged(ledger, args, hh.composition.guarantee, f"{FN} (TrieHH++)"):
            from privhist.federated.secagg.aggregator import secure_sum_option

            result = hh.run(pop, rng, secure_sum=secure_sum_option(args.secure_sum))
        release = result.release()
        dropped = result.diagnostics["dropped_for_alphabet"]
        comp = hh.composition
        print(f"guarantee      {result.metadata['guarantee']['statement']}")
        print(
            f"per level      epsilon {comp.level.epsilon:.6g}, delta {comp.level.delta:.3g}, "
            f"sampling_rate {float(comp.sampling_rate):.6g}, threshold {comp.threshold}"
        )
        for name, b in (("basic", comp.basic), ("advanced", comp.advanced), ("pld", comp.pld)):
            shown = "n/a" if b is None else f"({b.epsilon:.6g}, {b.delta:.3g})"
            mark = "  <- used" if name == comp.method else ""
            print(f"  {name:<12} {shown}{mark}")
    print(f"items          {len(release)}")
    if release.values is not None and release.estimates is not None:
        order = sorted(range(len(release)), key=lambda i: (-int(release.values[i]), i))  # type: ignore[index]
        if args.top:
            order = order[: args.top]
        print(f"{'item':<24} {'sampled':>10} {'estimate':>14}")
        for i in order:
            print(
                f"{release.keys[i]!s:<24} {int(release.values[i]):>10} "
                f"{release.estimates[i]:>14.1f}"
            )
    print(f"not private    clients {pop.size}, dropped for the alphabet {dropped}")
    if not rng.private:
        print("warning        seeded randomness: reproducible and NOT private")
    if args.output is not None:
        write_release(release, args.output)
    return 0
