#!/usr/bin/env bash
# A lease script (prepared 2026-11-26, sixteenth session; run 2026-11-27, tables in ../host16_reserve/): does keeping the
# process's other threads off the node's cores (`weir bench serf --cores 2 --pin-cores-from 2`,
# which reserves them since ef72c3e) change the error against the runs that shared them
# (`--share-node-cores`, as every lease before)? Reserved and shared squeezenet runs alternate on
# one machine, each split into layers and predicted causally too. Expects the ignored `.devcarry/`
# of `lease_script.sh` beside it (stripped `weir` of ef72c3e or later, ONNX Runtime, fontconfig) and
# `.weir/zoo/` carried; tables go to `$OUT`. Run as `OUT=$OUT bash benchmarks/serf/host16_layers/reserve_ab_lease.sh`
# with `timeout_s` 590.
BUDGET=${BUDGET:-545}; NODE="--cores 2 --pin-cores-from 2"
. "$(dirname "$0")/../lease_setup.sh"
step reserved_1 165 200 --table $OUT/reserved_1.md --plot $W/r1.png
step shared_1 165 200 --share-node-cores --table $OUT/shared_1.md --plot $W/s1.png
step reserved_2 150 190 --table $OUT/reserved_2.md --plot $W/r2.png
tail -4 $LOG
