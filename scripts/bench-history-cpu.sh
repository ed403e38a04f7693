#!/usr/bin/env bash
# What durable history costs the server in CPU, per thread, as recorded in docs/benchmarks.md
# ("History on against off under load"). Latency percentiles on a shared 2-core machine move
# with whatever else runs; CPU time spent per order moves far less, so this counts it.
#
# Each run starts a fresh `rialto serve` (release build, `--durability batch`, FIX off, no
# per-session message rate limit, which a stalled load generator's catch-up burst on a busy
# host would trip) on spare loopback ports with `--history off` or `--history on`, offers `rialto loadgen`'s `single`
# mix at RATE orders/s for 1 s of warm-up and SECONDS measured (no floors), waits until the
# history database has caught up with the engine (`rialto_history_lag_seqs` 0), then reads
# each server thread's CPU time (utime + stime, /proc/PID/task/TID/stat) and subtracts what it
# had used before the load. Runs alternate off and on (and, with BASE_BIN, the base build's
# off and on before this build's), PAIRS times, so that every configuration sees the same
# noise; the table at the end gives each thread's median CPU per 100,000 orders, and loadgen's
# median p50 and p99.
#
#   scripts/bench-history-cpu.sh                   # 3 pairs, 100,000 orders/s for 5 s
#   PAIRS=5 RATE=50000 scripts/bench-history-cpu.sh
#   BASE_BIN=/tmp/rialto-hist-base scripts/bench-history-cpu.sh   # an A/B of two builds
#   RIALTO_BIN=/tmp/rialto-new scripts/bench-history-cpu.sh --set history.writer_priority=idle
#
# Extra arguments go to every `rialto serve`.
set -euo pipefail

pairs="${PAIRS:-3}"
rate="${RATE:-100000}"
seconds="${SECONDS_MEASURED:-5}"
cd "$(dirname "$0")/.."
bin="${RIALTO_BIN:-target/release/rialto}"
[ -n "${RIALTO_BIN:-}" ] || cargo build --release -q -p rialto-cli
work="$(mktemp -d)"
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"' EXIT

