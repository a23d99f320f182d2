#!/usr/bin/env bash
# Mutation testing of the core (issue 24): runs cargo-mutants on the modules where a silent
# regression hurts most, each against the tests of its own package, and prints the score per
# module. Too slow for CI on two cores; run it before a release and record the result in
# docs/TESTING.md ("Mutation testing").
#
#   scripts/mutants.sh                    # every module of the set
#   scripts/mutants.sh thread-hash gate-policy
#   scripts/mutants.sh --list             # count the mutants of each module, run nothing
#   scripts/mutants.sh --modules          # the set: name, package, files
#
# Needs cargo-mutants (`cargo install cargo-mutants --locked`). By default the mutants are
# applied in place, in this checkout (fastest: the target directory stays warm), one at a time;
# every file of the module must be free of uncommitted changes, and each is put back (git
# checkout) when the script ends, however it ends. MUTANTS_COPY=1 lets cargo-mutants build
# in a copy of the tree instead (a cold build per module, but the checkout is never touched).
#
# Environment: MUTANTS_TIMEOUT (seconds per mutant's tests, default 300), MUTANTS_BUILD_TIMEOUT
# (default 900), MUTANTS_NICE (default 10), MUTANTS_OUT (default target/mutants: one
# directory per module with cargo-mutants' caught.txt, missed.txt, timeout.txt,
# unviable.txt and logs), MUTANTS_BASELINE=skip to skip the unmutated test run (only when the
# package's tests are known to pass), MUTANTS_ITERATE=1 to test again only the mutants the last
# run in MUTANTS_OUT did not catch (after adding tests; also resumes an interrupted run; the
# counts printed are then those of the re-run). CARGO_TARGET_DIR is honoured. Exits 1 when a mutant
# survived or timed out in any module.
set -euo pipefail
cd "$(dirname "$0")/.."

# name | package | files (space-separated, relative to the workspace root) | the package's test
# targets that cover the module (cargo test arguments; empty: all of the package's tests).
# A subset keeps a run affordable on two cores; it can only under-count the kills (a mutant
# missed by the subset might be caught by a test left out), never over-count.
MODULES=(
  "thread-hash|weft-thread|crates/weft-thread/src/hash.rs|"
  "thread-canonical|weft-thread|crates/weft-thread/src/canonical.rs|"
  "thread-validate|weft-thread|crates/weft-thread/src/validate.rs|"
  "gate-policy|weft-gate|crates/weft-gate/src/policy.rs|--lib --test gates"
  "gate-gates|weft-gate|crates/weft-gate/src/gates.rs|--lib --test gates"
  "profile-layer|weft-runtime|crates/weft-runtime/src/profile/layer.rs|"
  "runtime-pipeline|weft-runtime|crates/weft-runtime/src/pipeline.rs|"
  "runtime-ledger|weft-runtime|crates/weft-runtime/src/ledger.rs|"
  "provider-executor|weft-provider|crates/weft-provider/src/executor.rs|"
  "provider-pipeline|weft-provider|crates/weft-provider/src/pipeline.rs|"
  "provider-tool-loop|weft-provider|crates/weft-provider/src/llm.rs crates/weft-provider/src/strategy.rs|"
  "agent-checkpoint|weft-agent|crates/weft-agent/src/checkpoint/mod.rs crates/weft-agent/src/checkpoint/codec.rs crates/weft-agent/src/checkpoint/file.rs crates/weft-agent/src/checkpoint/writer.rs|"
  "standard-stop-rules|weft-standard|crates/weft-standard/src/side.rs|"
  "standard-session|weft-standard|crates/weft-standard/src/session.rs|"
)

list_only=0
case "${1:-}" in
  --list) list_only=1; shift ;;
  --modules)
    for m in "${MODULES[@]}"; do echo "$m" | tr '|' '\t'; done
    exit 0 ;;
  -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
esac

