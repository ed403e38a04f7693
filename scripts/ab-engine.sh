#!/usr/bin/env bash
# A/B of `rialto bench engine` between two builds, runs interleaved (A, B, A, B, ...) so that
# the host's slow and fast minutes fall on both alike; prints each run and the medians.
#   scripts/ab-engine.sh BASE_BINARY NEW_BINARY [PAIRS] [bench engine arguments...]
# e.g. scripts/ab-engine.sh /tmp/rialto-base target/release/rialto 15 --workload multi --commands 1000000
set -euo pipefail
base=$1 new=$2 pairs=${3:-15}
shift $(( $# < 3 ? $# : 3 ))
run() { local bin=$1; shift; "$bin" bench engine --json "$@" 2>/dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(round(r["throughput_per_s"] / 1e6, 3), r["latency_ns"]["p50"], r["latency_ns"]["p99"])'; }
out=$(mktemp)
for i in $(seq "$pairs"); do
    for side in base new; do
        bin=$base; [ "$side" = new ] && bin=$new
        line=$(run "$bin" "$@")
        echo "$side $line" | tee -a "$out"
    done
done
python3 - "$out" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {s: [statistics.median(float(r[i]) for r in rows if r[0] == s) for i in (1, 2, 3)] for s in ("base", "new")}
for s in ("base", "new"):
    print(f"{s}: median {med[s][0]:.2f} M commands/s, p50 {med[s][1]:.0f} ns, p99 {med[s][2]:.0f} ns")
print(f"change: {100 * (med['new'][0] / med['base'][0] - 1):+.1f}% throughput")
PY
rm -f "$out"
