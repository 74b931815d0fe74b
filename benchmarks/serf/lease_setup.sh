# Sourced by the device-lease scripts of `weir bench serf` (benchmarks/serf/host16*/): unpacks the
# stripped `weir` binary and ONNX Runtime carried xz-compressed in the ignored `.devcarry/` (with
# fontconfig, its libraries and two DejaVu fonts, which the lease machine lacks, for the plots),
# writes the host's facts to `$OUT/machine.txt`, and defines `dec` (unpack one carried file) and
# `step NAME MIN_SECONDS_LEFT TIMEOUT ARGS...` (one `weir bench serf $NODE ARGS...` under a time
# guard: skipped when fewer than MIN_SECONDS_LEFT of `$BUDGET` are left, logged to `$OUT/log.txt`).
# The caller sets `BUDGET` (seconds for all steps) and `NODE` (flags every step gets) first.
set -u
T0=$(date +%s)
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
{ date -u; nproc; uptime; lscpu | head -25; lscpu -e | head -20; $W/weir --version; } > $OUT/machine.txt 2>&1
step() {
  local name=$1 need=$2 lim=$3; shift 3
  local left=$(( BUDGET - ($(date +%s) - T0) ))
  if (( left < need )); then echo "== skip $name ($left s left)" | tee -a $LOG; return; fi
  (( lim > left )) && lim=$left
  echo "== $name at +$(( $(date +%s) - T0 )) s, load $(cut -d' ' -f1 /proc/loadavg)" | tee -a $LOG
  # NODE is several flags: split on purpose.
  # shellcheck disable=SC2086
  timeout $lim $W/weir bench serf $NODE "$@" >> $LOG 2>&1
  echo "== $name rc $? at +$(( $(date +%s) - T0 )) s" | tee -a $LOG
}
