#!/usr/bin/env bash
# Compares ONNX Runtime's CUDA execution provider against its CPU one on the set-up's models,
# through weir: the test `triton_gpu` serves digits_mlp, squeezenet (seeded weights) and PP-OCR's
# orientation classifier from a repository whose configurations ask for KIND_GPU instance
# groups, and checks every answer against ONNX Runtime on the CPU.
#
#   scripts/gpu-check.sh            on a machine with an NVIDIA GPU, CUDA 12 and cuDNN 9
#
# Needs: scripts/setup.sh (the fixtures) and scripts/setup.sh --gpu (the onnxruntime-gpu
# wheel's libraries in $WEIR_HOME/onnxruntime-gpu; how the wheel reaches a machine without
# network access: docs/triton.md, "GPU"). Refuses, with exit status 2, on a machine without a
# GPU or without those libraries; the test itself fails rather than skips (WEIR_REQUIRE_GPU).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WEIR_HOME="${WEIR_HOME:-$ROOT/.weir}"
GPU_LIB="${WEIR_GPU_ORT_DYLIB:-$WEIR_HOME/onnxruntime-gpu/libonnxruntime.so}"

refuse() { echo "gpu-check: refused: $*" >&2; exit 2; }

command -v nvidia-smi >/dev/null 2>&1 \
    || refuse "no NVIDIA GPU here (nvidia-smi not found); run this on a machine with a CUDA device"
nvidia-smi -L 2>/dev/null | grep -q '^GPU ' \
    || refuse "no CUDA device: nvidia-smi lists no GPU"
[[ -e "$GPU_LIB" && -e "$(dirname "$GPU_LIB")/libonnxruntime_providers_cuda.so" ]] \
    || refuse "$GPU_LIB and its CUDA provider are missing: run scripts/setup.sh --gpu"
[[ -e "$WEIR_HOME/models/mlp_a.onnx" ]] || refuse "the test fixtures are missing: run scripts/setup.sh"

# cuDNN and cuBLAS from NVIDIA's pip wheels, when the venv has them (else the system's).
extra=""
for d in "$WEIR_HOME"/venv/lib/python3*/site-packages/nvidia/*/lib; do
    [[ -d "$d" ]] && extra="$extra:$d"
done
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}$extra"

nvidia-smi -L
cd "$ROOT"
WEIR_GPU_ORT_DYLIB="$GPU_LIB" WEIR_REQUIRE_GPU=1 \
    cargo test -p weir --test it triton_gpu -- --nocapture
