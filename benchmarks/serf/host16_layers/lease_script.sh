#!/usr/bin/env bash
# Sixteenth session's lease: SERF's prediction on a many-core host, the node on two pinned cores,
# every point split at the node (in situ, at the node, arrival SCV) and predicted also from a profile
# re-taken just before each configuration's loads (`--reprofile`). Steps in priority order.
set -u
T0=$(date +%s); BUDGET=${BUDGET:-545}; NODE=${NODE:---cores 2 --pin-cores-from 2 --reprofile}
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
{ date -u; nproc; uptime; lscpu | head -25; $W/weir --version; } > $OUT/machine.txt 2>&1
step() { # name min_seconds_left timeout args...
  local name=$1 need=$2 lim=$3; shift 3
  local left=$(( BUDGET - ($(date +%s) - T0) ))
  if (( left < need )); then echo "== skip $name ($left s left)" | tee -a $LOG; return; fi
  (( lim > left )) && lim=$left
  echo "== $name at +$(( $(date +%s) - T0 )) s, load $(cut -d' ' -f1 /proc/loadavg)" | tee -a $LOG
  timeout $lim $W/weir bench serf $NODE "$@" >> $LOG 2>&1
  echo "== $name rc $? at +$(( $(date +%s) - T0 )) s" | tee -a $LOG
}
step sq_1 165 200 --table $OUT/sq_1.md --plot $OUT/sq_1.png
step sq_2 165 200 --table $OUT/sq_2.md --plot $W/sq_2.png
step mlp_1 55 80 --model $W/mlp_l3.onnx --table $OUT/mlp_1.md --plot $W/mlp_1.png
step sq_3 150 190 --table $OUT/sq_3.md --plot $W/sq_3.png
grep -h -A14 "^## Summary\|^| figure" $OUT/*.md 2>/dev/null | head -5
tail -4 $LOG
