#!/usr/bin/env bash
# Interleaved A/B of two weft-bench binaries (say the release build of a baseline commit and of
# the working tree): ROUNDS rounds of the workloads, each run in a fresh process, base and new
# back to back so both see the same load; every JSON line (with the load average) goes to OUT,
# then a median (min–max) table per metric.
#
#   bench/ab.sh BASE_BIN NEW_BIN [OUT]          # ROUNDS=5, WORKLOADS="w1 w2 w3 w4"
#   ROUNDS=9 WORKLOADS=w1 bench/ab.sh base/weft-bench target/release/weft-bench
set -euo pipefail
base=$1
new=$2
out=${3:-bench/results/ab-$(date -u +%Y-%m-%dT%H-%M-%SZ).jsonl}
rounds=${ROUNDS:-5}
workloads=${WORKLOADS:-w1 w2 w3 w4}
mkdir -p "$(dirname "$out")"
: >"$out"
for round in $(seq 1 "$rounds"); do
  for workload in $workloads; do
    for which in base new; do
      bin=$base
      [ "$which" = new ] && bin=$new
      load=$(cut -d' ' -f1 /proc/loadavg)
      echo "round $round: $which $workload (load $load)" >&2
      line=$("$bin" "$workload" --durability "${DURABILITY:-async}")
      echo "{\"which\":\"$which\",\"round\":$round,\"load\":$load,\"data\":$line}" >>"$out"
    done
  done
done

python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
metrics = {}
for row in rows:
    for key, value in row["data"].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            metrics.setdefault(key, {}).setdefault(row["which"], []).append(value)
loads = [row["load"] for row in rows]
print(f"{max(r['round'] for r in rows)} rounds, load average {min(loads)}–{max(loads)}\n")
print("| metric | base median (min–max) | new median (min–max) |\n|---|---|---|")
def cell(values):
    if not values:
        return "–"
    return f"{statistics.median(values):,.2f} ({min(values):,.2f}–{max(values):,.2f})"
for key in sorted(metrics):
    print(f"| `{key}` | {cell(metrics[key].get('base', []))} | {cell(metrics[key].get('new', []))} |")
PY
echo "wrote $out" >&2
