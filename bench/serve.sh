#!/usr/bin/env bash
# Runs the `weft serve` benchmark (crates/weft-server/benches/serve.rs): N concurrent
# streaming chats per level, the server in a child process. Writes the JSON lines to
# bench/results/serve-STAMP.jsonl.
#
#   bench/serve.sh                                  # levels 100, 500, 1000
#   WEFT_SERVE_BENCH_LEVELS=2000 bench/serve.sh
#   WEFT_SERVE_BENCH_CHUNKS=40 WEFT_SERVE_BENCH_INTERVAL_MS=250 bench/serve.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# Two sockets per stream (client and server) plus the store: raise the descriptor limit.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
mkdir -p bench/results
out="bench/results/serve-$(date -u +%Y-%m-%dT%H-%M-%SZ).jsonl"
echo "machine: $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
cargo bench -p weft-server --bench serve | tee "$out"
echo "wrote $out" >&2
