#!/usr/bin/env bash
# Kairos simulator benchmark: allowable throughput under QoS for the paper's five models at $2.5/h.
# Writes benchmarks/kairos/simulate.md and benchmarks/kairos/simulate.png. About 1-3 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo run -p weir-kairos --release --example simulate "$@"
