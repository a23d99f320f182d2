#!/usr/bin/env bash
# Runs the peer workloads (W1–W4 of WORKLOAD.md) against Weft: builds weft-bench in release,
# runs each workload in a fresh process, three rounds interleaved (w1 w2 w3 w4, w1 w2 …),
# and writes every JSON line plus a median summary to bench/results/.
#
#   bench/run.sh            # all workloads, W3 with async checkpoints
#   DURABILITY=sync bench/run.sh
#   RUNTIME=1 bench/run.sh  # also w1rt: W1 through Runtime::start (a build with the
#                           # `runtime` feature, run from its own copy so W2's RSS is not
#                           # that binary's)
set -euo pipefail
cd "$(dirname "$0")/.."

durability="${DURABILITY:-async}"
rounds="${ROUNDS:-3}"
mkdir -p bench/results
stamp=$(date -u +%Y-%m-%dT%H-%M-%SZ)
out="bench/results/$stamp.jsonl"

cargo build --release -p weft-bench >&2
bin="${CARGO_TARGET_DIR:-target}/release/weft-bench"
workloads="w1 w2 w3 w4"
if [ -n "${RUNTIME:-}" ]; then
  rt_bin="bench/results/weft-bench-runtime"
  cp "$bin" bench/results/weft-bench
  bin=bench/results/weft-bench
  cargo build --release -p weft-bench --features runtime >&2
  cp "${CARGO_TARGET_DIR:-target}/release/weft-bench" "$rt_bin"
  workloads="w1 w1rt w2 w3 w4"
fi

for round in $(seq 1 "$rounds"); do
  for workload in $workloads; do
    echo "round $round: $workload" >&2
    run="$bin"
    [ "$workload" = w1rt ] && run="$rt_bin"
    "$run" "$workload" --durability "$durability" >> "$out"
  done
done

python3 - "$out" <<'PY' | tee bench/results/latest.md
import json, statistics, sys, platform, os
path = sys.argv[1]
rows = [json.loads(line) for line in open(path) if line.strip()]
keys = {}
for row in rows:
    for k, v in row.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            keys.setdefault(k, []).append(v)
print(f"# weft-bench results ({os.path.basename(path)})\n")
print(f"machine: {os.cpu_count()} cores, {platform.machine()}, {platform.platform()}\n")
print("| metric | median | min | max | n |\n|---|---|---|---|---|")
for k in sorted(keys):
    vs = keys[k]
    print(f"| {k} | {statistics.median(vs):.3f} | {min(vs):.3f} | {max(vs):.3f} | {len(vs)} |")
PY
echo "wrote $out and bench/results/latest.md" >&2
