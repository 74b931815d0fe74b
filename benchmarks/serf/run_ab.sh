#!/usr/bin/env bash
# Paired A/B of two weir binaries on `weir bench serf --phases`: for each seed, one run of each binary
# on the same arrivals (the seed), the order alternating from pair to pair so that neither binary
# always runs first on a drifting VM. Each run is its own process (`--runs 1`), writes its table,
# plot, calls trace and log under OUT as a<seed>.{md,png,log} and a<seed>/ (calls CSVs; b for B_BIN).
# Pool each side afterwards with `benchmarks/serf/pool_phases.py OUT/a*.md` and `OUT/b*.md`.
#
# Usage: benchmarks/serf/run_ab.sh A_BIN B_BIN MODERATE LOW OUT SEED...
#   A_BIN, B_BIN  two built `weir` binaries (e.g. an older commit's, copied aside, and HEAD's)
#   MODERATE, LOW the phases' rates, requests/s
#   OUT           a folder for the results
# Example (the twenty-fourth session's):
#   git checkout 4a2bc44 -- serf && cargo build --release && cp target/release/weir /tmp/weir-old
#   git checkout HEAD -- serf && cargo build --release && cp target/release/weir /tmp/weir-new
#   benchmarks/serf/run_ab.sh /tmp/weir-old /tmp/weir-new 135 50 /tmp/ab 170 171 172
set -euo pipefail
if [ $# -lt 6 ]; then
  sed -n '2,15p' "$0" >&2
  exit 2
fi
a_bin=$1 b_bin=$2 moderate=$3 low=$4 out=$5
shift 5
cd "$(dirname "$0")/../.."
export ORT_DYLIB_PATH=${ORT_DYLIB_PATH:-$PWD/.weir/onnxruntime/libonnxruntime.so}
export WEIR_LOG=${WEIR_LOG:-error,weir_operators=info}
mkdir -p "$out"
pair=0
for seed in "$@"; do
  if [ $((pair % 2)) -eq 0 ]; then order="a b"; else order="b a"; fi
  for side in $order; do
    if [ "$side" = a ]; then bin=$a_bin; else bin=$b_bin; fi
    mkdir -p "$out/$side$seed"
    "$bin" bench serf --phases --runs 1 --samples 40 --moderate-rate "$moderate" --low-rate "$low" \
      --fixed 2x1 --seed "$seed" --calls-csv "$out/$side$seed" \
      --phases-table "$out/$side$seed.md" --phases-plot "$out/$side$seed.png" \
      > "$out/$side$seed.log" 2>&1
  done
  pair=$((pair + 1))
done
