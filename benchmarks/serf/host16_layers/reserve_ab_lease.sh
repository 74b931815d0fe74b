#!/usr/bin/env bash
# The next lease's script (prepared 2026-11-26, sixteenth session; not run yet): does keeping the
# process's other threads off the node's cores (`weir bench serf --cores 2 --pin-cores-from 2`,
# which reserves them since ef72c3e) change the error against the runs that shared them
# (`--share-node-cores`, as every lease before)? Reserved and shared squeezenet runs alternate on
# one machine, each split into layers and predicted causally too. Expects the ignored `.devcarry/`
# of `lease_script.sh` beside it (stripped `weir` of ef72c3e or later, ONNX Runtime, fontconfig) and
# `.weir/zoo/` carried; tables go to `$OUT`. Run as `OUT=$OUT bash benchmarks/serf/host16_layers/reserve_ab_lease.sh`
# with `timeout_s` 590.
set -u
T0=$(date +%s); BUDGET=${BUDGET:-545}
W=/tmp/w; mkdir -p $W
dec() { python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$1" "$2"; }
dec .devcarry/weir.xz $W/weir && chmod +x $W/weir
dec .devcarry/ort.so.xz $W/libonnxruntime.so
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
  timeout $lim $W/weir bench serf --cores 2 --pin-cores-from 2 "$@" >> $LOG 2>&1
  echo "== $name rc $? at +$(( $(date +%s) - T0 )) s" | tee -a $LOG
}
step reserved_1 165 200 --table $OUT/reserved_1.md --plot $W/r1.png
step shared_1 165 200 --share-node-cores --table $OUT/shared_1.md --plot $W/s1.png
step reserved_2 150 190 --table $OUT/reserved_2.md --plot $W/r2.png
tail -4 $LOG
