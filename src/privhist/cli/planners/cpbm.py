"""``privhist plan cpbm``: the (epsilon, delta) and Renyi-DP curve of one cPBM secure sum
(Lemma 2 and equation (8) of the federated frequency estimation paper)."""

from __future__ import annotations

import argparse

from privhist.cli.common import add_once, print_report
from privhist.core.errors import ValidationError

#: the largest --users planned (the accounting sums over Binomial(users / 2) per Renyi order)
MAX_USERS = 100_000

NAME = "cpbm"
#: epsilon is what this planner computes; a given --epsilon is a target to compare with
EPSILON_OPTIONAL = True
COMMON = ("epsilon", "delta")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_once(parser, "--users", type=int, help="[cpbm] users in the secure sum (n)")
    add_once(parser, "--dimension", type=int, help="[cpbm] coordinates each user sends (D)")
    add_once(parser, "--m", type=int, help="[cpbm] binomial trials per coordinate")
    add_once(parser, "--theta", type=float, help="[cpbm] theta in (0, 1/4]")


def run(args: argparse.Namespace) -> int:
    from privhist.federated.cpbm_accounting import calibrate_m, cpbm_rdp

    fn = "plan cpbm"
    for flag, value in (
        ("--users", args.users),
        ("--dimension", args.dimension),
        ("--m", args.m),
        ("--theta", args.theta),
    ):
        if value is None:
            raise ValidationError(flag, fn, "given", None)
    if args.delta is None or args.delta <= 0:
        raise ValidationError("--delta", fn, "a number in (0, 1)", args.delta)
    if args.users > MAX_USERS:
        # Lemma 2's expectations run over Binomial(users / 2) for every Renyi order
        raise ValidationError("--users", fn, f"<= {MAX_USERS} (the largest accepted)", args.users)
    curve = cpbm_rdp(args.users, args.theta, args.m, args.dimension)
    eps = curve.epsilon(args.delta)
    report = {
        "mechanism": "cpbm",
        "users": args.users,
        "dimension": args.dimension,
        "m": args.m,
        "theta": args.theta,
        "delta": args.delta,
        "epsilon": eps,
        "best_order": curve.best_order(args.delta),
        "rdp_curve": [[o, e] for o, e in zip(curve.orders, curve.rdp, strict=True)],
    }
    if args.epsilon is not None:
        report["target_epsilon"] = args.epsilon
        report["meets_target"] = eps <= args.epsilon
        try:
            report["largest_m_for_target"] = calibrate_m(
                args.epsilon, args.delta, args.users, args.theta, args.dimension
            )
        except ValidationError:
            report["largest_m_for_target"] = None
    print_report(report, args.json)
    return 0
