#!/usr/bin/env bash
# SERF model vs discrete-event simulation: prediction error of mean latency over synthetic and
# ONNX-Runtime-shaped service-rate profiles × configurations × 10 loads, the Fig. 9 baselines, and whether
# the model picks the simulator's best configuration. Writes benchmarks/serf/model_vs_sim.md and .png.
# About 1-2 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo run -p weir-serf --release --example model_vs_sim "$@"
