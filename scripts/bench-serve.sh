#!/usr/bin/env bash
# End-to-end latency of `rialto serve` under `rialto loadgen`, as recorded in docs/benchmarks.md.
# Starts a fresh server (release build) on spare loopback ports with the given durability and
# any extra serve flags, offers the `single` mix at each rate (scheduled sends, latency to the
# acknowledgement, no coordinated omission), prints loadgen's table (the first row is the bare
# 64-byte ping-pong floor in the same socket mode), and stops the server.
#
#   scripts/bench-serve.sh batch                       # rates 10k,50k,100k,200k
#   scripts/bench-serve.sh fsync "10000,50000,100000"
#   scripts/bench-serve.sh batch "100000" --io spin     # extra flags go to `rialto serve`
#   GATEWAY_CPU=1 scripts/bench-serve.sh batch 100000   # the gateway thread alone on CPU 1
#   RIALTO_BIN=/tmp/rialto-base scripts/bench-serve.sh batch 100000   # another build, for A/B runs
#
# The history database's lag behind the engine (`rialto_history_lag_seqs` in /metrics, sampled
# every 100 ms while loadgen runs) is printed after the table: its maximum and the batches it
# dropped. Compare `--history on` with `--history off` (extra serve flags) for what it costs;
# scripts/bench-history-cpu.sh counts that cost in each server thread's CPU time instead.
#
# With GATEWAY_CPU=N the server runs with `pipeline.gateway_cpu = N`, and the load generator
# runs on CPU LOADGEN_CPU (default 0), the server's other threads beside it; the floor's echo
# thread runs on CPU N, so that the floor crosses the same two CPUs.
set -euo pipefail

durability="${1:-batch}"
rates="${2:-10000,50000,100000,200000}"
shift $(( $# >= 2 ? 2 : $# ))
cd "$(dirname "$0")/.."
bin="${RIALTO_BIN:-target/release/rialto}"
[ -n "${RIALTO_BIN:-}" ] || cargo build --release -q -p rialto-cli
data="$(mktemp -d)"
trap 'kill "$server" "${sampler:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$data" "$data.log" "$data.lag"' EXIT

pin_serve=() pin_loadgen=()
if [ -n "${GATEWAY_CPU:-}" ]; then
  pin_serve=(--set "pipeline.gateway_cpu=$GATEWAY_CPU")
  pin_loadgen=(--cpu "${LOADGEN_CPU:-0}" --floor-echo-cpu "$GATEWAY_CPU")
fi
"$bin" serve --data "$data" --listen 127.0.0.1:19300 --admin-listen 127.0.0.1:19301 \
  --web-listen 127.0.0.1:19302 --durability "$durability" "${pin_serve[@]}" "$@" >/dev/null 2>"$data.log" &
server=$!
for _ in $(seq 100); do
  [ -f "$data/venue.key" ] && (exec 3<>/dev/tcp/127.0.0.1/19300) 2>/dev/null && break
  sleep 0.1
done
echo "rialto serve --durability $durability ${pin_serve[*]} $*; $(nproc) cores; $(date -u +%FT%TZ)"
metric() { curl -s http://127.0.0.1:19302/metrics | awk -v m="$1" '$1 == m { print $2 }'; }
if [ -n "$(metric rialto_history_lag_seqs)" ]; then
  (max=0; while true; do
     lag=$(metric rialto_history_lag_seqs); lag=${lag%.*}
     [ "${lag:-0}" -gt "$max" ] && max=$lag && echo "$max" > "$data.lag"
     sleep 0.1
   done) &
  sampler=$!
fi
"$bin" loadgen --addr 127.0.0.1:19300 --admin-addr 127.0.0.1:19301 --data "$data" \
  --rates "$rates" --seconds 5 --warmup-seconds 1 --floor-round-trips 50000 "${pin_loadgen[@]}" \
  2>/dev/null
if [ -n "${sampler:-}" ]; then
  kill "$sampler"
  echo "history database: lag at most $(cat "$data.lag" 2>/dev/null || echo 0) seqs behind the engine" \
    "(sampled every 100 ms), $(metric rialto_history_dropped_batches) batches dropped"
else
  echo "history database: off"
fi
