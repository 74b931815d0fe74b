#!/usr/bin/env bash
# SERF's live parallelism switch on real ONNX Runtime (note X7, requirement S4): the same
# piecewise-Poisson arrivals, moderate → low → moderate (0.55 and 0.2 × the largest configuration
# capacity, 60 s each), served once with `parallelism: auto` and once per fixed (concurrency ×
# intra-op threads) configuration stable at moderate load, on the zoo's shufflenet (a model whose
# intra- and inter-request configurations trade places with the load; `--model` for another);
# mean latency per phase and over the run; intra-op threads spin in every set-up.
# Writes benchmarks/serf/phases.md and phases.png. Three runs: about 30 minutes on 2 cores
# (three set-ups per run). Run it under `flock /tmp/weir-bench.lock` on a shared machine so
# timed benchmarks do not overlap.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/setup.sh >/dev/null
cargo build --release --quiet
WEIR_LOG=error,weir_operators=info "${CARGO_TARGET_DIR:-target}/release/weir" bench serf --phases --runs 3 --samples 40 "$@"
