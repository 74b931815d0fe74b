#!/usr/bin/env python3
"""Writes the digits task's model family and its validation set, for model-less serving
("INFaaS: Automated Model-less Inference Serving", §3.3: one task served by several
architectures of different accuracy and cost).

Every model takes x[N,64] (the 8x8 pixels divided by 16) and gives probs[N,10], the signature
of make_models.py's digits_mlp (64 -> 32 -> 10), and is trained on the same training rows
(make_models.py's split, seed SEED_DIGITS_SPLIT), so accuracies on the held-out rows compare:

  digits_tiny.onnx   64 -> 8 -> 10, a short training: the cheap, less accurate member
  digits_wide.onnx   64 -> 128 -> 64 -> 10: the larger, more accurate member
  digits_validation.jsonl  the held-out rows as the model repository's validation format:
                     one JSON object a line, {"inputs": {"x": [64 floats]}, "label": d}

Seeded numpy training (SGD with momentum, cross-entropy), so re-running gives the same files.
Usage: make_digits_family.py --digits digits.csv.gz --out MODELS_DIR --data DATA_DIR
"""

import argparse
import gzip
import json
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_models import SEED_DIGITS_SPLIT, onnx_model, save  # noqa: E402

SEED_TINY = 7001
SEED_WIDE = 7002


def load(digits_path):
    with gzip.open(digits_path, "rt") as f:
        lines = [ln.strip() for ln in f if ln.strip()]
    data = np.array([[int(v) for v in ln.split(",")] for ln in lines], dtype=np.int64)
    X = data[:, :64].astype(np.float64) / 16.0
    y = data[:, 64]
    n = len(data)
    n_test = int(round(0.2 * n))
    perm = np.random.default_rng(SEED_DIGITS_SPLIT).permutation(n)
    return X, y, perm[n_test:], np.sort(perm[:n_test])


def forward(params, x):
    """Dense layers with ReLU between them, softmax at the end; returns probs and activations."""
    acts = [x]
    for i, (w, b) in enumerate(params):
        z = acts[-1] @ w.T + b
        acts.append(np.maximum(z, 0) if i < len(params) - 1 else z)
    z = acts[-1] - acts[-1].max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True), acts


def train(widths, X, y, seed, epochs, lr=0.05, mom=0.9, wd=1e-4, batch=32, classes=10):
    rng = np.random.default_rng(seed)
    params = [[rng.standard_normal((o, i)) * np.sqrt(2.0 / i), 0.01 * rng.standard_normal(o)]
              for i, o in zip(widths[:-1], widths[1:])]
    vel = [[np.zeros_like(w), np.zeros_like(b)] for w, b in params]
    Y = np.eye(classes)[y]
    for _ in range(epochs):
        order = rng.permutation(len(X))
        for s in range(0, len(order), batch):
            idx = order[s:s + batch]
            p, acts = forward(params, X[idx])
            d = (p - Y[idx]) / len(idx)
            for k in range(len(params) - 1, -1, -1):
                w, b = params[k]
                gw = d.T @ acts[k] + wd * w
                gb = d.sum(axis=0)
                if k > 0:
                    d = (d @ w) * (acts[k] > 0)
                vel[k][0] = mom * vel[k][0] - lr * gw
                vel[k][1] = mom * vel[k][1] - lr * gb
                params[k][0] = w + vel[k][0]
                params[k][1] = b + vel[k][1]
    return [(w.astype(np.float32), b.astype(np.float32)) for w, b in params]


def dense_model(params, graph_name):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])
    y = helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 10])
    inits, nodes, prev = [], [], "x"
    for i, (w, b) in enumerate(params):
        inits += [numpy_helper.from_array(w, f"fc{i + 1}.weight"),
                  numpy_helper.from_array(b, f"fc{i + 1}.bias")]
        out = f"h{i + 1}"
        nodes.append(helper.make_node("Gemm", [prev, f"fc{i + 1}.weight", f"fc{i + 1}.bias"], [out],
                                      name=f"fc{i + 1}", transB=1))
        prev = out
        if i < len(params) - 1:
            nodes.append(helper.make_node("Relu", [out], [f"a{i + 1}"], name=f"relu{i + 1}"))
            prev = f"a{i + 1}"
    nodes.append(helper.make_node("Softmax", [prev], ["probs"], name="softmax", axis=-1))
    return onnx_model(nodes, graph_name, [x], [y], inits)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--digits", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--data", required=True)
    args = ap.parse_args()
    X, y, train_idx, test_idx = load(args.digits)
    for name, widths, seed, epochs in (("digits_tiny", (64, 8, 10), SEED_TINY, 8),
                                       ("digits_wide", (64, 128, 64, 10), SEED_WIDE, 100)):
        params = train(widths, X[train_idx], y[train_idx], seed, epochs)
        p, _ = forward(params, X[test_idx].astype(np.float32))
        acc = float((p.argmax(axis=1) == y[test_idx]).mean())
        save(dense_model(params, name), os.path.join(args.out, f"{name}.onnx"))
        print(f"  {name} {widths}: held-out accuracy {acc:.4f}")
    os.makedirs(args.data, exist_ok=True)
    path = os.path.join(args.data, "digits_validation.jsonl")
    with open(path + ".tmp", "w") as f:
        for i in test_idx:
            f.write(json.dumps({"inputs": {"x": [float(v) for v in X[i]]}, "label": int(y[i])}) + "\n")
    os.replace(path + ".tmp", path)
    print(f"  wrote {path} ({len(test_idx)} held-out examples)")


if __name__ == "__main__":
    main()
