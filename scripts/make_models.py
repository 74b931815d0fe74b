#!/usr/bin/env python3
"""Generate the ONNX test/benchmark models that weir uses.

Deterministic: every random value comes from a numpy Generator with a fixed
seed, so re-running produces the same models (for the same numpy version).

Written to --out:
  squeezenet_random.onnx  zoo squeezenet with real (seeded random) weights
  resnet50_random.onnx    zoo resnet50 with real (seeded random) weights
  mlp_a.onnx, mlp_b.onnx  x[N,64] -> Gemm 32 -> Relu -> Gemm 10 -> Softmax -> probs[N,10]
  digits_mlp.onnx         same architecture, trained on the sklearn digits set
  digits_test.csv         the held-out digits rows (64 raw pixels 0..16, label)
  constant_batch1.onnx    x[1,4] -> y[1,4] = x * 2 + 1
  digits_mlp_parity_k2.onnx  ParM parity model for digits_mlp, k = 2: the same architecture
                          without the Softmax (output still named probs), trained with Adam on
                          MSE(F_P(x1 + x2), F(x1) + F(x2)) over random training pairs
  affine.onnx             x[N,16] -> y[N,8] = x W^T + b (seeded W, b)
  affine_parity_k2.onnx   the same with bias 2b: an exact parity model for k = 2
                          (F_P(x1 + x2) = F(x1) + F(x2)), so ParM reconstruction is exact
  gru_stream.onnx         stateful inference (HAMS): the N rows of a call are N time steps of one
                          GRU stream; x[N,8], h_in[1,16] -> y[N,4] (linear head), h_out[1,16]
  gru_chain.onnx          the same shape of model reading 4 features (it follows gru_stream in a chain)
  online_logreg.onnx      stateful online learning (HAMS): softmax regression whose weights are the
                          state; x[N,64], label[N,10] (one-hot), train[N,1] (1 = training row),
                          w_in[64,10] -> probs[N,10] = softmax(x w_in),
                          w_out = w_in - 0.05 * x^T ((probs - label) * train)
  online_wide.onnx        the same with 512 features and 512 classes (a 1 MiB state)
  mlp_l3.onnx             SERF's cache-contending MLP (SERF, §III-C): x[N,1024] -> Gemm 2048
                          -> Tanh -> Gemm 2048 -> Tanh -> Gemm 10 -> y[N,10], 24 MiB of f32
                          weights: one session's copy fits the 32 MiB L3 of the machines here,
                          two sessions' copies (two requests at once, c = 2) do not

Usage: make_models.py --out DIR --zoo DIR --digits digits.csv.gz
Needs numpy and onnx only.
"""

import argparse
import gzip
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IR_VERSION = 8  # onnxruntime 1.31 loads IR <= 10; 8 keeps older runtimes happy too
OPSET = 13

SEED_SQUEEZENET = 1001
SEED_RESNET50 = 1002
SEED_MLP_A = 2001
SEED_MLP_B = 2002
SEED_DIGITS_SPLIT = 0
SEED_DIGITS_TRAIN = 3001


def onnx_model(nodes, graph_name, inputs, outputs, inits):
    """A model of one graph at this script's opset and IR version."""
    graph = helper.make_graph(nodes, graph_name, inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="weir make_models.py")
    model.ir_version = IR_VERSION
    return model


def save(model, path):
    """Check and write a model atomically; print one line."""
    onnx.checker.check_model(model, full_check=True)
    tmp = path + ".tmp"
    onnx.save(model, tmp)
    os.replace(tmp, path)
    g = model.graph
    ins = ", ".join(f"{i.name}{_shape(i)}" for i in g.input)
    outs = ", ".join(f"{o.name}{_shape(o)}" for o in g.output)
    print(f"  wrote {os.path.basename(path)} ({os.path.getsize(path)} bytes; {ins} -> {outs})")


def _shape(vi):
    dims = []
    for d in vi.type.tensor_type.shape.dim:
        dims.append(d.dim_param if d.dim_param else str(d.dim_value))
    return "[" + ",".join(dims) + "]"


