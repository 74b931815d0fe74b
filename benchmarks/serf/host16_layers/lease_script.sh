#!/usr/bin/env bash
# Sixteenth session's lease: SERF's prediction on a many-core host, the node on two pinned cores,
# every point split at the node (in situ, at the node, arrival SCV) and predicted also from a profile
# re-taken just before each configuration's loads (`--reprofile`). Steps in priority order.
BUDGET=${BUDGET:-545}; NODE=${NODE:---cores 2 --pin-cores-from 2 --reprofile}
. "$(dirname "$0")/../lease_setup.sh"
dec .devcarry/mlp_l3.onnx.xz $W/mlp_l3.onnx
step sq_1 165 200 --table $OUT/sq_1.md --plot $OUT/sq_1.png
step sq_2 165 200 --table $OUT/sq_2.md --plot $W/sq_2.png
step mlp_1 55 80 --model $W/mlp_l3.onnx --table $OUT/mlp_1.md --plot $W/mlp_1.png
step sq_3 150 190 --table $OUT/sq_3.md --plot $W/sq_3.png
tail -4 $LOG
