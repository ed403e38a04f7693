#!/usr/bin/env bash
# The FIX codec against QuickFIX/J's, in one script: `rialto bench fix` and QuickFIX/J's
# `CodecBench` (interop/quickfixj) time the same 214-byte NewOrderSingle and a fill report; they
# run in turn RUNS times (this machine is shared and noisy: alternating spreads the noise over
# both), and the script prints each run's medians, then the median of each and the ratios.
# As recorded in docs/benchmarks.md.
#
#   scripts/bench-fix-codec.sh        # 5 runs of each
#   scripts/bench-fix-codec.sh 9      # 9 runs of each
set -euo pipefail

runs="${1:-5}"
cd "$(dirname "$0")/.."
cargo build --release -q -p rialto-cli
(cd interop/quickfixj && mvn -q -B -Dstyle.color=never package)
results="$(mktemp)"
trap 'rm -f "$results"' EXIT

echo "FIX codec, rialto against quickfixj, $runs runs each in turn; $(nproc) cores; $(date -u +%FT%TZ)"
for run in $(seq "$runs"); do
  ./target/release/rialto bench fix | grep median_ns >>"$results"
  (cd interop/quickfixj &&
    java -cp 'target/classes:target/dependency/*' rialto.interop.CodecBench 2>/dev/null) |
    grep median_ns >>"$results"
  echo "run $run done"
done

# Lines look like "rialto parse_validate_new_order_single median_ns=236".
awk '
  {
    split($3, kv, "=")
    key = $1 " " $2
    values[key] = values[key] " " kv[2]
    count[key]++
  }
  function median(list,    n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 2; i <= n; i++) {
      t = a[i]
      for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]
      a[j + 1] = t
    }
    return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  END {
    order = "rialto parse_new_order_single,rialto parse_validate_new_order_single," \
      "quickfixj parse_new_order_single,rialto encode_execution_report," \
      "quickfixj encode_execution_report"
    n = split(order, keys, ",")
    for (i = 1; i <= n; i++) {
      key = keys[i]
      m[key] = median(values[key])
      printf "%-40s median %7.1f ns   runs:%s\n", key, m[key], values[key]
    }
    q_parse = m["quickfixj parse_new_order_single"]
    q_encode = m["quickfixj encode_execution_report"]
    r_parse = m["rialto parse_validate_new_order_single"]
    r_encode = m["rialto encode_execution_report"]
    if (r_parse > 0 && r_encode > 0) {
      printf "parse with validation: quickfixj / rialto = %.1fx\n", q_parse / r_parse
      printf "write an ExecutionReport: quickfixj / rialto = %.1fx\n", q_encode / r_encode
    }
  }
' "$results"