# ---------------------------------------------------------------------------
# zoo models: replace ConstantOfShape-generated weights by seeded random ones
# ---------------------------------------------------------------------------

# Scale of a BatchNormalization that feeds a residual Sum/Add.  With the
# running statistics not matching the random convolutions, unit scales let the
# activations double at each of resnet50's 16 residual blocks (std ~1e4 at the
# end, a one-hot softmax identical for every input); 0.5 keeps them O(10)
# and the top class still depends on the input.
RESIDUAL_BN_SCALE = 0.5


def _random_weight(rng, shape, consumer, index, feeds_residual=False):
    """Pick a sensible random fill for a weight of `shape` fed into node
    `consumer` at input position `index`."""
    shape = tuple(int(s) for s in shape)
    if consumer is not None and consumer.op_type == "BatchNormalization":
        # inputs: X, scale, B, mean, var.  0.01-scaled scales would shrink
        # activations towards zero layer after layer; keep them near 1 and the
        # variance positive.
        if index == 1:
            base = RESIDUAL_BN_SCALE if feeds_residual else 1.0
            return (base * (1.0 + 0.1 * rng.standard_normal(shape))).astype(np.float32)
        if index == 4:
            return rng.uniform(0.5, 1.5, size=shape).astype(np.float32)
        return (0.01 * rng.standard_normal(shape)).astype(np.float32)
    if len(shape) > 1:
        fan_in = int(np.prod(shape[1:]))
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
    return (0.01 * rng.standard_normal(shape)).astype(np.float32)


def randomize_zoo_model(src, dst, seed, want_input, want_output):
    name = os.path.basename(dst)
    if not os.path.exists(src):
        print(f"  skipped {name}: {src} not found")
        return False
    model = onnx.load(src)
    g = model.graph
    inits = {i.name: i for i in g.initializer}

    cos_nodes = [n for n in g.node
                 if n.op_type == "ConstantOfShape" and len(n.input) == 1 and n.input[0] in inits]
    if not cos_nodes:
        print(f"  skipped {name}: no ConstantOfShape(initializer) weights in {src}")
        return False
    io_in = [i.name for i in g.input if i.name not in inits]
    if io_in != [want_input] or [o.name for o in g.output] != [want_output]:
        print(f"  skipped {name}: unexpected inputs/outputs {io_in} -> {[o.name for o in g.output]}")
        return False

    # first consumer of each tensor (to choose the fill)
    consumer = {}
    residual_inputs = set()
    for n in g.node:
        for k, t in enumerate(n.input):
            consumer.setdefault(t, (n, k))
        if n.op_type in ("Sum", "Add"):
            residual_inputs.update(n.input)

    rng = np.random.default_rng(seed)
    new_inits = []
    for n in cos_nodes:
        shape = numpy_helper.to_array(inits[n.input[0]])
        out = n.output[0]
        cnode, cidx = consumer.get(out, (None, 0))
        feeds_residual = cnode is not None and cnode.output[0] in residual_inputs
        arr = _random_weight(rng, shape, cnode, cidx, feeds_residual)
        new_inits.append(numpy_helper.from_array(arr, name=out))

    cos_ids = {id(n) for n in cos_nodes}
    nodes = [n for n in g.node if id(n) not in cos_ids]
    del g.node[:]
    g.node.extend(nodes)

    used = {t for n in g.node for t in n.input} | {o.name for o in g.output}
    kept = [i for i in g.initializer if i.name in used]  # drops *__SHAPE and dead blobs
    del g.initializer[:]
    g.initializer.extend(kept + new_inits)

    # IR >= 4: initializers need not (and here must not) be graph inputs, so
    # that runtimes see exactly one required input.
    ins = [i for i in g.input if i.name in io_in]
    del g.input[:]
    g.input.extend(ins)

    model.ir_version = IR_VERSION
    model.producer_name = "weir make_models.py"
    save(model, dst)
    return True


# ---------------------------------------------------------------------------
# MLP 64 -> 32 -> 10
# ---------------------------------------------------------------------------