selected=()
if [[ $# -gt 0 ]]; then
  for want in "$@"; do
    found=0
    for m in "${MODULES[@]}"; do
      if [[ "${m%%|*}" == "$want" ]]; then selected+=("$m"); found=1; fi
    done
    if [[ $found -eq 0 ]]; then
      echo "unknown module: $want (see scripts/mutants.sh --modules)" >&2
      exit 2
    fi
  done
else
  selected=("${MODULES[@]}")
fi

timeout="${MUTANTS_TIMEOUT:-300}"
build_timeout="${MUTANTS_BUILD_TIMEOUT:-900}"
nice_level="${MUTANTS_NICE:-10}"
out_root="${MUTANTS_OUT:-target/mutants}"
in_place=1
if [[ "${MUTANTS_COPY:-0}" == "1" ]]; then in_place=0; fi

# The files this run may mutate in place: put back whatever happens.
touched=()
restore() {
  if [[ ${#touched[@]} -gt 0 ]]; then git checkout --quiet -- "${touched[@]}"; fi
}
trap restore EXIT

count() { if [[ -f "$1" ]]; then grep -c . "$1" || true; else echo 0; fi; }

status=0
summary=()
for m in "${selected[@]}"; do
  IFS='|' read -r name package files test_args <<<"$m"
  read -ra file_list <<<"$files"
  read -ra test_list <<<"$test_args"
  args=(mutants --package "$package" --no-shuffle)
  for f in "${file_list[@]}"; do args+=(--file "$f"); done
  for a in "${test_list[@]}"; do args+=("--cargo-test-arg=$a"); done
  if [[ $list_only -eq 1 ]]; then
    n=$(cargo "${args[@]}" --list | grep -c . || true)
    echo "$name ($package): $n mutants"
    continue
  fi
  if [[ $in_place -eq 1 ]]; then
    if ! git diff --quiet HEAD -- "${file_list[@]}"; then
      echo "$name: uncommitted changes in ${file_list[*]}; commit them or use MUTANTS_COPY=1" >&2
      exit 2
    fi
    touched+=("${file_list[@]}")
    args+=(--in-place) # one mutant at a time
  else
    args+=(-j 1)
  fi
  out="$out_root/$name"
  mkdir -p "$out"
  args+=(--timeout "$timeout" --build-timeout "$build_timeout" --output "$out")
  if [[ "${MUTANTS_BASELINE:-run}" == "skip" ]]; then args+=(--baseline skip); fi
  if [[ "${MUTANTS_ITERATE:-0}" == "1" ]]; then args+=(--iterate); fi
  echo "==> $name ($package: ${file_list[*]}) $(date -u +%FT%TZ)"
  set +e
  nice -n "$nice_level" cargo "${args[@]}"
  code=$?
  set -e
  # cargo-mutants: 0 all caught, 2 some missed, 3 some timed out; anything else is a failure
  # of the run itself (bad arguments, the unmutated tree failing its tests, …).
  if [[ $code -ne 0 && $code -ne 2 && $code -ne 3 ]]; then
    echo "$name: cargo mutants failed (exit $code)" >&2
    status=1
    summary+=("$name | $package | run failed (exit $code)")
    restore
    continue
  fi
  restore
  dir="$out/mutants.out"
  caught=$(count "$dir/caught.txt")
  missed=$(count "$dir/missed.txt")
  timeouts=$(count "$dir/timeout.txt")
  unviable=$(count "$dir/unviable.txt")
  tested=$((caught + missed + timeouts))
  if [[ $tested -gt 0 ]]; then
    score=$(awk -v c="$caught" -v t="$tested" 'BEGIN { printf "%.1f%%", 100 * c / t }')
  else
    score="-"
  fi
  if [[ $((missed + timeouts)) -gt 0 ]]; then status=1; fi
  summary+=("$name | $package | $tested | $caught | $missed | $timeouts | $unviable | $score")
  if [[ $missed -gt 0 ]]; then
    echo "missed in $name:"
    sed 's/^/  /' "$dir/missed.txt"
  fi
done

if [[ $list_only -eq 0 ]]; then
  echo
  echo "module | package | tested | caught | missed | timeout | unviable | score ($(date -u +%F))"
  printf '%s\n' "${summary[@]}"
fi
exit "$status"