# name<TAB>ticks for every thread of process $1, summed by thread name.
thread_ticks() {
  for stat in /proc/"$1"/task/*/stat; do
    cat "$stat" 2>/dev/null || true
  done | awk '{
    # The name is in parentheses and may hold spaces: fields after its ")" are counted.
    lp = index($0, "("); rp = match($0, /\) [A-Z] /);
    name = substr($0, lp + 1, rp - lp - 1);
    split(substr($0, rp + 2), f, " ");
    ticks[name] += f[12] + f[13];   # utime, stime (fields 14 and 15)
  } END { for (n in ticks) printf "%s\t%d\n", n, ticks[n] }'
}

metric() { curl -s "http://127.0.0.1:19312/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

# run LABEL BIN HISTORY: one measured run; appends "LABEL<TAB>thread<TAB>ms" lines to
# $work/cpu and "LABEL<TAB>p50_us<TAB>p99_us<TAB>lag" to $work/lat.
run() {
  local label="$1" b="$2" history="$3"; shift 3
  local data="$work/data"
  rm -rf "$data"
  "$b" serve --data "$data" --listen 127.0.0.1:19310 --admin-listen 127.0.0.1:19311 \
    --web-listen 127.0.0.1:19312 --durability batch --history "$history" \
    --set fix.enabled=false --set gateway.max_msgs_per_sec=0 "$@" \
    >/dev/null 2>"$work/serve.log" &
  server=$!
  for _ in $(seq 200); do
    [ -f "$data/venue.key" ] && (exec 3<>/dev/tcp/127.0.0.1/19310) 2>/dev/null && break
    sleep 0.1
  done
  local max_lag=0 lag
  (while true; do
     lag=$(metric rialto_history_lag_seqs); lag=${lag%.*}
     [ "${lag:-0}" -gt "$max_lag" ] && max_lag=$lag && echo "$max_lag" > "$work/lag"
     sleep 0.1
   done) &
  local sampler=$!
  echo 0 > "$work/lag"
  thread_ticks "$server" > "$work/before"
  "$b" loadgen --addr 127.0.0.1:19310 --admin-addr 127.0.0.1:19311 --data "$data" \
    --rates "$rate" --seconds "$seconds" --warmup-seconds 1 --floor-round-trips 0 \
    --no-rate-floor --json 2>"$work/loadgen.err" > "$work/loadgen.json" || {
      echo "loadgen failed ($label):"; cat "$work/loadgen.err"; tail -n 5 "$work/serve.log"; exit 1; }
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null || true
  # The writer may still be catching up: its CPU counts too.
  for _ in $(seq 600); do
    lag=$(metric rialto_history_lag_seqs); lag=${lag%.*}
    [ "${lag:-0}" -eq 0 ] && break
    sleep 0.1
  done
  thread_ticks "$server" > "$work/after"
  kill "$server"; wait "$server" 2>/dev/null || true
  server=""
  local hz orders
  hz=$(getconf CLK_TCK)
  orders=$(( rate * (seconds + 1) ))
  awk -F'\t' -v label="$label" -v hz="$hz" -v orders="$orders" '
    NR == FNR { before[$1] = $2; next }
    { ms = ($2 - before[$1]) * 1000 / hz * 100000 / orders; total += ms
      if (ms > 0) printf "%s\t%s\t%.1f\n", label, $1, ms }
    END { printf "%s\t(all threads)\t%.1f\n", label, total }' \
    "$work/before" "$work/after" >> "$work/cpu"
  python3 - "$label" "$(cat "$work/lag")" "$work/loadgen.json" >> "$work/lat" <<'EOF'
import json, sys
row = [r for r in json.load(open(sys.argv[3]))["rows"] if r["label"].startswith("rialto")][-1]
print(f"{sys.argv[1]}\t{row['p50_ns'] / 1000:.1f}\t{row['p99_ns'] / 1000:.1f}\t{sys.argv[2]}")
EOF
  tail -n 1 "$work/lat" | awk -F'\t' '{ printf "%-10s p50 %8.1f us  p99 %8.1f us  history lag at most %s seqs\n", $1, $2, $3, $4 }'
}

echo "bench-history-cpu: $rate orders/s, 1 + $seconds s a run, $pairs pairs; $(nproc) cores; $(date -u +%FT%TZ); serve flags: $*"
for i in $(seq "$pairs"); do
  if [ -n "${BASE_BIN:-}" ]; then
    run base-off "$BASE_BIN" off "$@"
    run base-on "$BASE_BIN" on "$@"
  fi
  run off "$bin" off "$@"
  run on "$bin" on "$@"
done
echo
echo "server CPU per 100,000 orders, ms (median of $pairs runs), by thread:"
python3 - "$work/cpu" "$work/lat" <<'EOF'
import statistics, sys
from collections import defaultdict
cpu = defaultdict(lambda: defaultdict(list))
labels = []
for line in open(sys.argv[1]):
    label, thread, ms = line.rstrip("\n").split("\t")
    cpu[thread][label].append(float(ms))
    if label not in labels:
        labels.append(label)
print(f"{'thread':<18}" + "".join(f"{l:>12}" for l in labels))
threads = sorted(cpu, key=lambda t: (t == "(all threads)", -max(sum(v) for v in cpu[t].values())))
for t in threads:
    cells = []
    for l in labels:
        v = cpu[t].get(l, [])
        cells.append(f"{statistics.median(v + [0.0] * (len(cpu['(all threads)'][l]) - len(v))):>12.1f}")
    print(f"{t:<18}" + "".join(cells))
lat = defaultdict(lambda: ([], []))
for line in open(sys.argv[2]):
    label, p50, p99, _ = line.rstrip("\n").split("\t")
    lat[label][0].append(float(p50)); lat[label][1].append(float(p99))
print()
for l in labels:
    p50, p99 = lat[l]
    print(f"{l:<10} loadgen p50 {statistics.median(p50):9.1f} us, p99 {statistics.median(p99):9.1f} us (medians)")
EOF