def mlp_model(w1, b1, w2, b2, graph_name):
    """w1 [32,64], b1 [32], w2 [10,32], b2 [10] (Gemm with transB=1)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])
    y = helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 10])
    inits = [
        numpy_helper.from_array(w1.astype(np.float32), "fc1.weight"),
        numpy_helper.from_array(b1.astype(np.float32), "fc1.bias"),
        numpy_helper.from_array(w2.astype(np.float32), "fc2.weight"),
        numpy_helper.from_array(b2.astype(np.float32), "fc2.bias"),
    ]
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h1"], name="fc1", transB=1),
        helper.make_node("Relu", ["h1"], ["a1"], name="relu1"),
        helper.make_node("Gemm", ["a1", "fc2.weight", "fc2.bias"], ["logits"], name="fc2", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
    ]
    return onnx_model(nodes, graph_name, [x], [y], inits)


def init_mlp(rng):
    w1 = rng.standard_normal((32, 64)) * np.sqrt(2.0 / 64)
    b1 = 0.01 * rng.standard_normal(32)
    w2 = rng.standard_normal((10, 32)) * np.sqrt(2.0 / 32)
    b2 = 0.01 * rng.standard_normal(10)
    return w1, b1, w2, b2


def forward(params, x):
    """Same math as the ONNX graph, in x's dtype."""
    w1, b1, w2, b2 = params
    h = np.maximum(x @ w1.T + b1, 0)
    z = h @ w2.T + b2
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True), h


def train_digits(digits_path, out_dir):
    with gzip.open(digits_path, "rt") as f:
        lines = [ln.strip() for ln in f if ln.strip()]
    data = np.array([[int(v) for v in ln.split(",")] for ln in lines], dtype=np.int64)
    assert data.shape == (1797, 65), data.shape
    X = data[:, :64].astype(np.float64) / 16.0
    y = data[:, 64]

    n = len(data)
    n_test = int(round(0.2 * n))
    perm = np.random.default_rng(SEED_DIGITS_SPLIT).permutation(n)
    test_idx = np.sort(perm[:n_test])
    train_idx = perm[n_test:]

    rng = np.random.default_rng(SEED_DIGITS_TRAIN)
    params = list(init_mlp(rng))
    vel = [np.zeros_like(p) for p in params]
    Xtr, ytr = X[train_idx], y[train_idx]
    Ytr = np.eye(10)[ytr]
    lr, mom, wd, batch, epochs = 0.05, 0.9, 1e-4, 32, 200
    for _ in range(epochs):
        order = rng.permutation(len(Xtr))
        for s in range(0, len(order), batch):
            b = order[s:s + batch]
            xb, yb = Xtr[b], Ytr[b]
            p, h = forward(params, xb)
            dz = (p - yb) / len(b)                # d(mean CE)/d logits
            gw2 = dz.T @ h + wd * params[2]
            gb2 = dz.sum(axis=0)
            dh = (dz @ params[2]) * (h > 0)
            gw1 = dh.T @ xb + wd * params[0]
            gb1 = dh.sum(axis=0)
            for k, gk in enumerate((gw1, gb1, gw2, gb2)):
                vel[k] = mom * vel[k] - lr * gk
                params[k] = params[k] + vel[k]

    params32 = [p.astype(np.float32) for p in params]
    p_test, _ = forward(params32, X[test_idx].astype(np.float32))
    acc = float((p_test.argmax(axis=1) == y[test_idx]).mean())
    p_train, _ = forward(params32, Xtr.astype(np.float32))
    train_acc = float((p_train.argmax(axis=1) == ytr).mean())

    save(mlp_model(*params32, graph_name="digits_mlp"), os.path.join(out_dir, "digits_mlp.onnx"))
    csv_path = os.path.join(out_dir, "digits_test.csv")
    with open(csv_path + ".tmp", "w") as f:
        for i in test_idx:
            f.write(lines[i] + "\n")
    os.replace(csv_path + ".tmp", csv_path)
    print(f"  wrote digits_test.csv ({len(test_idx)} held-out rows: 64 pixels 0..16, label)")
    print(f"  digits_mlp: train accuracy {train_acc:.4f}, held-out accuracy {acc:.4f} "
          f"({int(round(acc * len(test_idx)))}/{len(test_idx)})")
    if acc <= 0.9:
        print("  WARNING: digits_mlp held-out accuracy is not above 0.9", file=sys.stderr)
    return params32, X, y, train_idx, test_idx


