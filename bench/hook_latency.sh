#!/bin/sh
# Latency of `weft hook pre-tool-use` (what a harness pays before every tool call), measured
# with hyperfine on a scratch git repository. Usage: bench/hook_latency.sh [path/to/weft]
# (default: target/release/weft; build it with `cargo build --release -p weft-cli`).
set -eu
WEFT=${1:-${CARGO_TARGET_DIR:-target}/release/weft}
WEFT=$(cd "$(dirname "$WEFT")" && pwd)/$(basename "$WEFT")
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
cd "$DIR"
git init -q -b main
git -c user.name=b -c user.email=b@example.invalid commit -q --allow-empty -m init
"$WEFT" worktree create bench >/dev/null
for i in 1 2 3 4 5; do "$WEFT" policy add "p$i" --level RECOMMENDED --tools shell --deny-pattern "never-matches-$i" >/dev/null; done
allow='{"session_id":"b","hook_event_name":"PreToolUse","cwd":"'"$DIR"'","tool_name":"Edit","tool_input":{"file_path":"'"$DIR"'/.worktrees/001-bench/src/lib.rs","old_string":"a","new_string":"b"}}'
deny='{"session_id":"b","hook_event_name":"PreToolUse","cwd":"'"$DIR"'","tool_name":"Bash","tool_input":{"command":"cd x && bash -c \"git push --force origin main\""}}'
printf '%s' "$allow" > allow.json
printf '%s' "$deny" > deny.json
echo '{"session_id":"b","hook_event_name":"SessionStart","cwd":"'"$DIR"'","source":"startup"}' > start.json
# hyperfine 1.15 has no --input: each run goes through `sh -c`, whose start-up hyperfine
# measures and subtracts.
hyperfine -S sh --warmup 20 --runs 300 -i \
  -n "pre-tool-use allow (Edit in a worktree)" "$WEFT hook pre-tool-use --harness claude < allow.json" \
  -n "pre-tool-use deny (force push, bash -c)" "$WEFT hook pre-tool-use --harness claude < deny.json" \
  -n "session-start" "$WEFT hook session-start --harness claude < start.json" \
  -n "weft --version (process start, no hook work)" "$WEFT --version"
