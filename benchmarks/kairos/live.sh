#!/usr/bin/env bash
# Kairos live benchmark: real `weir executor` processes of three emulated instance types
# (--slowdown 4, 8, 12 at $1.00, $0.45, $0.30 per hour), budget $1.6/h, p99 target 60 ms, jobs and
# executor calls of up to 8 rows. Every pool within the budget (1 fast + 2 slow, 1 fast, 3 mid,
# 5 slow) under Kairos and least outstanding (add round_robin to --policies for it): a sweep of rates with
# 3 trials per rate (largest rate whose median p99 meets 60 ms), and goodput at 200 req/s.
# Writes benchmarks/kairos/live.md, live_points.txt and live.png. About 8-10 minutes; run it under
# `flock /tmp/weir-bench.lock` on a shared machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo run --release -- bench kairos-live --qos-ms 60 --trials 3 --seconds 1.0 --start-rate 50 \
  --rate-step 1.4 --max-rate 400 --goodput-rate 200 --policies kairos,least_outstanding "$@"
