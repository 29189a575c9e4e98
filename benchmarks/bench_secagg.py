"""SecAgg and SecAgg+ in-process: client CPU, server CPU, bytes per client, round wall time;
and SecAgg+ beside Flower's.

Usage: python benchmarks/bench_secagg.py [--n 100 500 1000] [--d 2048 16384]
       [--drop 0 0.1 0.3] [--variants secagg secagg+] [--secagg-max-n 100] [--network 20]
       [--flower N D DROP] [--rounds 3] [--flower-python /work/flwr-venv/bin/python]
       (``--variants`` with no names skips the in-process grid)

``--flower N D DROP`` compares one SecAgg+ round of privhist and of Flower 1.42
(``benchmarks/flower_secaggplus.py``, headless) with the same n, d, neighbours (privhist's
default ``k``; Flower's ``num_shares = k + 1`` counts the client itself), threshold, modulus
``2**32`` and dropouts (clients leaving before their masked input), each round in a fresh process
of its own, the two systems alternating first, and prints per round and as the median of the
within-round ratios: server CPU, mean client CPU and upload bytes per client, with the machine's
load. Flower runs in its own virtual environment (it upgrades about 40 packages)::

    python -m venv /work/flwr-venv && /work/flwr-venv/bin/pip install 'flwr==1.42.*'

When that interpreter is absent the comparison says so and prints no ratio. Goals (issue #31):
at least 50x less server CPU than Flower and at most half its upload.

Every round runs the whole protocol (all five stages, real X25519 / AES-GCM / Shamir / mask
PRG, every message through its wire encoding) among n simulated clients in this process; the
dropping clients leave after sharing their keys (stage "masked": the costliest case, since the
server must rebuild their keys and the pairwise masks they left behind). Inputs are uniform mod
q = 2**32. CPU is process time; "client CPU" is the mean over clients. Full SecAgg costs O(n)
work per client and O(n^2) in all; it runs only up to --secagg-max-n clients (the rest of its
rows say "skipped"). With --network N, one sample-and-threshold round over gRPC/TLS with N
client processes on 127.0.0.1 is timed as well. Flower's SecAgg+ is measured for a ratio when
``flwr`` imports; otherwise the table says so. Prints numbers; asserts nothing.

Goal (issue #12): SecAgg+ with n = 1000, d = 2048, 10 % dropouts in at most 60 s of CPU.

``--federated-frequency N D`` times the whole command ``privhist federated-frequency`` (TFFE:
two secure sums, the quantile round and the frame round) on a data set of N users and D items
that it writes itself (each user holds 1 to 20 records of uniformly drawn items; a fixed seed),
with ``--secure-sum ideal`` and ``--secure-sum secagg+``, each run in a fresh process, the two
alternating first over ``--rounds`` rounds; it prints each process's CPU seconds (user +
system) and peak RSS, the load, and the median of the within-round CPU ratios. Goals (issue
#28): ``secagg+`` at N = 3000, D = 12 within 4x the ideal sum's CPU and under 0.5 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

Q = 1 << 32


def one_round(variant: str, n: int, d: int, drop: float, seed: int) -> dict[str, Any]:
    from privhist.core.random import SecureRandom, SeededRandom
    from privhist.federated.secagg import run_in_process
    from privhist.federated.secagg.protocol import (
        RoundConfig,
        default_neighbours,
        default_threshold,
    )

    k = 0 if variant == "secagg" else default_neighbours(n)
    t = default_threshold(n, k)
    if k and drop > 0:
        t = min(t, dropout_threshold(n, k, drop))
    config = RoundConfig(seed, Q, d, tuple(range(n)), t, k)
    rng = SeededRandom(seed)
    x = rng.uniform_below(Q, n * d).reshape(n, d)
    m = round(drop * n)
    order = list(range(n))
    for i in range(n - 1, 0, -1):
        j = rng.randbelow(i + 1)
        order[i], order[j] = order[j], order[i]
    dropped = set(order[:m])
    start = time.perf_counter()
    out = run_in_process(
        config,
        {u: x[u] for u in range(n)},
        lambda _u: SecureRandom(),
        SecureRandom(),
        {"masked": dropped},
    )
    wall = time.perf_counter() - start
    survivors = out.server.survivors.get("masked", [])
    ok = out.ok and bool((out.server.result == x[survivors].sum(axis=0, dtype=object) % Q).all())
    return {
        "ok": ok,
        "k": k,
        "t": t,
        "client_cpu": out.client_cpu / n,
        "server_cpu": out.server_cpu,
        "total_cpu": out.client_cpu + out.server_cpu,
        "kib_sent": sum(out.bytes_sent.values()) / n / 1024,
        "wall": wall,
    }


def dropout_threshold(n: int, k: int, drop: float) -> int:
    """The largest ``t`` for which, with each client dropping independently at rate ``drop``,
    the expected number of closed neighbourhoods (size ``k + 1``) left with fewer than ``t``
    survivors is at most 1e-3 (so the round completes); at high dropout rates this is below
    the majority default, and the round then tolerates only ``t - 1`` colluding neighbours."""
    from scipy import stats

    size = k + 1
    t = 2
    while t < size and n * stats.binom.cdf(t, size, 1 - drop) <= 1e-3:
        t += 1
    return t


FLOWER_PYTHON = "/work/flwr-venv/bin/python"
HERE = Path(__file__).resolve().parent


def flower_version(python: str) -> str | None:
    """Flower's version in the interpreter ``python``, or None when it cannot run."""
    if not Path(python).exists():
        return None
    try:
        out = subprocess.run(
            [python, "-c", "import flwr; print(flwr.__version__)"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _fresh(argv: list[str]) -> dict[str, Any]:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(f"{argv[:3]} failed: {out.stderr.strip()[-500:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def compare_with_flower(n: int, d: int, drop: float, rounds: int, python: str, seed: int) -> None:
    """Interleaved rounds of privhist's and Flower's SecAgg+ (module notes)."""
    version = flower_version(python)
    if version is None:
        print(
            f"Flower: no interpreter with flwr at {python} (create it as the module notes say):"
            " no Flower figures, no ratio"
        )
        return
    from privhist.federated.secagg.protocol import default_neighbours, default_threshold

    k = default_neighbours(n)
    t = default_threshold(n, k)
    if k and drop > 0:
        t = min(t, dropout_threshold(n, k, drop))
    print(
        f"SecAgg+ beside Flower {version}: n = {n}, d = {d}, k = {k} neighbours, t = {t}, "
        f"{drop:.0%} dropouts before the masked input, q = 2**32; each round in fresh processes"
    )
    head = (
        f"{'round':>5} {'first':>8} {'load':>5} | {'server CPU s':>12} {'Flower':>8} {'ratio':>7} |"
        f" {'client CPU s':>12} {'Flower':>8} {'ratio':>6} | {'upload B':>9} {'Flower':>9} "
        f"{'ratio':>6} | ok"
    )
    print(head)
    print("-" * len(head))
    ratios: dict[str, list[float]] = {"server": [], "client": [], "upload": []}
    ours_cmd = [sys.executable, str(Path(__file__).resolve()), "--one", str(n), str(d)]
    ours_cmd += [str(drop)]
    theirs_cmd = [python, str(HERE / "flower_secaggplus.py"), str(n), str(d), str(k), str(t)]
    theirs_cmd += [str(drop)]
    for r in range(rounds):
        load = os.getloadavg()[0]
        order = ["privhist", "flower"] if r % 2 == 0 else ["flower", "privhist"]
        got: dict[str, dict[str, Any]] = {}
        for who in order:
            cmd = ours_cmd if who == "privhist" else theirs_cmd
            got[who] = _fresh([*cmd, str(seed + r)])
        a, b = got["privhist"], got["flower"]
        rs = b["server_cpu"] / a["server_cpu"], b["client_cpu"] / a["client_cpu"]
        ru = a["upload"] / b["upload"]
        ratios["server"].append(rs[0])
        ratios["client"].append(rs[1])
        ratios["upload"].append(ru)
        print(
            f"{r:>5} {order[0]:>8} {load:>5.2f} | {a['server_cpu']:>12.3f} "
            f"{b['server_cpu']:>8.2f} {rs[0]:>6.1f}x | {a['client_cpu']:>12.4f} "
            f"{b['client_cpu']:>8.4f} {rs[1]:>5.1f}x | {a['upload']:>9.0f} {b['upload']:>9.0f} "
            f"{ru:>6.3f} | {a['ok'] and b['ok']}",
            flush=True,
        )
    med = {key: statistics.median(v) for key, v in ratios.items()}
    print(
        f"median of within-round ratios: Flower's server CPU / privhist's {med['server']:.1f}x "
        f"(goal >= 50x: {'met' if med['server'] >= 50 else 'NOT met'}); client CPU "
        f"{med['client']:.1f}x; privhist's upload / Flower's {med['upload']:.3f} (goal <= 0.5: "
        f"{'met' if med['upload'] <= 0.5 else 'NOT met'})"
    )


def one_secaggplus(n: int, d: int, drop: float, seed: int) -> dict[str, Any]:
    """One SecAgg+ round in this (fresh) process, in the units of the Flower harness."""
    r = one_round("secagg+", n, d, drop, seed)
    return {
        "server_cpu": r["server_cpu"],
        "client_cpu": r["client_cpu"],
        "upload": r["kib_sent"] * 1024,
        "wall": r["wall"],
        "ok": r["ok"],
    }


def network_round(clients: int) -> None:
    from privhist.federated.secagg import runtime

    params = {
        "clients": clients,
        "epsilon": 2.0,
        "delta": 0.05,
        "sampling_rate": 0.5,
        "threshold": None,
        "support": 16,
        "exponent": 1.1,
        "data_seed": 0,
    }
    res = runtime.run_local("sample-threshold", params, "secagg+", seed=1, stage_timeout=30)
    stages = sum(r.seconds for r in res.records)
    ok = all(c["returncode"] == 0 for c in res.clients.values())
    print(
        f"network: {clients} client processes, gRPC/TLS on 127.0.0.1: whole run "
        f"{res.seconds:.2f} s (start-up and join included), the five stages {stages:.3f} s, "
        f"all exited cleanly: {ok}"
    )


def write_frequency_data(folder: Path, users: int, items: int, seed: int = 0) -> None:
    """``visits.csv`` (user, key) and ``domain.txt`` for ``--federated-frequency``."""
    import random

    rng = random.Random(seed)
    keys = [f"item{j}" for j in range(items)]
    with open(folder / "visits.csv", "w") as f:
        f.write("user,key\n")
        for u in range(users):
            for _ in range(rng.randint(1, 20)):
                f.write(f"u{u},{rng.choice(keys)}\n")
    (folder / "domain.txt").write_text("\n".join(keys) + "\n")


def _measured(argv: list[str]) -> tuple[float, float, int]:
    """CPU seconds (user + system), peak RSS in bytes and wall seconds of one fresh process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:4]} failed: {err.strip()[-500:]}")
    rss = usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    return usage.ru_utime + usage.ru_stime, wall, rss


def compare_frequency(users: int, items: int, rounds: int) -> None:
    """``privhist federated-frequency`` with the ideal sum and with SecAgg+ (module notes)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_frequency_data(folder, users, items)
        cli = "from privhist.cli.main import main; raise SystemExit(main())"
        base = [sys.executable, "-c", cli, "federated-frequency"]
        base += [str(folder / "visits.csv"), "--user", "user", "--key", "key", "--epsilon", "3"]
        base += ["--delta", "1e-5", "--domain", str(folder / "domain.txt"), "--max-items", "20"]
        base += ["--json", "--no-progress", "--secure-sum"]
        print(
            f"privhist federated-frequency (TFFE), {users} users, d = {items}: ideal sum against "
            "secagg+, each in a fresh process"
        )
        head = (
            f"{'round':>5} {'first':>8} {'load':>5} | {'ideal CPU s':>11} {'RSS MiB':>7} | "
            f"{'secagg+ CPU s':>13} {'RSS MiB':>7} | {'CPU ratio':>9}"
        )
        print(head)
        print("-" * len(head))
        ratios, peak = [], 0
        for r in range(rounds):
            load = os.getloadavg()[0]
            order = ["ideal", "secagg+"] if r % 2 == 0 else ["secagg+", "ideal"]
            got = {name: _measured([*base, name]) for name in order}
            (ci, _, ri), (cs, _, rs) = got["ideal"], got["secagg+"]
            ratios.append(cs / ci)
            peak = max(peak, rs)
            print(
                f"{r:>5} {order[0]:>8} {load:>5.2f} | {ci:>11.2f} {ri / 2**20:>7.0f} | "
                f"{cs:>13.2f} {rs / 2**20:>7.0f} | {cs / ci:>8.2f}x",
                flush=True,
            )
        med = statistics.median(ratios)
        print(
            f"median of within-round CPU ratios secagg+ / ideal: {med:.2f}x (goal <= 4x: "
            f"{'met' if med <= 4 else 'NOT met'}); secagg+ peak RSS {peak / 2**20:.0f} MiB "
            f"(goal < 512 MiB: {'met' if peak < 1 << 29 else 'NOT met'})"
        )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, nargs="+", default=[100, 500, 1000])
    ap.add_argument("--d", type=int, nargs="+", default=[2048, 16384])
    ap.add_argument("--drop", type=float, nargs="+", default=[0.0, 0.1, 0.3])
    ap.add_argument("--variants", nargs="*", default=["secagg+", "secagg"])
    ap.add_argument("--secagg-max-n", type=int, default=100)
    ap.add_argument("--network", type=int, default=0, help="clients of a network round (0: no)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--flower", nargs=3, metavar=("N", "D", "DROP"), help="compare with Flower")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of --flower")
    ap.add_argument("--flower-python", default=FLOWER_PYTHON)
    ap.add_argument(
        "--federated-frequency",
        nargs=2,
        type=int,
        metavar=("USERS", "D"),
        help="time privhist federated-frequency with the ideal sum and with secagg+",
    )
    ap.add_argument("--one", nargs=4, metavar=("N", "D", "DROP", "SEED"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        n, d, drop, seed = args.one
        print(json.dumps(one_secaggplus(int(n), int(d), float(drop), int(seed))))
        return 0
    print(f"load average {os.getloadavg()[0]:.2f} (2-core figures need an idle machine)")
    if args.federated_frequency:
        compare_frequency(*args.federated_frequency, args.rounds)
        if not args.variants:
            return 0
    if args.flower:
        n, d, drop = args.flower
        compare_with_flower(int(n), int(d), float(drop), args.rounds, args.flower_python, args.seed)
    head = (
        f"{'variant':<8} {'n':>5} {'d':>6} {'drop':>5} {'k':>4} {'t':>4} "
        f"{'client CPU/client s':>19} {'server CPU s':>12} {'total CPU s':>11} "
        f"{'KiB sent/client':>15} {'wall s':>8} {'sum ok':>6}"
    )
    print(head)
    print("-" * len(head))
    goal: dict[str, Any] | None = None
    for variant in args.variants:
        for n in args.n:
            for d in args.d:
                for drop in args.drop:
                    if variant == "secagg" and n > args.secagg_max_n:
                        print(
                            f"{variant:<8} {n:>5} {d:>6} {drop:>5.0%}  skipped (n > "
                            f"--secagg-max-n {args.secagg_max_n}: O(n^2) work)"
                        )
                        continue
                    r = one_round(variant, n, d, drop, args.seed)
                    print(
                        f"{variant:<8} {n:>5} {d:>6} {drop:>5.0%} {r['k']:>4} {r['t']:>4} "
                        f"{r['client_cpu']:>19.4f} {r['server_cpu']:>12.3f} "
                        f"{r['total_cpu']:>11.2f} {r['kib_sent']:>15.1f} {r['wall']:>8.2f} "
                        f"{r['ok']!s:>6}",
                        flush=True,
                    )
                    if variant == "secagg+" and n == 1000 and d == 2048 and drop == 0.1:
                        goal = r
    if goal is not None:
        verdict = "met" if goal["total_cpu"] <= 60 else "NOT met"
        print(
            f"goal: SecAgg+ n=1000 d=2048 10% dropouts in <= 60 s CPU: {goal['total_cpu']:.1f} s "
            f"({goal['total_cpu'] / 60:.2f} of the target) - {verdict}"
        )
    if args.network:
        network_round(args.network)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
