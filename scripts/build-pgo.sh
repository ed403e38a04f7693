#!/usr/bin/env bash
# Builds `rialto` with profile-guided optimisation (PGO): an instrumented build runs a training
# set, and the release build is then laid out and inlined by what that run counted (which
# branches go which way, which functions are hot). The engine's code is the same; on `single`
# it runs about a sixth fewer instructions (docs/benchmarks.md).
#
# The training set is the engine benchmark on seed 7 (the published figures use seed 1, so the
# profile is not trained on the commands it is measured with), a small `multi` with and without
# prefetching, the in-process pipeline (journal, engine thread, replies) and the FIX codec, so
# that the server's own paths are trained too and not laid out as cold code.
#
# Needs rustc's llvm-profdata: the script adds rustup's `llvm-tools` component when it is
# missing. Output: target/pgo/use/release/rialto (the plain `cargo build --release` is untouched).
#
#   scripts/build-pgo.sh
#   target/pgo/use/release/rialto bench engine --passes 5
set -euo pipefail
cd "$(dirname "$0")/.."

sysroot="$(rustc --print sysroot)"
find_profdata() { find "$sysroot/lib/rustlib" -name llvm-profdata -type f 2>/dev/null | head -n 1; }
profdata="$(find_profdata)"
if [ -z "$profdata" ]; then
    echo "== adding rustup's llvm-tools component (for llvm-profdata)"
    rustup component add llvm-tools
    profdata="$(find_profdata)"
fi
if [ -z "$profdata" ]; then
    echo "build-pgo: no llvm-profdata under $sysroot; install rustup's llvm-tools component" >&2
    exit 1
fi

pgo="$PWD/target/pgo"
rm -rf "$pgo/data" "$pgo/train"
mkdir -p "$pgo/train"

echo "== instrumented build (target/pgo/gen)"
RUSTFLAGS="-Cprofile-generate=$pgo/data" \
    cargo build --release --locked -p rialto-cli --target-dir "$pgo/gen"
# Only the training runs' counts: the build scripts above were instrumented too.
rm -rf "$pgo/data"

echo "== training"
trainer="$pgo/gen/release/rialto"
"$trainer" bench engine --seed 7 --commands 2000000 --quiet
for prefetch in on off; do
    "$trainer" bench engine --workload multi --seed 7 --symbols 2000 --accounts 300000 \
        --orders 200000 --commands 300000 --prefetch "$prefetch" --quiet
done
(cd "$pgo/train" && "$trainer" bench pipeline --seed 7 --commands 200000 >/dev/null)
"$trainer" bench fix --rounds 5 >/dev/null

echo "== merging the profile"
"$profdata" merge -o "$pgo/rialto.profdata" "$pgo/data"

echo "== optimised build (target/pgo/use)"
RUSTFLAGS="-Cprofile-use=$pgo/rialto.profdata" \
    cargo build --release --locked -p rialto-cli --target-dir "$pgo/use"
echo "built $pgo/use/release/rialto"
