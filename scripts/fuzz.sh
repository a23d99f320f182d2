#!/usr/bin/env bash
# Fuzzing campaign: runs every cargo-fuzz target in fuzz/ (or the ones named) one after the
# other for SECONDS each (default 3600, as issue 24 asks for a release campaign), seeded by
# fuzz/seed.sh from the repository's recordings and fixtures, and prints one line per target
# (executions, coverage, corpus size, crash). Needs the nightly toolchain and cargo-fuzz
# (`cargo install cargo-fuzz`). Not part of CI (too slow); the stable test
# `cargo test -p weft-fuzz` replays the committed seeds and crash regressions instead.
#
#   scripts/fuzz.sh                       # every target, 3600 s each
#   scripts/fuzz.sh -t 180 sse_decode     # one target, 3 minutes
#
# Environment: FUZZ_TARGET_DIR (default target/fuzz), FUZZ_JOBS (libFuzzer -fork workers,
# default 0: one process), FUZZ_NICE (default 10). Crashes are written to
# fuzz/artifacts/TARGET/; minimize one with `cargo +nightly fuzz tmin TARGET FILE`, fix the
# library, and keep the minimized input in fuzz/regressions/TARGET/ (replayed by the stable
# test). Logs go to fuzz/logs/TARGET.log. The script exits 1 when any target crashed.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=3600
if [[ "${1:-}" == "-t" ]]; then
  seconds="$2"
  shift 2
fi
if [[ $# -gt 0 ]]; then
  targets=("$@")
else
  mapfile -t targets < <(ls fuzz/seeds)
fi
target_dir="${FUZZ_TARGET_DIR:-$PWD/target/fuzz}"
jobs="${FUZZ_JOBS:-0}"
nice_level="${FUZZ_NICE:-10}"

fuzz/seed.sh "${targets[@]}"
mkdir -p fuzz/logs
status=0
summary=()
for target in "${targets[@]}"; do
  log="fuzz/logs/$target.log"
  extra=()
  if [[ "$jobs" -gt 0 ]]; then extra+=("-fork=$jobs"); fi
  echo "==> $target: ${seconds}s ($(date -u +%FT%TZ))"
  set +e
  (cd fuzz && nice -n "$nice_level" cargo +nightly fuzz run -O --target-dir "$target_dir" "$target" \
    -- -max_total_time="$seconds" -print_final_stats=1 "${extra[@]}") >"$log" 2>&1
  code=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || true)
  cov=$(grep -oE '(#[0-9]+|DONE) +[A-Z]+ +cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+' || true)
  corpus=$(ls "fuzz/corpus/$target" | wc -l)
  if [[ $code -eq 0 ]]; then
    result="no crash"
  else
    result="CRASH (exit $code; see $log and fuzz/artifacts/$target/)"
    status=1
  fi
  summary+=("$target | ${seconds}s | ${execs:-?} execs | ${cov:-?} | corpus $corpus | $result")
done
echo
echo "target | time | executions | coverage | corpus | result ($(date -u +%F))"
printf '%s\n' "${summary[@]}"
exit $status
