#!/usr/bin/env bash
# Runs SEEDS seeds (default 10000) of the deterministic simulator with a release build and
# prints one table: seeds, simulated hours, commands, faults injected by kind, recoveries,
# failures (docs/simulation.md). Each failing seed is listed with the command that replays it.
#   scripts/sim.sh [SEEDS] [TICKS] [FIRST_SEED]
# Exit status 1 if any seed failed.
set -euo pipefail
seeds=${1:-10000} ticks=${2:-1000} first=${3:-1}
cd "$(dirname "$0")/.."
cargo build --release -q -p rialto-cli --bin rialto
bin=${CARGO_TARGET_DIR:-target}/release/rialto
started=$(date +%s)
status=0
"$bin" sim --seed "$first" --seeds "$seeds" --ticks "$ticks" || status=$?
echo "($(( $(date +%s) - started )) s of wall time)"
exit $status
