#!/usr/bin/env bash
# The script the fourteenth session's device leases ran (benchmarks/SERF.md, *On a 16-core host*),
# kept for the record (its set-up now sourced from ../lease_setup.sh, the same steps). It expects
# an ignored `.devcarry/` holding the stripped `weir` binary, ONNX Runtime's library and mlp_l3.onnx
# xz-compressed, fontconfig with its libraries and two DejaVu
# fonts (the lease machine has no fontconfig), and `.weir/zoo/` carried beside it; `$OUT` is where
# the tables go. The second lease ran the steps sq_c, mlp_c, sq_d40 (`--samples 40`) and mlp_d40
# with BUDGET=440 (the first: sq_a, mlp_a, sq_b, mlp_b, BUDGET=520, no fontconfig).
#
# SERF prediction on a many-core host: the model node gets `--cores 2` pinned from core 2, the load
# generator and weir's own threads the other cores. Steps in priority order, each under a time guard.
BUDGET=${BUDGET:-540}; EXTRA=${EXTRA:-}; NODE="${NODE:---cores 2 --pin-cores-from 2} $EXTRA"
. "$(dirname "$0")/../lease_setup.sh"
dec .devcarry/mlp_l3.onnx.xz $W/mlp_l3.onnx
step sq_c 170 200 --table $OUT/sq_c.md --plot $OUT/sq_c.png
step mlp_c 50 60 --model $W/mlp_l3.onnx --table $OUT/mlp_c.md --plot $OUT/mlp_c.png
step sq_d40 170 200 --samples 40 --table $OUT/sq_d40.md --plot $W/sq_d40.png
step mlp_d40 50 60 --samples 40 --model $W/mlp_l3.onnx --table $OUT/mlp_d40.md --plot $W/mlp_d40.png
tail -5 $LOG
