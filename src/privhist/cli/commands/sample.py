"""``privhist sample``: a private weighted sample (Cohen, Geri, Sarlos & Stemmer, Algorithm 2).

    privhist sample INPUT --key COLUMN [--weight COLUMN] (--tau T | --k K [--k-budget F])
        --scheme ppswor|priority --epsilon E --delta D [--power P] [--keys-only]
        [--max-frequency M] [--output F] [--no-progress]

Without ``--weight`` every row is one element and a key's frequency is its number of rows; with
``--weight`` the input is aggregated ``(key, frequency)`` pairs — frequencies must be positive
integers (the guarantee is for element-level neighbours) and a repeated key is an error unless
``--aggregate``. Frequencies above the public ``--max-frequency`` are clamped to it before
sampling (``w -> min(w, M)`` keeps neighbours neighbours): a key above it is sampled, sanitised
and estimated exactly as a key of frequency ``M``, so its ``estimate``, ``bias`` and
``variance`` are those of ``min(w, M)`` (the estimate's expectation is about ``M`` whatever
``w``; one estimate may exceed ``M``). What clamping loses, ``w - M``, is in no column: no release
could state it, since a key of frequency ``M`` and one of ``M + 1`` are neighbours and get the
same release. The sample is a threshold sample (ppswor or priority with ``f(w) = w**power``)
with exact inclusion probabilities, sanitised with the certified keys-and-frequencies sanitiser
(or the keys sanitiser with ``--keys-only``; ``--frequency-rule max-separation`` for Algorithm 5's
maximum-separation rows, certified the same way, which add a ``sanitized_value`` column); each
row is ``key, token, estimate, bias, variance`` (the MLE of the clamped frequency and its exact
bias and variance at the frequency the MLE attributes to the token). Output goes to
``--output`` (CSV, or JSON with metadata), written atomically, or to stdout. A file carries a row
count and checksum (CSV: a last line ``# privhist integrity: ...``; JSON:
``metadata.integrity``; see :mod:`privhist.io.integrity`), which ``privhist estimate`` checks.

Sample size instead of a threshold (``--k K``). A bottom-k sample's threshold is the
``(k+1)``-th smallest rank, a function of the data, which the sanitisers' guarantee does not
cover. ``--k`` instead spends a fraction ``--k-budget`` (default 0.1) of epsilon on the total
``S = sum_x f(min(w_x, M))`` (the paper's Section 3.1: ``tau ~ k / ||f(w)||_1`` from a private
total): ``Z = floor(S / D) + DiscreteLaplace(1 / eps_1)`` with ``D`` the largest change of one
element (1 for powers 0 and 1, ``2 M - 1`` for power 2; other powers need ``--tau``), then
``tau = k / max(D Z, 1)`` and the sample is a threshold sample with that ``tau``. Basic
(sequential) composition gives ``(eps_1 + eps_2, delta) = (epsilon, delta)`` overall. The expected
sample size is about ``k`` (a little less for ppswor).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from privhist.cli.common import (
    add_dry_run_arguments,
    add_engine_arguments,
    add_layout_arguments,
    add_ledger_arguments,
    counted,
    layout,
    print_dry_run,
    session_for,
)

#: the rules' former names, by the paper's algorithm numbers (still accepted; the names are kept
#: here, not imported, so that ``--help`` loads no numerical code)
_RULE_ALIASES = {"algorithm4": "integer-tokens", "algorithm5": "max-separation"}


def _frequency_rule(value: str) -> str:
    """``--frequency-rule``: a rule's name, or its former name by algorithm number."""
    return _RULE_ALIASES.get(value, value)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "sample", help="a private weighted sample (ppswor / priority) with estimates"
    )
    p.add_argument("input", help="CSV/TSV/Parquet/NDJSON file")
    p.add_argument("--key", required=True, help="key column")
    p.add_argument("--weight", help="frequency column (aggregated input); default: count rows")
    p.add_argument("--aggregate", action="store_true", help="sum the frequencies of repeated keys")
    p.add_argument("--tau", type=float, help="sampling threshold (> 0); or give --k")
    p.add_argument(
        "--k",
        type=int,
        help="expected sample size: tau = k / (private total of f(w)); powers 0, 1, 2",
    )
    p.add_argument(
        "--k-budget",
        type=float,
        default=0.1,
        help="fraction of epsilon spent on the private total with --k (default 0.1)",
    )
    p.add_argument(
        "--scheme",
        choices=["ppswor", "priority"],
        default="ppswor",
        help="threshold sampling scheme (default ppswor)",
    )
    p.add_argument("--power", type=float, default=1.0, help="f(w) = w**power (default 1)")
    p.add_argument(
        "--epsilon",
        type=float,
        required=True,
        help="epsilon of the release (with --k, a --k-budget share of it buys the private total)",
    )
    p.add_argument("--delta", type=float, required=True, help="delta of the release (> 0)")
    p.add_argument("--keys-only", action="store_true", help="release keys only (Algorithm 3)")
    p.add_argument(
        "--frequency-rule",
        type=_frequency_rule,
        choices=["integer-tokens", "max-separation"],
        default="integer-tokens",
        help="frequency sanitiser: integer-tokens (Algorithm 4, the default) or max-separation "
        "(Algorithm 5, Theorem 5.1; adds a sanitized_value column; --max-frequency at most "
        "1000, or 200 below delta 2**-42); both certified DP before the draw, at any delta",
    )
    p.add_argument(
        "--max-frequency",
        type=int,
        default=2000,
        help="public bound: larger frequencies are clamped to it before sampling, and estimated "
        "as the bound (default 2000; at most 5000, or 2000 below delta 2**-42, unless "
        "--keys-only)",
    )
    p.add_argument("--output", "-o", help="output file (.csv or .json); default stdout")
    p.add_argument("--seed", type=int, help="reproducible, NOT private randomness (tests only)")
    p.add_argument("--no-progress", action="store_true", help="no progress display")
    add_engine_arguments(p)
    add_dry_run_arguments(p)
    add_layout_arguments(p)
    add_ledger_arguments(p)
    p.set_defaults(run=run)