SEED_DIGITS_PARITY = 3002


def parity_mlp_model(w1, b1, w2, b2, graph_name):
    """mlp_model without the Softmax; the last Gemm writes `probs` so the signature matches."""
    model = mlp_model(w1, b1, w2, b2, graph_name)
    g = model.graph
    nodes = [n for n in g.node if n.op_type != "Softmax"]
    nodes[-1].output[0] = "probs"
    del g.node[:]
    g.node.extend(nodes)
    return model


def train_digits_parity(deployed, X, y, train_idx, test_idx, out_dir, k=2):
    """ParM parity model for digits_mlp: the deployed model's architecture without its softmax,
    fed the sum of k random training rows and trained against the sum of the deployed model's
    outputs for them ("Parity Models: Erasure-Coded Resilience for Prediction Serving Systems",
    §4.4, §5.1): Adam lr 1e-3, L2 1e-5, minibatch 64 groups, MSE; numpy, seeded."""
    rng = np.random.default_rng(SEED_DIGITS_PARITY)
    params = list(init_mlp(rng))
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    Xtr = X[train_idx]
    Ftr, _ = forward(deployed, Xtr.astype(np.float32))
    lr, l2, batch, b1m, b2m, eps, t = 1e-3, 1e-5, 64, 0.9, 0.999, 1e-8, 0
    for _ in range(300):
        groups = rng.integers(0, len(Xtr), size=(len(Xtr), k))
        for s in range(0, len(groups), batch):
            g = groups[s:s + batch]
            xb = Xtr[g].sum(axis=1)
            target = Ftr[g].sum(axis=1)
            w1, bb1, w2, bb2 = params
            h = np.maximum(xb @ w1.T + bb1, 0)
            out = h @ w2.T + bb2
            dz = 2.0 * (out - target) / out.size
            grads = [None, None, dz.T @ h, dz.sum(axis=0)]
            dh = (dz @ w2) * (h > 0)
            grads[0], grads[1] = dh.T @ xb, dh.sum(axis=0)
            t += 1
            for i in range(4):
                gi = grads[i] + l2 * params[i]
                m[i] = b1m * m[i] + (1 - b1m) * gi
                v[i] = b2m * v[i] + (1 - b2m) * gi * gi
                mh, vh = m[i] / (1 - b1m ** t), v[i] / (1 - b2m ** t)
                params[i] = params[i] - lr * mh / (np.sqrt(vh) + eps)
    params32 = [p.astype(np.float32) for p in params]
    # Degraded-mode accuracy on held-out pairs: reconstruct F(x1) = F_P(x1 + x2) - F(x2).
    Xte, yte = X[test_idx].astype(np.float32), y[test_idx]
    Fte, _ = forward(deployed, Xte)
    partner = np.random.default_rng(SEED_DIGITS_PARITY + 1).permutation(len(Xte))
    w1, bb1, w2, bb2 = params32
    parity_out = np.maximum((Xte + Xte[partner]) @ w1.T + bb1, 0) @ w2.T + bb2
    rebuilt = parity_out - Fte[partner]
    acc = float((rebuilt.argmax(axis=1) == yte).mean())
    save(parity_mlp_model(*params32, graph_name="digits_mlp_parity_k2"),
         os.path.join(out_dir, "digits_mlp_parity_k2.onnx"))
    print(f"  digits_mlp_parity_k2: degraded-mode (reconstructed) held-out accuracy {acc:.4f}")
    return acc


def constant_batch1(out_dir):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    inits = [
        numpy_helper.from_array(np.array([2.0], dtype=np.float32), "two"),
        numpy_helper.from_array(np.array([1.0], dtype=np.float32), "one"),
    ]
    nodes = [
        helper.make_node("Mul", ["x", "two"], ["x2"], name="mul"),
        helper.make_node("Add", ["x2", "one"], ["y"], name="add"),
    ]
    model = onnx_model(nodes, "constant_batch1", [x], [y], inits)
    save(model, os.path.join(out_dir, "constant_batch1.onnx"))


