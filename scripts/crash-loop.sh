#!/usr/bin/env bash
# Long crash loop: runs the crash test (crates/cli/tests/crash.rs) with many SIGKILL/restart
# cycles and a fresh seed. Each cycle kills `rialto serve --durability batch|fsync` under
# pipelined trading traffic after 50-400 ms, restarts it on the same data directory and checks
# that every acknowledged command is in the journal at its seq, that nothing appears twice, and
# that the recovered state hash equals `rialto replay` of `rialto journal dump`.
#
#   scripts/crash-loop.sh                 # 200 cycles, seed from the clock
#   scripts/crash-loop.sh 500             # 500 cycles
#   scripts/crash-loop.sh 200 12345       # replay seed 12345 (as printed by a failed run)
#
# The seed is printed first; on a failure the message names the seed and the cycle. Every
# check dumps and replays the whole journal, so cycles slow down as it grows: 200 cycles take
# a few minutes in the test profile. Set CARGO_TARGET_DIR or pass cargo flags through
# CRASH_CARGO_FLAGS (e.g. "--release") as needed.
set -euo pipefail

cycles="${1:-200}"
seed="${2:-$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')}"
cd "$(dirname "$0")/.."

echo "crash loop: RIALTO_CRASH_CYCLES=$cycles RIALTO_CRASH_SEED=$seed"
# shellcheck disable=SC2086 # CRASH_CARGO_FLAGS is a list of flags
RIALTO_CRASH_CYCLES="$cycles" RIALTO_CRASH_SEED="$seed" \
    cargo test ${CRASH_CARGO_FLAGS:-} -p rialto-cli --test crash -- --nocapture
