"""``privhist federated-frequency``: user-level distributed-DP frequencies by TFFE or MFFE.

Example::

    privhist federated-frequency visits.csv --user who --key page --epsilon 3 --delta 1e-5 \\
        --domain pages.txt --max-items 100

Each user's items (rows with her ``--user`` value) form one count vector; the protocol (the
paper's Algorithm 6, or Algorithm 7 with ``--protocol mffe``) is simulated in-process with the
ideal secure sum (:mod:`privhist.federated.ffe`). ``m`` and ``m'`` are calibrated to
``(--epsilon, --delta)`` for the number of users (public in secure aggregation). Printed: the
estimated mean count of every item per user, the privately estimated l2 error bound (Theorem 1),
the threshold(s) used and the guarantee (replace-one-user neighbours, every item of a user).

The item domain must be public: ``--domain FILE`` lists the keys, one per line; records with
other keys are ignored and every user of the file takes part (one holding no key of the domain
sends the zero vector), so the printed keys, ``d`` and the number of users do not depend on what
any one user holds. The population is the set of users with at least one record (any key) in
the file; it is public (as the devices taking part in secure aggregation are), and neighbours
replace one user's records by any other non-empty records.

``--domain-from-data`` (optionally with ``--top-d``) instead reads the domain from the data as
the paper's experiments do; that choice is not private, users left without items are dropped,
and the output says there is then no end-to-end guarantee.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from privhist.cli.common import (
    INPUT_FORMAT_HELP,
    SECURE_SUM_HELP,
    add_dry_run_arguments,
    counted,
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "federated-frequency",
        help="user-level distributed-DP frequency estimation (TFFE / MFFE, cPBM + secure sum)",
    )
    p.add_argument("input", help="CSV, TSV, Parquet, NDJSON, text or FIMI file")
    p.add_argument("--user", required=True, help="the user column (fimi/text: one user per line)")
    p.add_argument("--key", default="key", help="the item column")
    p.add_argument("--epsilon", type=float, required=True, help="total epsilon")
    p.add_argument("--delta", type=float, required=True, help="total delta")
    p.add_argument(
        "--protocol",
        choices=["tffe", "mffe"],
        default="tffe",
        help="tffe (two phases: a private clipping threshold, then the estimate) or mffe "
        "(--rounds rounds over disjoint users, the threshold updated with learning rate --eta); "
        "default %(default)s",
    )
    p.add_argument("--domain", help="file with the public item domain, one key per line")
    p.add_argument(
        "--domain-from-data",
        action="store_true",
        help="take the items from the data instead (NOT private: no end-to-end guarantee)",
    )
    p.add_argument(
        "--top-d", type=int, help="with --domain-from-data: the d most frequent items only"
    )
    p.add_argument(
        "--max-items",
        type=int,
        default=100,
        help="public bound on the items a user holds: the quantile range is K times it",
    )
    p.add_argument("--theta", type=float, default=0.2, help="cPBM theta in (0, 1/4]")
    p.add_argument("--bits", type=int, default=6, help="TFFE: 2**bits quantile bins")
    p.add_argument("--rounds", type=int, default=10, help="MFFE: number of rounds R")
    p.add_argument("--eta", type=float, default=1.0, help="MFFE: learning rate of the update")
    p.add_argument(
        "--frame",
        choices=["auto", "orthogonal", "hadamard"],
        default="auto",
        help="tight frame: orthogonal D = 2d (d <= 128) or randomised Hadamard D = 2**k >= 2d",
    )
    p.add_argument("--input-format", help=INPUT_FORMAT_HELP)
    p.add_argument("--seed", type=int, help="reproducible, NOT private randomness (tests only)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--secure-sum",
        choices=["ideal", "secagg", "secagg+"],
        default="ideal",
        help=SECURE_SUM_HELP,
    )
    add_dry_run_arguments(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    from privhist.cli.common import print_dry_run, session_for

    fn = "federated-frequency"
    show = not args.no_progress and not args.json and sys.stderr.isatty()
    with Progress(disable=not show, transient=True) as bar:

        def progress(label: str, total: int) -> Any:
            task = bar.add_task(label, total=total)
            return lambda k: bar.advance(task, k)

        release: Any = session_for(args, fn).federated_frequency(
            args.input,
            epsilon=args.epsilon,
            delta=args.delta,
            user=args.user,
            key=args.key,
            input_format=args.input_format,
            protocol=args.protocol,
            theta=args.theta,
            bits=args.bits,
            max_items=args.max_items,
            rounds=args.rounds,
            eta=args.eta,
            domain=args.domain,
            domain_from_data=args.domain_from_data,
            top_d=args.top_d,
            frame=args.frame,
            seed=args.seed,
            secure_sum=args.secure_sum,
            progress=progress,
            dry_run=args.dry_run,
            announce=lambda text: print(f"privhist: {text}", file=sys.stderr),
        )
    if args.dry_run:
        return print_dry_run(release, args.json)
    meta = release.metadata
    eps, delta = args.epsilon, args.delta
    public = args.domain is not None
    spent = meta["guarantee"]["epsilon"]
    keys = [str(k) for k in release.keys.tolist()]
    estimates = release.estimates.tolist()
    if public:
        note = (
            "the item domain is the public --domain file (records with other keys are "
            "ignored; every user of the file takes part)"
        )
    else:
        note = (
            "NO end-to-end guarantee: the item domain was chosen from the data (the "
            + (f"{args.top_d} most frequent keys" if args.top_d else "keys present")
            + ") and users left without items were dropped, which is not private; the "
            "guarantee covers the frequencies only given that domain and those users"
        )
    n, d = meta["users"], meta["items"]
    report = {
        "protocol": meta["protocol"],
        "users": n,
        "items": d,
        "frame_dimension": meta["frame_dimension"],
        "guarantee": {k: v for k, v in meta["guarantee"].items() if k != "statement"},
        "m": meta["m"],
        "m_quantile": meta["m_quantile"],
        "theta": meta["theta"],
        "gamma": meta["gamma"],
        "clips": meta["clips"],
        "l2_error_bound": meta["l2_error_bound"],
        "noise_bound": meta["noise_bound"],
        "frequencies": dict(zip(keys, estimates, strict=True)),
        "randomness": meta["randomness"]["source"],
        "note": note,
    }
    if args.json:
        print(json.dumps(report))
        return 0
    width = max([len(k) for k in keys] + [4])
    print(f"{'item':<{width}}  mean count per user (estimate)")
    for k, v in zip(keys, estimates, strict=True):
        print(f"{k:<{width}}  {v:.6g}")
    print(
        f"# protocol {meta['protocol']}: {counted(n, 'user')}, d = {d}, "
        f"D = {meta['frame_dimension']}, m = {meta['m']}, m' = {meta['m_quantile']}, "
        f"theta = {meta['theta']}"
    )
    clips = ", ".join(f"{c:.4g}" for c in meta["clips"][:10])
    print(
        f"# threshold(s) C: {clips}{' ...' if len(meta['clips']) > 10 else ''} "
        f"(target quantile {meta['gamma']:.4g})"
    )
    if meta["l2_error_bound"] is None:
        print(
            f"# l2 error bound: noise part {meta['noise_bound']:.4g} (MFFE: the clipping-bias "
            "part is not estimated privately)"
        )
    else:
        print(
            f"# l2 error bound (Theorem 1, privately estimated): {meta['l2_error_bound']:.4g} "
            f"(noise part {meta['noise_bound']:.4g})"
        )
    scope = "" if public else " (given the data-derived domain only)"
    print(
        f"# guarantee{scope}: ({spent:.4g}, {delta:g})-DP for replace-one-user neighbours "
        f"(target epsilon {eps:g}); randomness: {meta['randomness']['source']}"
    )
    print(f"# note: {note}")
    return 0
