#!/usr/bin/env bash
# CI: each optional extra of pyproject.toml, installed alone from the built wheel in a fresh
# virtual environment, runs its feature once on a tiny input; so does the bare install. An extra
# that misses a dependency of its feature fails here, as it would for a user. The commands run
# from the environment's bin/ without activating it, as a user would run them.
#
# Usage: .ci/extras.sh [NAME ...]     (default: core pandas plot federated spark connect bench)
# Prints one line per extra and its seconds; exits non-zero on the first failure, with its log.
# pip's cache makes the installs fast after the first run; the extras install two at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
unset PYTHONPATH PYSPARK_PYTHON PYSPARK_DRIVER_PYTHON
PY=${PYTHON:-python3}
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(core pandas plot federated spark connect bench)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$SECONDS
"$PY" -m pip wheel --quiet --disable-pip-version-check --no-deps --wheel-dir "$work/dist" . \
    > "$work/wheel.log" 2>&1 || { cat "$work/wheel.log"; exit 1; }
wheel=$(echo "$work"/dist/privhist-*.whl)
"$PY" - "$work/tiny.csv" <<'EOF'
import sys

with open(sys.argv[1], "w") as f:
    f.write("page,user\n")
    for i in range(3000):
        f.write(f"{'home' if i % 3 else 'search'},{i % 700}\n")
EOF

# the tiny run of each extra's feature, in its environment's bin/ ($1) and a scratch folder ($2)
run_core() {
    "$1/privhist" budget init --dataset d --epsilon 2 --delta 1e-6 --ledger "$2/l.sqlite"
    "$1/privhist" histogram "$work/tiny.csv" --key page --epsilon 1 --delta 1e-8 \
        --ledger "$2/l.sqlite" --dataset d -o "$2/out.csv"
    grep -q '^home,' "$2/out.csv"
    "$1/privhist" budget show --ledger "$2/l.sqlite" | grep -q 'in 1 release'
    # without pandas, asking for a pandas table says which extra gives it
    "$1/python" - <<'PY'
import polars as pl

from privhist import Session

r = Session().histogram(pl.DataFrame({"k": ["a"] * 50}), key="k", epsilon=1, delta=1e-6, seed=1)
try:
    r.to_pandas()
except ImportError as exc:
    assert "privhist[pandas]" in str(exc), exc
else:
    raise SystemExit("to_pandas() worked without pandas")
PY
}
run_pandas() {
    # a pandas table in, a pandas table out (the README's Python example)
    "$1/python" - <<'PY'
import pandas as pd

from privhist import Session

visits = pd.DataFrame({"user": list(range(600)), "page": ["home", "search"] * 300})
r = Session().histogram(visits, key="page", user="user", epsilon=1, delta=1e-6, seed=1)
assert r.to_pandas().columns.tolist()[:2] == ["key", "count"], r.to_pandas()
PY
}
run_plot() {
    "$1/privhist" plan stability --epsilon 1 --delta 1e-8 --plot "$2/plan.png" > /dev/null
    test -s "$2/plan.png"
}
run_federated() {
    "$1/privhist" federated run --clients 5 --json > "$2/fed.json"
    "$1/python" -c 'import json, sys; json.load(open(sys.argv[1]))' "$2/fed.json"
}
run_spark() {
    "$1/privhist" histogram "$work/tiny.csv" --key page --user user --epsilon 1 --delta 1e-6 \
        --engine spark -o "$2/out.csv" 2> "$2/stderr"
    grep -q '^home,' "$2/out.csv"
    # Spark's console progress bar is off: a few start-up lines, not one per task
    if grep -q '\[Stage' "$2/stderr" || [ "$(wc -l < "$2/stderr")" -gt 40 ]; then
        echo "spark wrote $(wc -l < "$2/stderr") lines to stderr:"; head -c 2000 "$2/stderr"
        return 1
    fi
}
run_connect() {
    # a Spark Connect server on loopback from this environment's pyspark, and privhist as its
    # client (the server's Python workers are this environment's, where privhist is installed)
    local port home
    port=$("$1/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    home=$("$1/python" -c 'import pathlib, pyspark; print(pathlib.Path(pyspark.__file__).parent)')
    PYSPARK_PYTHON="$1/python" "$home/bin/spark-submit" \
        --class org.apache.spark.sql.connect.service.SparkConnectServer --master 'local[1]' \
        --conf spark.connect.grpc.binding.address=127.0.0.1 \
        --conf "spark.connect.grpc.binding.port=$port" --conf spark.ui.enabled=false \
        --conf spark.driver.host=127.0.0.1 --conf spark.driver.bindAddress=127.0.0.1 \
        > "$2/server.log" 2>&1 &
    local server=$!
    local ok=0
    for _ in $(seq 240); do
        if "$1/python" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$port" 2> /dev/null; then
            ok=1
            break
        fi
        sleep 0.5
    done
    if [ "$ok" = 1 ]; then
        "$1/privhist" histogram "$work/tiny.csv" --key page --user user --epsilon 1 --delta 1e-6 \
            --engine spark --spark-remote "sc://127.0.0.1:$port" -o "$2/out.csv" || ok=0
    fi
    kill "$server" 2> /dev/null || true
    pkill -f "spark.connect.grpc.binding.port=$port" 2> /dev/null || true
    wait "$server" 2> /dev/null || true
    [ "$ok" = 1 ] || { tail -n 30 "$2/server.log"; return 1; }
    grep -q '^home,' "$2/out.csv"
}
run_bench() {
    # the feature is the audit sampling each peer; its verdict is a statistical test at 95%
    # confidence over several feature maps, so a sound peer reads "VIOLATION" in some runs (one
    # did in CI). The check is that the audit ran and gave a verdict: exit 0 or 1 with its
    # verdict line; an error (a traceback also exits 1, without that line) fails
    local peer status
    for peer in opendp pipelinedp-count; do
        status=0
        "$1/privhist" audit sample --peer "$peer" --epsilon 1 --delta 1e-6 --samples 2000 \
            --no-progress > "$2/audit-$peer.txt" 2>&1 || status=$?
        cat "$2/audit-$peer.txt"
        [ "$status" -le 1 ] || return "$status"
        grep -Eq '^(VIOLATION|no violation found): .* claims \(' "$2/audit-$peer.txt"
    done
}

check() {
    local name=$1 env="$work/venv-$1" dir="$work/run-$1" spec t0=$SECONDS
    mkdir -p "$dir"
    spec=$wheel
    [ "$name" = core ] || spec="$wheel[$name]"
    # not in an "||" list, so that "set -e" holds inside the subshell
    set +e
    (
        set -e
        "$PY" -m venv "$env"
        # --no-compile: byte-compiling every installed module is most of an install's CPU time
        "$env/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile "$spec"
        "run_$name" "$env/bin" "$dir"
    ) > "$work/$name.log" 2>&1
    local status=$?
    set -e
    echo "$status $((SECONDS - t0))" > "$work/$name.status"
}

for ((i = 0; i < ${#names[@]}; i += 2)); do
    check "${names[i]}" &
    if [ $((i + 1)) -lt ${#names[@]} ]; then check "${names[i + 1]}" & fi
    wait
done

failed=0
for name in "${names[@]}"; do
    read -r status seconds < "$work/$name.status"
    if [ "$status" = 0 ]; then
        echo "extras: [$name] installs and runs its feature (${seconds} s)"
    else
        echo "extras: [$name] FAILED (${seconds} s); its log:"
        tail -n 40 "$work/$name.log"
        failed=1
    fi
done
echo "extras: ${#names[@]} environments in $((SECONDS - start)) s"
exit $failed
