#!/usr/bin/env python3
"""Checks that the ONNX files weir-training wrote load in ONNX Runtime and predict what candle did.

Run by `cargo run -p weir-training --release --example parity_accuracy` (with .weir/venv's python),
or by hand: check_onnxruntime.py DIR, where DIR holds probe_inputs.csv (held-out digits rows,
64 features in [0, 1]) and, for each MODEL.onnx, MODEL.candle.csv (candle's outputs on them).
Prints one line per model: max |ORT - candle| and the share of rows with the same argmax; exits 1
if any model fails to load or disagrees (max diff above 1e-4 or any argmax differs).
"""
import glob
import os
import sys

import numpy as np
import onnxruntime as ort


def main():
    d = sys.argv[1]
    x = np.loadtxt(os.path.join(d, "probe_inputs.csv"), delimiter=",", dtype=np.float32, ndmin=2)
    ok = True
    for ref in sorted(glob.glob(os.path.join(d, "*.candle.csv"))):
        model = ref[: -len(".candle.csv")] + ".onnx"
        want = np.loadtxt(ref, delimiter=",", dtype=np.float32, ndmin=2)
        sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        inp = sess.get_inputs()[0]
        got = sess.run(None, {inp.name: x})[0]
        diff = float(np.abs(got - want).max())
        same = float((got.argmax(1) == want.argmax(1)).mean())
        good = diff < 1e-4 and same == 1.0
        ok &= good
        print(f"{os.path.basename(model)}: input {inp.name}{inp.shape}, ORT {ort.__version__}, "
              f"max |ORT - candle| {diff:.2e}, same argmax {same:.0%} {'ok' if good else 'MISMATCH'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
