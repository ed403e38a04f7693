#!/usr/bin/env bash
# The Jepsen-style fault test of the replicated log (crates/cli/tests/jepsen.rs,
# docs/replication.md "The fault test") with more fault cycles than CI runs, and its summary.
#
#   scripts/jepsen.sh            # 200 fault cycles
#   scripts/jepsen.sh 50         # 50
#   JEPSEN_SEED=123 scripts/jepsen.sh 200   # the schedule of a seed printed before
#
# It runs `cargo test -p rialto-cli --test jepsen` with JEPSEN_CYCLES (extra cargo flags, such
# as --release, in $JEPSEN_CARGO_FLAGS), prints each cycle's fault as it goes, and ends with the
# summary table: faults injected by kind, orders acknowledged, lost, duplicated and
# divergences (the test fails unless the last three are zero). The whole output is kept in
# $JEPSEN_LOG (target/jepsen.log by default). `nats-server` is found on PATH or in ~/go/bin.
set -euo pipefail
cd "$(dirname "$0")/.."

cycles="${1:-200}"
[[ "$cycles" =~ ^[1-9][0-9]*$ ]] || { echo "jepsen.sh: CYCLES must be a positive number, not '$cycles'" >&2; exit 2; }
export PATH="$PATH:$HOME/go/bin"
log="${JEPSEN_LOG:-target/jepsen.log}"
mkdir -p "$(dirname "$log")"

echo "jepsen.sh: $cycles fault cycles; the whole output goes to $log"
status=0
# shellcheck disable=SC2086 # the extra flags are words
JEPSEN_CYCLES="$cycles" cargo test ${JEPSEN_CARGO_FLAGS:-} -p rialto-cli --test jepsen -- \
    --nocapture --test-threads=1 >"$log" 2>&1 &
test_pid=$!
# Follow the log: the seed, each cycle, the summary table and any failure.
tail -n +1 -f "$log" --pid="$test_pid" | grep --line-buffered -E '(^|\.\.\. )jepsen|^\||^seed |^thread ' || true
wait "$test_pid" || status=$?
if ((status == 0)); then
    echo "jepsen.sh: passed ($cycles cycles)"
else
    echo "jepsen.sh: FAILED (exit $status); the seed is on the first line above, the output in $log" >&2
fi
exit "$status"
