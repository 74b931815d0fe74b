#!/usr/bin/env bash
# SERF on real ONNX Runtime: profile the model (10 requests per tuple), then run every fixed
# (concurrency × intra-op threads) configuration as a one-node graph under open-loop Poisson load at
# 10 levels and compare measured mean latency with the M/D_interf/c prediction. Writes
# benchmarks/serf/ort.md and ort.png. About 3-5 minutes on 2 cores for squeezenet; add
# `--model .weir/zoo/squeezenet.onnx --model .weir/zoo/resnet50.onnx` for both models (longer).
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/setup.sh >/dev/null
cargo build --release --quiet
WEIR_LOG=error "${CARGO_TARGET_DIR:-target}/release/weir" bench serf "$@"
