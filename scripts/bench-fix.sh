#!/usr/bin/env bash
# FIX order round trips (NewOrderSingle -> ExecutionReport New) over 5 sessions, in one run:
# the same load generator (`rialto fix loadgen`, scheduled sends, latency to the report, no
# coordinated omission) against `rialto serve` and against the QuickFIX/J baseline acceptor in
# interop/quickfixj, which does the same bookkeeping per order (ClOrdID check, exact tick and
# lot conversion, an OrderID, an ExecutionReport New; cancels remove the order). The first row
# is the bare 64-byte ping-pong floor, busy-polling. As recorded in docs/benchmarks.md.
#
#   scripts/bench-fix.sh                       # 10,000 orders/s, 5 sessions, batch durability
#   scripts/bench-fix.sh 20000 fsync           # another rate and durability
#   scripts/bench-fix.sh 10000 batch --io spin # extra flags go to `rialto serve`
#   QFJ_ARGS=--memory-store scripts/bench-fix.sh 2000   # the QuickFIX/J acceptor's flags
set -euo pipefail

rate="${1:-10000}"
durability="${2:-batch}"
shift $(( $# >= 2 ? 2 : $# ))
cd "$(dirname "$0")/.."
cargo build --release -q -p rialto-cli
(cd interop/quickfixj && mvn -q -B -Dstyle.color=never package)
bin=target/release/rialto
data="$(mktemp -d)"
store="$(mktemp -d)"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$data" "$store"' EXIT

wait_port() {
  for _ in $(seq 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "nothing listens on $1" >&2
  return 1
}

echo "FIX round trips at $rate orders/s, 5 sessions; $(nproc) cores; $(date -u +%FT%TZ)"
"$bin" serve --demo --data "$data" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
  --fix-listen 127.0.0.1:19878 --durability "$durability" "$@" >/dev/null 2>"$data.log" &
pids+=($!)
wait_port 19878
"$bin" fix loadgen --addr 127.0.0.1:19878 --sessions 5 --rates "$rate" --seconds 5 \
  --warmup-seconds 2 --data "$data" --label "rialto $durability"
kill "${pids[0]}"

# The QuickFIX/J acceptor keeps its messages in a FileStore unless QFJ_ARGS says otherwise.
qfj_args=(--store "$store")
if [ -n "${QFJ_ARGS:-}" ]; then read -ra qfj_args <<< "$QFJ_ARGS"; fi
(cd interop/quickfixj && exec java -cp 'target/classes:target/dependency/*' \
  rialto.interop.BaselineAcceptor --port 19879 "${qfj_args[@]}" >/dev/null 2>&1) &
pids+=($!)
wait_port 19879
"$bin" fix loadgen --addr 127.0.0.1:19879 --sessions 5 --rates "$rate" --seconds 5 \
  --warmup-seconds 2 --label quickfixj --floor-round-trips 0