SEED_AFFINE = 4001


def affine_model(w, b, graph_name):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])
    inits = [
        numpy_helper.from_array(w.astype(np.float32), "fc.weight"),
        numpy_helper.from_array(b.astype(np.float32), "fc.bias"),
    ]
    nodes = [helper.make_node("Gemm", ["x", "fc.weight", "fc.bias"], ["y"], name="fc", transB=1)]
    return onnx_model(nodes, graph_name, [x], [y], inits)


def affine_models(out_dir):
    rng = np.random.default_rng(SEED_AFFINE)
    w = rng.normal(0.0, 0.5, size=(8, 16))
    b = rng.normal(0.0, 0.5, size=(8,))
    save(affine_model(w, b, "affine"), os.path.join(out_dir, "affine.onnx"))
    save(affine_model(w, 2.0 * b, "affine_parity_k2"), os.path.join(out_dir, "affine_parity_k2.onnx"))


SEED_GRU = 5001
SEED_MLP_L3 = 6001


def mlp_l3(out_dir, widths=(1024, 2048, 2048, 10), name="mlp_l3", seed=SEED_MLP_L3):
    """A GEMV chain whose weights, not its activations, set its working set. ONNX Runtime gives
    every session its own copy of the weights, so c concurrent sessions hold c copies: the
    interference among concurrent requests that SERF describes ("SERF: Efficient Scheduling for
    Fast Deep Neural Network Serving via Judicious Parallelism", §III-C) comes from there, once
    the copies outgrow the last-level cache."""
    rng = np.random.default_rng(seed)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", widths[0]])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", widths[-1]])
    nodes, inits, prev = [], [], "x"
    layers = list(zip(widths[:-1], widths[1:]))
    for i, (fan_in, fan_out) in enumerate(layers):
        w = rng.standard_normal((fan_out, fan_in)) * np.sqrt(1.0 / fan_in)
        inits.append(numpy_helper.from_array(w.astype(np.float32), f"fc{i}.weight"))
        inits.append(numpy_helper.from_array(np.zeros(fan_out, np.float32), f"fc{i}.bias"))
        last = i == len(layers) - 1
        out = "y" if last else f"z{i}"
        nodes.append(helper.make_node("Gemm", [prev, f"fc{i}.weight", f"fc{i}.bias"], [out],
                                      name=f"fc{i}", transB=1))
        if not last:
            nodes.append(helper.make_node("Tanh", [out], [f"a{i}"], name=f"tanh{i}"))
            prev = f"a{i}"
    model = onnx_model(nodes, name, [x], [y], inits)
    save(model, os.path.join(out_dir, f"{name}.onnx"))


