#!/usr/bin/env bash
# HAMS benchmarks (notes/hams.md §5.2 X1, X3, X4): two regimes, tables into benchmarks/hams/.
#   gpu_like.md : 10 ms emulated compute per stateful batch, batches of 32, 64 clients
#                 (the paper's regime: batch compute ≫ state copy, scaled down)
#   cpu_only.md : the real ONNX Runtime call only (sub-millisecond batches), batches of 8, 8 clients
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q
WEIR=target/release/weir
$WEIR bench hams --compute-ms 10 --concurrency 64 --batch 32 --requests 2000 --repeats 3 --trials 10 \
  2>/dev/null | tee benchmarks/hams/gpu_like.md
$WEIR bench hams --compute-ms 0 --concurrency 8 --batch 8 --requests 2000 --repeats 3 --trials 10 \
  2>/dev/null | tee benchmarks/hams/cpu_only.md
# X2: the 1 MiB online learner's overhead per batch size (fixed state, compute grows with the batch)
$WEIR bench hams --compute-ms 0 --requests 1000 --repeats 3 --sweep-batch 1,4,16,64 \
  --plot benchmarks/hams/batch_sweep.png 2>/dev/null | tee benchmarks/hams/batch_sweep.md
# R16 / X10: lineage cost per batch of 64 rows against the path length
$WEIR bench hams --lineage 2>/dev/null | tee benchmarks/hams/lineage_cost.md
# X7: released outputs a checkpoint replay contradicts under non-determinism, per checkpoint
# interval, against NSPB (counts, not timings; plot benchmarks/hams/divergence.png)
$WEIR bench hams --divergence 1,10,50,100,150 --trials 10 --batch 8 --concurrency 16 \
  --plot benchmarks/hams/divergence.png 2>/dev/null | tee benchmarks/hams/divergence.md
