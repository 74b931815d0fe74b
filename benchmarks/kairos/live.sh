#!/usr/bin/env bash
# Kairos live benchmark: real `weir executor` processes emulating two instance types with
# `--emulate-latency` (a call of n rows takes BASE + PER_ROW × n ms; the paper's DIEN fits ×4):
# emu.gpu 26.24 + 0.0495·n ms at $0.526/h and emu.cpu 3.36 + 0.3271·n ms at $0.149/h. Queries of the
# DeepRecSys production-trace sizes (10..1000 rows), Poisson arrivals, p99 target 140 ms, budget
# $2.5/h. Pools: the one `weir plan` picks (3 gpu + 6 cpu) and the homogeneous 4 gpu, each under
# Kairos (weir's, which batches queued queries), Kairos with one query per call (the paper's),
# least outstanding and round robin. Kairos gets a latency profile measured through weir before
# the sweep, in YAML. Per set-up: 3 trials of max(4 s, 200 queries) per rate on a ×1.2 grid from
# 40 queries/s; largest rate whose median p99 meets the target; goodput at 80 queries/s.
# Writes benchmarks/kairos/live.md, live_points.txt and live.png. About 14 minutes; run it under
# `flock /tmp/weir-bench.lock` on a shared machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo run --release -- bench kairos-live --budget 2.5 --qos-ms 140 --trials 3 --seconds 4 \
  --min-queries 200 --start-rate 40 --rate-step 1.2 --max-rate 210 --goodput-rate 80 "$@"
