"""``privhist heavy-hitters``: TrieHH++ (or its one-shot variant) over a file of client items.

Each record (``--key COLUMN``) or word (``--text``) is one client's item. Prints the items found,
their sampled counts and estimates, and the run's guarantee by basic, advanced and PLD
composition (the tightest is used); ``--output`` writes the items atomically (CSV, JSON or
Parquet by extension), and nothing is written on failure. The release runs through
:meth:`privhist.session.Session.heavy_hitters`.
"""

from __future__ import annotations

import argparse
from typing import Any

from privhist.cli.common import (
    INPUT_FORMAT_HELP,
    add_dry_run_arguments,
    add_engine_arguments,
    add_layout_arguments,
    add_ledger_arguments,
    counted,
    layout,
    note,
    print_dry_run,
    session_for,
)
from privhist.core.errors import ValidationError

FN = "heavy-hitters"


def register(sub: Any) -> None:
    p = sub.add_parser("heavy-hitters", help="TrieHH++ heavy hitters over client items")
    from privhist.federated.triehh import DEFAULT_ALPHABET, DEFAULT_TERMINATOR

    p.add_argument("input", help="file of client items (one client per record)")
    p.add_argument("--key", help="the column holding each client's item")
    p.add_argument("--text", action="store_true", help="plain text: one client per word")
    p.add_argument("--input-format", help=INPUT_FORMAT_HELP)
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
    p.add_argument(
        "--confidence",
        type=float,
        default=0.95,
        help="confidence of each item's interval for its number of clients (0.95)",
    )
    p.add_argument("--top", type=int, default=25, help="rows printed (25; 0 = all)")
    p.add_argument("-o", "--output", help="write the items here (.csv, .json, .parquet)")
    p.add_argument("--seed", type=int, help="reproducible, NOT private randomness")
    p.add_argument("--no-progress", action="store_true", help="no progress display")
    p.add_argument(
        "--secure-sum",
        choices=["ideal", "secagg", "secagg+"],
        default="ideal",
        help="how trie levels are summed: the ideal functionality or the SecAgg(+) protocol",
    )
    add_engine_arguments(p, "items are counted (the trie runs on the driver)")
    add_dry_run_arguments(p)
    add_layout_arguments(p)
    add_ledger_arguments(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.top < 0:
        raise ValidationError("--top", FN, "an integer >= 0", args.top)
    result: Any = session_for(args, FN).heavy_hitters(
        args.input,
        epsilon=args.epsilon,
        delta=args.delta,
        key=args.key,
        input_format="text" if args.text else args.input_format,
        levels=args.levels,
        level_epsilon=args.level_epsilon,
        alphabet=args.alphabet,
        terminator=args.terminator,
        drop_unknown=args.drop_unknown,
        one_shot=args.one_shot,
        output=args.output,
        seed=args.seed,
        secure_sum=args.secure_sum,
        confidence=args.confidence,
        dry_run=args.dry_run,
        **layout(args, FN),
    )
    if args.dry_run:
        return print_dry_run(result, args.json)
    release = result
    if args.one_shot:
        meta = release.metadata
        print(f"guarantee      {meta['guarantee']['statement']} (one-shot)")
        print(f"sampling_rate  {meta['sampling_rate']:.6g}")
        print(f"threshold      {meta['threshold']}")
    else:
        details = release.metadata
        level = details["level"]
        print(f"guarantee      {release.metadata['guarantee']['statement']}")
        print(
            f"per level      epsilon {level['epsilon']:.6g}, delta {level['delta']:.3g}, "
            f"sampling_rate {level['sampling_rate']:.6g}, threshold {level['threshold']}"
        )
        for name, b in details["composition"].items():
            shown = "n/a" if b is None else f"({b['epsilon']:.6g}, {b['delta']:.3g})"
            mark = "  <- used" if name == details["used"] else ""
            print(f"  {name:<12} {shown}{mark}")
    print(f"items          {len(release)}")
    if release.values is not None and release.estimates is not None:
        values = release.values
        order = sorted(range(len(release)), key=lambda i: (-int(values[i]), i))
        if args.top:
            order = order[: args.top]
        bounds = release.lower is not None and release.upper is not None
        head = f"{'item':<24} {'sampled_count':>13} {'estimate':>14}"
        print(head + (f" {'clients_lower':>14} {'clients_upper':>14}" if bounds else ""))
        for i in order:
            line = (
                f"{release.keys[i]!s:<24} {int(release.values[i]):>13} "
                f"{release.estimates[i]:>14.1f}"
            )
            if release.lower is not None and release.upper is not None:
                line += f" {int(release.lower[i]):>14} {int(release.upper[i]):>14}"
            print(line)
    if not release.private:
        print("warning        seeded randomness: reproducible and NOT private")
    # exact facts of the input go to stderr, marked, never beside the release on stdout
    info = release.diagnostics
    note(
        f"guarantee {release.metadata['guarantee']['statement']}; "
        + ("" if release.private else "drawn from a seeded source: reproducible and NOT private; ")
        + "input (exact, not private, not in the output): "
        f"{counted(info['clients'], 'client')}, "
        f"{info['dropped_for_alphabet']} dropped for the alphabet"
    )
    return 0