def _progress(enabled: bool) -> Any:
    """A transient progress bar on stderr (only on a terminal, and not with --no-progress)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    if not enabled or not console.is_terminal:
        return None
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def run(args: argparse.Namespace) -> int:
    fn = "sample"
    bar = _progress(not args.no_progress)
    if bar is not None:
        bar.start()
        bar.add_task("sampling and sanitising", total=None)
    try:
        ws = session_for(args, fn).weighted_sample(
            args.input,
            key=args.key,
            weight=args.weight,
            epsilon=args.epsilon,
            delta=args.delta,
            tau=args.tau,
            k=args.k,
            k_budget=args.k_budget,
            scheme=args.scheme,
            power=args.power,
            max_frequency=args.max_frequency,
            keys_only=args.keys_only,
            aggregate=args.aggregate,
            frequency_rule=args.frequency_rule,
            output=args.output,
            seed=args.seed,
            dry_run=args.dry_run,
            **layout(args, fn),
        )
    finally:
        if bar is not None:
            bar.stop()
    if args.dry_run:
        return print_dry_run(ws, args.json)
    if not args.output:
        # the bytes a file gets (sealed, so privhist estimate reads them back), as JSON with --json
        sys.stdout.write(ws.encode("json" if args.json else "csv").decode("utf-8"))
    info = ws.diagnostics
    print(
        f"privhist: {counted(len(ws), 'key')} released from a sample of {info['sample_size']} "
        f"(not private: sample size, {counted(info['clamped'], 'key')} clamped to "
        "--max-frequency); "
        f"guarantee {ws.metadata['guarantee']}"
        + ("" if ws.private else "; drawn from a seeded source: reproducible and NOT private"),
        file=sys.stderr,
    )
    return 0
