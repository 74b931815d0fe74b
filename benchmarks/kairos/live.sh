#!/usr/bin/env bash
# Kairos live benchmark: real `weir executor` processes of three emulated instance types
# (--slowdown 4, 8, 12 at $1.00, $0.45, $0.30 per hour), budget $1.6/h, p99 target 40 ms.
# Kairos vs round robin vs least outstanding on 1 fast + 2 slow, and every homogeneous pool within
# the budget. Writes benchmarks/kairos/live.md and benchmarks/kairos/live.png. About 15-25 minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo run --release -- bench kairos-live --repeats 3 --seconds 2 "$@"
