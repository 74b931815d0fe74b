#!/usr/bin/env bash
# The script the fourteenth session's device leases ran (benchmarks/README.md, *On a 16-core host*),
# kept for the record. It expects an ignored `.devcarry/` holding the stripped `weir` binary, ONNX
# Runtime's library and mlp_l3.onnx xz-compressed, fontconfig with its libraries and two DejaVu
# fonts (the lease machine has no fontconfig), and `.weir/zoo/` carried beside it; `$OUT` is where
# the tables go. The second lease ran the steps sq_c, mlp_c, sq_d40 (`--samples 40`) and mlp_d40
# with BUDGET=440 (the first: sq_a, mlp_a, sq_b, mlp_b, BUDGET=520, no fontconfig).
#
# SERF prediction on a many-core host: the model node gets `--cores 2` pinned from core 2, the load
# generator and weir's own threads the other cores. Steps in priority order, each under a time guard.
set -u
T0=$(date +%s); BUDGET=${BUDGET:-540}; EXTRA=${EXTRA:-}; NODE=${NODE:---cores 2 --pin-cores-from 2}
W=/tmp/w; mkdir -p $W
dec() { python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$1" "$2"; }
dec .devcarry/weir.xz $W/weir && chmod +x $W/weir
dec .devcarry/ort.so.xz $W/libonnxruntime.so
dec .devcarry/mlp_l3.onnx.xz $W/mlp_l3.onnx
export ORT_DYLIB_PATH=$W/libonnxruntime.so WEIR_LOG=error
if ! $W/weir --version >/dev/null 2>&1; then export LD_LIBRARY_PATH=$PWD/.devcarry/lib; fi
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$PWD/.devcarry/fclib
printf '<?xml version="1.0"?>\n<fontconfig><dir>%s</dir><cachedir>%s</cachedir></fontconfig>\n' "$PWD/.devcarry/fonts" "$W/fc-cache" > $W/fonts.conf
export FONTCONFIG_FILE=$W/fonts.conf
LOG=$OUT/log.txt
{ date -u; nproc; uptime; lscpu | head -25; lscpu -e | head -20; $W/weir --version; } > $OUT/machine.txt 2>&1
step() { # name min_seconds_left timeout args...
  local name=$1 need=$2 lim=$3; shift 3
  local left=$(( BUDGET - ($(date +%s) - T0) ))
  if (( left < need )); then echo "== skip $name ($left s left)" | tee -a $LOG; return; fi
  (( lim > left )) && lim=$left
  echo "== $name at +$(( $(date +%s) - T0 )) s, load $(cut -d' ' -f1 /proc/loadavg)" | tee -a $LOG
  timeout $lim $W/weir bench serf $NODE $EXTRA "$@" >> $LOG 2>&1
  echo "== $name rc $? at +$(( $(date +%s) - T0 )) s" | tee -a $LOG
}
step sq_c 170 200 --table $OUT/sq_c.md --plot $OUT/sq_c.png
step mlp_c 50 60 --model $W/mlp_l3.onnx --table $OUT/mlp_c.md --plot $OUT/mlp_c.png
step sq_d40 170 200 --samples 40 --table $OUT/sq_d40.md --plot $W/sq_d40.png
step mlp_d40 50 60 --samples 40 --model $W/mlp_l3.onnx --table $OUT/mlp_d40.md --plot $W/mlp_d40.png
tail -5 $LOG
