#!/usr/bin/env bash
# SERF's prediction on a quieter host (the device machine lent to some sessions: 16 cores, nothing
# else running), restricted to two physical cores so it plans for the same 2-core configuration
# space as this repository's figures. Takes the bundle `.weir/devbundle/` (the stripped release
# binary, libonnxruntime and the models, xz-compressed so they travel under the 64 MiB limit; made
# by hand, see benchmarks/SERF.md) and writes tables and plots to $OUT (default /tmp/quiet).
# Runs `weir bench serf` with the defaults of run_ort.sh: squeezenet, then the MLP, repeated
# (`ROUNDS`, or the model:round pairs in `RUNS`; `BENCH_ARGS` are passed on).
#
# The bundle, from a built checkout (about 40 MB):
#   mkdir -p .weir/devbundle/lib && cd .weir/devbundle
#   strip -o /tmp/weir target/release/weir && xz -c /tmp/weir >weir.xz   (paths from the repo root)
#   xz -c ../onnxruntime/libonnxruntime.so.* >ort.xz; xz -3 -c ../models/mlp_l3.onnx >mlp_l3.onnx.xz
#   cp ../zoo/squeezenet.onnx .; cp -L /lib/x86_64-linux-gnu/{libfreetype.so.6,libpng16.so.16,\
#     libbrotlidec.so.1,libbrotlicommon.so.1,libz.so.1} lib/
# then `run` it on the device with `carry: [".weir/devbundle"]`.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/quiet}"
work=/tmp/weir-quiet
mkdir -p "$out" "$work"
bundle=.weir/devbundle
xz -dc "$bundle/weir.xz" >"$work/weir" && chmod +x "$work/weir"
xz -dc "$bundle/ort.xz" >"$work/libonnxruntime.so"
xz -dc "$bundle/mlp_l3.onnx.xz" >"$work/mlp_l3.onnx"
cp "$bundle/squeezenet.onnx" "$work/"
export ORT_DYLIB_PATH="$work/libonnxruntime.so"
# Shared libraries the binary links (font rendering for the plots) that a bare host may lack.
export LD_LIBRARY_PATH="$PWD/$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Two CPUs on different physical cores of the first socket.
cpus=$(lscpu -p=CPU,CORE,SOCKET | grep -v '^#' | awk -F, '$3==0 && !seen[$2]++ {print $1}' | head -2 | paste -sd,)
{
  echo "host: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p'); pinned to CPUs $cpus"
  echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out/host.txt"
rounds="${ROUNDS:-2}"
# Which model:round pairs to run (default every model in every round).
runs="${RUNS:-$(for r in $(seq 1 "$rounds"); do echo squeezenet:$r mlp_l3:$r; done)}"
for run in $runs; do
  m=${run%%:*} r=${run##*:}
  # At most 8 files come back from the device: tables per run, the first round's plots. The
  # plot needs fontconfig, which a bare host may lack (the table is written before it).
  plot="$work/${m}_$r.png"
  [ "$r" = 1 ] && plot="$out/${m}_$r.png"
  WEIR_LOG=error taskset -c "$cpus" "$work/weir" bench serf --model "$work/$m.onnx" \
    --table "$out/${m}_$r.md" --plot "$plot" ${BENCH_ARGS:-} 2>>"$out/log.txt" | tail -3 || true
  echo "load average after $m run $r: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/host.txt"
done
