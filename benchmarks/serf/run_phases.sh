#!/usr/bin/env bash
# SERF's live parallelism switch on real ONNX Runtime: the same piecewise-Poisson arrivals,
# moderate → low → moderate, served once with `parallelism: auto` and once per fixed
# (concurrency × intra-op threads) configuration stable at moderate load; mean latency per phase
# and over the run; intra-op threads spin in every set-up (`--spinning false` to compare).
# Writes benchmarks/serf/phases.md and phases.png. Three runs of 3 × 20 s: about 11 minutes on
# 2 cores (three set-ups per run). Run it under `flock /tmp/weir-bench.lock` on a shared machine so
# timed benchmarks do not overlap.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/setup.sh >/dev/null
cargo build --release --quiet
WEIR_LOG=error,weir_operators=info "${CARGO_TARGET_DIR:-target}/release/weir" bench serf --phases --phase-seconds 20 --runs 3 --samples 40 "$@"