def gru_stream(out_dir, features=8, hidden=16, classes=4, name="gru_stream", seed=SEED_GRU):
    rng = np.random.default_rng(seed)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", features])
    h_in = helper.make_tensor_value_info("h_in", TensorProto.FLOAT, [1, hidden])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", classes])
    h_out = helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [1, hidden])
    scale = 1.0 / np.sqrt(hidden)
    inits = [
        numpy_helper.from_array(rng.uniform(-scale, scale, (1, 3 * hidden, features)).astype(np.float32), "gru.W"),
        numpy_helper.from_array(rng.uniform(-scale, scale, (1, 3 * hidden, hidden)).astype(np.float32), "gru.R"),
        numpy_helper.from_array(rng.uniform(-scale, scale, (1, 6 * hidden)).astype(np.float32), "gru.B"),
        numpy_helper.from_array(rng.normal(0.0, 0.5, (hidden, classes)).astype(np.float32), "head.W"),
        numpy_helper.from_array(rng.normal(0.0, 0.1, (classes,)).astype(np.float32), "head.b"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1"),
        numpy_helper.from_array(np.array([1, 2], dtype=np.int64), "axes12"),
    ]
    nodes = [
        helper.make_node("Unsqueeze", ["x", "axis1"], ["x3"], name="as_sequence"),
        helper.make_node("Unsqueeze", ["h_in", "axis1"], ["h0"], name="initial_h"),
        helper.make_node("GRU", ["x3", "gru.W", "gru.R", "gru.B", "", "h0"], ["Y", "Y_h"],
                         name="gru", hidden_size=hidden, linear_before_reset=1),
        helper.make_node("Squeeze", ["Y", "axes12"], ["hs"], name="steps"),
        helper.make_node("Squeeze", ["Y_h", "axis1"], ["h_out"], name="final_h"),
        helper.make_node("MatMul", ["hs", "head.W"], ["logits"], name="head"),
        helper.make_node("Add", ["logits", "head.b"], ["y"], name="head_bias"),
    ]
    model = onnx_model(nodes, name, [x, h_in], [y, h_out], inits)
    save(model, os.path.join(out_dir, name + ".onnx"))


def online_logreg(path, features, classes, graph_name, lr=0.05):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", features])
    label = helper.make_tensor_value_info("label", TensorProto.FLOAT, ["N", classes])
    train = helper.make_tensor_value_info("train", TensorProto.FLOAT, ["N", 1])
    w_in = helper.make_tensor_value_info("w_in", TensorProto.FLOAT, [features, classes])
    probs = helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", classes])
    w_out = helper.make_tensor_value_info("w_out", TensorProto.FLOAT, [features, classes])
    inits = [numpy_helper.from_array(np.array([lr], dtype=np.float32), "lr")]
    nodes = [
        helper.make_node("MatMul", ["x", "w_in"], ["logits"], name="logits"),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1),
        helper.make_node("Sub", ["probs", "label"], ["err"], name="error"),
        helper.make_node("Mul", ["err", "train"], ["masked"], name="training_rows_only"),
        helper.make_node("Transpose", ["x"], ["xt"], name="xt", perm=[1, 0]),
        helper.make_node("MatMul", ["xt", "masked"], ["grad"], name="gradient_sum"),
        helper.make_node("Mul", ["grad", "lr"], ["step"], name="step"),
        helper.make_node("Sub", ["w_in", "step"], ["w_out"], name="update"),
    ]
    model = onnx_model(nodes, graph_name, [x, label, train, w_in], [probs, w_out], inits)
    save(model, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory for the models")
    ap.add_argument("--zoo", required=True, help="directory with the unpacked zoo models (<name>.onnx)")
    ap.add_argument("--digits", required=True, help="path to digits.csv.gz")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    if not randomize_zoo_model(os.path.join(args.zoo, "squeezenet.onnx"),
                               os.path.join(args.out, "squeezenet_random.onnx"),
                               SEED_SQUEEZENET, "data_0", "softmaxout_1"):
        sys.exit("make_models.py: could not build squeezenet_random.onnx")
    randomize_zoo_model(os.path.join(args.zoo, "resnet50.onnx"),
                        os.path.join(args.out, "resnet50_random.onnx"),
                        SEED_RESNET50, "gpu_0/data_0", "gpu_0/softmax_1")

    save(mlp_model(*init_mlp(np.random.default_rng(SEED_MLP_A)), graph_name="mlp_a"),
         os.path.join(args.out, "mlp_a.onnx"))
    save(mlp_model(*init_mlp(np.random.default_rng(SEED_MLP_B)), graph_name="mlp_b"),
         os.path.join(args.out, "mlp_b.onnx"))
    deployed, X, y, train_idx, test_idx = train_digits(args.digits, args.out)
    train_digits_parity(deployed, X, y, train_idx, test_idx, args.out)
    constant_batch1(args.out)
    affine_models(args.out)
    gru_stream(args.out)
    gru_stream(args.out, features=4, name="gru_chain", seed=SEED_GRU + 1)
    online_logreg(os.path.join(args.out, "online_logreg.onnx"), 64, 10, "online_logreg")
    online_logreg(os.path.join(args.out, "online_wide.onnx"), 512, 512, "online_wide")
    mlp_l3(args.out)


if __name__ == "__main__":
    main()
