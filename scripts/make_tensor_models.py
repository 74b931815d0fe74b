#!/usr/bin/env python3
"""Generate the models that exercise every tensor type and shape weir serves, and check the
pretrained models that scripts/setup.sh unpacks from public wheels.

Each generated model is deterministic (seeded numpy Generators), checked with the onnx checker,
then loaded and run in onnxruntime (CPU) on sample data and compared with a numpy expectation;
any mismatch stops the script with a non-zero exit.

Written to --out (N is a dim_param: the batch; shapes as [dims]):

  dtypes/<t>.onnx for t in bool u8 u16 u32 u64 i8 i16 i32 i64 f16 f32 f64 bf16 string
      (OIP BOOL UINT8 UINT16 UINT32 UINT64 INT8 INT16 INT32 INT64 FP16 FP32 FP64 BF16 BYTES).
      Input  x <t> [N,4].
      Output y <t> [N,4] = Identity(x).
      Output z, numeric and bool types: FP64 [N] = ReduceSum(Cast<f64>(x), axis 1, keepdims 0),
             so a value read with the wrong width, sign or byte order changes z (bool: 0/1).
      Output z, string: BYTES [N,4] = StringConcat(x, "·") (U+00B7, two UTF-8 bytes appended to
             every element), so lengths change between input and output.
      All fourteen types load and run in onnxruntime 1.31.1's CPU provider; none is dropped (bf16
      included: Identity and Cast take it). The numeric models are opset 13 / IR 8; string.onnx is
      opset 20 / IR 9 (StringConcat appeared in opset 20). StringNormalizer is avoided on purpose:
      its kernel needs the machine's en_US.UTF-8 locale.

  seq_pool.onnx   (a transformer-style pair of inputs sharing a free sequence length)
      Inputs  input_ids      INT64 [N,seq]   ids in [0, 50); ONNX Runtime refuses others
              attention_mask INT64 [N,seq]   1 = token, 0 = padding
      Outputs tokens FP32 [N,seq,4] = embedding[input_ids] * attention_mask
              pooled FP32 [N,4]     = sum over seq of tokens / max(sum over seq of mask, 1)
      The 50x4 embedding table holds seeded multiples of 1/8 in [-8, 8], so every sum is exact in
      f32 whatever its order: right-padding a row (id 0, mask 0) leaves its pooled row and its first
      seq tokens bit-identical (checked here).

  unbatched_scale.onnx   (no batch dimension; a rank-0 input)
      Inputs  x FP32 [3,4], s FP32 []   (s is a scalar)
      Outputs y FP32 [3,4] = x * s + bias (seeded [3,4] bias)
              total FP32 [] = sum of all elements of y

  seq_state.onnx   (a recurrent model whose state has its batch on axis 1, like silero-vad)
      Inputs  x FP32 [N,4], state FP32 [2,N,8]   (zero state = the start of a sequence)
      Outputs y FP32 [N,8], state_out FP32 [2,N,8]
      With h0 = state[0], h1 = state[1] (seeded W [4,8], U, V, A, B [8,8], b0, b1 [8]):
          h0' = tanh(x W + h0 U + h1 V + b0);  h1' = tanh(h0' A + h1 B + b1)
          y = h1';  state_out = [h0', h1']
      Rows are independent sequences: a batch of rows gives each row the same bits as running it
      alone (checked here).

With --pretrained DIR, also checks the models setup.sh unpacked there (real weights from public
PyPI wheels) against these signatures, then runs each once on sample data:

  silero_vad.onnx  (silero-vad 6.2.3, silero_vad/data/silero_vad.onnx; streaming voice activity
                   detection on 16 kHz or 8 kHz audio, opset 16, IR 8)
      Inputs  input FP32 [?,?]  (batch, samples: 512 per call at 16 kHz, 256 at 8 kHz)
              state FP32 [2,?,128]  (batch on axis 1; zeros at the start of a stream)
              sr    INT64 []  (scalar sample rate: 16000 or 8000)
      Outputs output FP32 [?,1]  (speech probability per batch row)
              stateN FP32 [?,?,?]  (the next state, [2,batch,128] at run time)
      ("?" = a dimension without a name in the file.)
  silero_vad_16k_op15.onnx  (same wheel, silero_vad/data/silero_vad_16k_op15.onnx; the same
                   network exported at opset 15 with named dimensions)
      Inputs  input FP32 [batch,sequence], state FP32 [2,batch,128], sr INT64 []
      Outputs output FP32 [batch,1], stateN FP32 [AddstateN_dim_0,batch,AddstateN_dim_2]
  magika_standard_v3_3.onnx  (magika 1.0.3, magika/models/standard_v3_3/model.onnx; content-type
                   classifier over raw bytes, opset 15 + ai.onnx.ml 2, IR 8)
      Input   bytes INT32 [unk__214,2048]  (per row: a file's first 1024 then last 1024 bytes,
              values 0..255, 256 = padding, as the wheel's config.min.json says)
      Output  target_label FP32 [unk__215,214]  (softmax scores over magika's 214 content types)
  ch_PP-OCRv4_det_infer.onnx  (rapidocr-onnxruntime 1.4.4, rapidocr_onnxruntime/models/; PP-OCRv4
                   text detector, opset 12, IR 8; height and width free, multiples of 32 in use)
      Input   x FP32 [p2o.DynamicDimension.0,3,p2o.DynamicDimension.1,p2o.DynamicDimension.2]
      Output  sigmoid_0.tmp_0 FP32
              [p2o.DynamicDimension.3,1,p2o.DynamicDimension.4,p2o.DynamicDimension.5]
              (per-pixel text probability, same height and width as x)

Usage: make_tensor_models.py --out DIR [--pretrained DIR]
Needs numpy, ml_dtypes, onnx and onnxruntime (scripts/setup.sh's venv).
"""

import argparse
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_models import onnx_model, save  # noqa: E402

SEED_DTYPES = 7001
SEED_SEQ_POOL = 7002
SEED_UNBATCHED = 7003
SEED_SEQ_STATE = 7004

# file name -> ONNX element type
T = TensorProto
DTYPES = dict(bool=T.BOOL, u8=T.UINT8, u16=T.UINT16, u32=T.UINT32, u64=T.UINT64, i8=T.INT8, i16=T.INT16,
              i32=T.INT32, i64=T.INT64, f16=T.FLOAT16, f32=T.FLOAT, f64=T.DOUBLE, bf16=T.BFLOAT16,
              string=T.STRING)
STRING_SUFFIX = "\u00b7"
STRING_OPSET = 20
STRING_IR_VERSION = 9

SEQ_POOL_VOCAB = 50
SEQ_POOL_DIM = 4
STATE_IN = 4
STATE_HIDDEN = 8


def session(path):
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


def expect(cond, what):
    if not cond:
        sys.exit(f"make_tensor_models.py: check failed: {what}")


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


# ---------------------------------------------------------------------------
# one model per element type
# ---------------------------------------------------------------------------

def dtype_model(name, elem):
    x = vi("x", elem, ["N", 4])
    y = vi("y", elem, ["N", 4])
    if elem == TensorProto.STRING:
        nodes = [helper.make_node("Identity", ["x"], ["y"], name="identity"),
                 helper.make_node("StringConcat", ["x", "suffix"], ["z"], name="append")]
        inits = [numpy_helper.from_array(np.array([STRING_SUFFIX], dtype=object), "suffix")]
        z = vi("z", TensorProto.STRING, ["N", 4])
        graph = helper.make_graph(nodes, f"dtype_{name}", [x], [y, z], initializer=inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", STRING_OPSET)],
                                  producer_name="weir make_tensor_models.py")
        model.ir_version = STRING_IR_VERSION
        return model
    nodes = [helper.make_node("Identity", ["x"], ["y"], name="identity"),
             helper.make_node("Cast", ["x"], ["x64"], name="widen", to=TensorProto.DOUBLE),
             helper.make_node("ReduceSum", ["x64", "axis1"], ["z"], name="row_sum", keepdims=0)]
    inits = [numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1")]
    z = vi("z", TensorProto.DOUBLE, ["N"])
    model = onnx_model(nodes, f"dtype_{name}", [x], [y, z], inits)
    model.producer_name = "weir make_tensor_models.py"
    return model


def dtype_sample(name, np_type, rng):
    """Sample rows for a type, extremes included: [3, 4]."""
    if name == "string":
        return np.array([["cat", "", "Ünïcödé", "日本語"],
                         ["a b", "\t", "x" * 40, "ok"],
                         ["UPPER", "lower", "1", "-"]], dtype=object)
    if name == "bool":
        return rng.integers(0, 2, size=(3, 4)).astype(bool)
    if name == "bf16":
        return np.array([[1.5, -2.0, 3.0e38, -1.0e-38], [0.0, -0.0, 7.0, 0.1],
                         [1.0, 2.0, 4.0, 8.0]]).astype(np_type)
    if np.issubdtype(np_type, np.integer):
        info = np.iinfo(np_type)
        a = rng.integers(info.min, info.max, size=(3, 4), dtype=np_type, endpoint=True)
        a[0, 0], a[0, 1] = info.min, info.max
        return a
    info = np.finfo(np_type)
    a = rng.standard_normal((3, 4)).astype(np_type)
    a[0, 0], a[0, 1], a[0, 2] = info.max, info.smallest_subnormal, -0.0
    return a


def run_bf16(sess, a):
    """onnxruntime's numpy bridge has no bfloat16: feed the bits as an OrtValue."""
    v = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(a.view(np.uint16), TensorProto.BFLOAT16)
    y, z = sess.run_with_ort_values(["y", "z"], {"x": v})
    expect(y.data_type() == "tensor(bfloat16)" and y.shape() == list(a.shape), "bf16 y type/shape")
    return z.numpy()


def make_dtypes(out_dir):
    os.makedirs(os.path.join(out_dir, "dtypes"), exist_ok=True)
    rng = np.random.default_rng(SEED_DTYPES)
    for name, elem in DTYPES.items():
        path = os.path.join(out_dir, "dtypes", name + ".onnx")
        save(dtype_model(name, elem), path)
        sess = session(path)
        a = dtype_sample(name, helper.tensor_dtype_to_np_dtype(elem), rng)
        if name == "string":
            y, z = sess.run(["y", "z"], {"x": a})
            expect(y.tolist() == a.tolist(), "string y == x")
            expect(z.tolist() == [[s + STRING_SUFFIX for s in r] for r in a.tolist()], "string z")
            continue
        if name == "bf16":
            z = run_bf16(sess, a)
        else:
            y, z = sess.run(["y", "z"], {"x": a})
            expect(y.dtype == a.dtype and np.array_equal(y, a, equal_nan=False), f"{name} y == x")
        expect(z.dtype == np.float64 and z.shape == (3,), f"{name} z type/shape")
        np.testing.assert_allclose(z, a.astype(np.float64).sum(axis=1), rtol=1e-15,
                                   err_msg=f"{name} z = row sums")


# ---------------------------------------------------------------------------
# a masked mean over a free sequence length
# ---------------------------------------------------------------------------

def make_seq_pool(out_dir):
    rng = np.random.default_rng(SEED_SEQ_POOL)
    table = (rng.integers(-64, 65, size=(SEQ_POOL_VOCAB, SEQ_POOL_DIM)) / 8.0).astype(np.float32)
    inits = [numpy_helper.from_array(table, "embedding"),
             numpy_helper.from_array(np.array([2], dtype=np.int64), "axis2"),
             numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1"),
             numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one")]
    nodes = [
        helper.make_node("Gather", ["embedding", "input_ids"], ["emb"], name="lookup", axis=0),
        helper.make_node("Cast", ["attention_mask"], ["maskf"], name="mask_f32", to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["maskf", "axis2"], ["mask3"], name="mask_per_token"),
        helper.make_node("Mul", ["emb", "mask3"], ["tokens"], name="masked_tokens"),
        helper.make_node("ReduceSum", ["tokens", "axis1"], ["total"], name="sum_tokens", keepdims=0),
        helper.make_node("ReduceSum", ["maskf", "axis1"], ["count"], name="count_tokens", keepdims=1),
        helper.make_node("Max", ["count", "one"], ["denominator"], name="at_least_one"),
        helper.make_node("Div", ["total", "denominator"], ["pooled"], name="mean"),
    ]
    inputs = [vi("input_ids", TensorProto.INT64, ["N", "seq"]),
              vi("attention_mask", TensorProto.INT64, ["N", "seq"])]
    outputs = [vi("tokens", TensorProto.FLOAT, ["N", "seq", SEQ_POOL_DIM]),
               vi("pooled", TensorProto.FLOAT, ["N", SEQ_POOL_DIM])]
    path = os.path.join(out_dir, "seq_pool.onnx")
    save(onnx_model(nodes, "seq_pool", inputs, outputs, inits), path)

    sess = session(path)
    ids = rng.integers(0, SEQ_POOL_VOCAB, size=(3, 5), dtype=np.int64)
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [0, 0, 0, 0, 0]], dtype=np.int64)
    tokens, pooled = sess.run(None, {"input_ids": ids, "attention_mask": mask})
    want_tokens = table[ids] * mask[..., None]
    want_pooled = want_tokens.sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
    expect(np.array_equal(tokens, want_tokens), "seq_pool tokens")
    expect(np.array_equal(pooled, want_pooled.astype(np.float32)), "seq_pool pooled")
    pad = 4
    ids_p = np.concatenate([ids, np.zeros((3, pad), dtype=np.int64)], axis=1)
    mask_p = np.concatenate([mask, np.zeros((3, pad), dtype=np.int64)], axis=1)
    tokens_p, pooled_p = sess.run(None, {"input_ids": ids_p, "attention_mask": mask_p})
    expect(np.array_equal(pooled_p, pooled), "right padding leaves pooled unchanged")
    expect(np.array_equal(tokens_p[:, :5], tokens), "right padding leaves the first tokens unchanged")
    expect(not tokens_p[:, 5:].any(), "padded tokens are zero")


# ---------------------------------------------------------------------------
# no batch dimension, a scalar input
# ---------------------------------------------------------------------------

def make_unbatched_scale(out_dir):
    rng = np.random.default_rng(SEED_UNBATCHED)
    bias = rng.standard_normal((3, 4)).astype(np.float32)
    nodes = [helper.make_node("Mul", ["x", "s"], ["scaled"], name="scale"),
             helper.make_node("Add", ["scaled", "bias"], ["y"], name="shift"),
             helper.make_node("ReduceSum", ["y"], ["total"], name="sum_all", keepdims=0)]
    inputs = [vi("x", TensorProto.FLOAT, [3, 4]), vi("s", TensorProto.FLOAT, [])]
    outputs = [vi("y", TensorProto.FLOAT, [3, 4]), vi("total", TensorProto.FLOAT, [])]
    path = os.path.join(out_dir, "unbatched_scale.onnx")
    save(onnx_model(nodes, "unbatched_scale", inputs, outputs,
                    [numpy_helper.from_array(bias, "bias")]), path)

    x = rng.standard_normal((3, 4)).astype(np.float32)
    s = np.array(2.5, dtype=np.float32)
    y, total = session(path).run(None, {"x": x, "s": s})
    expect(y.shape == (3, 4) and total.shape == (), "unbatched_scale shapes")
    np.testing.assert_allclose(y, x * s + bias, rtol=1e-6)
    np.testing.assert_allclose(total, y.sum(), rtol=1e-5)


# ---------------------------------------------------------------------------
# per-sequence recurrent state, batch on axis 1
# ---------------------------------------------------------------------------

def make_seq_state(out_dir):
    rng = np.random.default_rng(SEED_SEQ_STATE)
    h = STATE_HIDDEN

    def w(rows, name):
        return numpy_helper.from_array(rng.normal(0.0, 0.5, (rows, h)).astype(np.float32), name)

    inits = [w(STATE_IN, "W"), w(h, "U"), w(h, "V"), w(h, "A"), w(h, "B"),
             numpy_helper.from_array(rng.normal(0.0, 0.1, h).astype(np.float32), "b0"),
             numpy_helper.from_array(rng.normal(0.0, 0.1, h).astype(np.float32), "b1"),
             numpy_helper.from_array(np.array(0, dtype=np.int64), "zero"),
             numpy_helper.from_array(np.array(1, dtype=np.int64), "one"),
             numpy_helper.from_array(np.array([0], dtype=np.int64), "axis0")]
    nodes = [
        helper.make_node("Gather", ["state", "zero"], ["h0"], name="layer0_state", axis=0),
        helper.make_node("Gather", ["state", "one"], ["h1"], name="layer1_state", axis=0),
        helper.make_node("MatMul", ["x", "W"], ["xw"], name="x_w"),
        helper.make_node("MatMul", ["h0", "U"], ["h0u"], name="h0_u"),
        helper.make_node("MatMul", ["h1", "V"], ["h1v"], name="h1_v"),
        helper.make_node("Sum", ["xw", "h0u", "h1v", "b0"], ["pre0"], name="pre0"),
        helper.make_node("Tanh", ["pre0"], ["n0"], name="layer0"),
        helper.make_node("MatMul", ["n0", "A"], ["n0a"], name="n0_a"),
        helper.make_node("MatMul", ["h1", "B"], ["h1b"], name="h1_b"),
        helper.make_node("Sum", ["n0a", "h1b", "b1"], ["pre1"], name="pre1"),
        helper.make_node("Tanh", ["pre1"], ["y"], name="layer1"),
        helper.make_node("Unsqueeze", ["n0", "axis0"], ["s0"], name="stack0"),
        helper.make_node("Unsqueeze", ["y", "axis0"], ["s1"], name="stack1"),
        helper.make_node("Concat", ["s0", "s1"], ["state_out"], name="next_state", axis=0),
    ]
    inputs = [vi("x", TensorProto.FLOAT, ["N", STATE_IN]),
              vi("state", TensorProto.FLOAT, [2, "N", h])]
    outputs = [vi("y", TensorProto.FLOAT, ["N", h]), vi("state_out", TensorProto.FLOAT, [2, "N", h])]
    path = os.path.join(out_dir, "seq_state.onnx")
    save(onnx_model(nodes, "seq_state", inputs, outputs, inits), path)

    sess = session(path)
    p = {i.name: numpy_helper.to_array(i) for i in inits}
    rows, steps = 5, 6
    xs = rng.standard_normal((steps, rows, STATE_IN)).astype(np.float32)
    state = np.zeros((2, rows, h), dtype=np.float32)
    for t in range(steps):
        y, state_out = sess.run(None, {"x": xs[t], "state": state})
        n0 = np.tanh(xs[t] @ p["W"] + state[0] @ p["U"] + state[1] @ p["V"] + p["b0"])
        n1 = np.tanh(n0 @ p["A"] + state[1] @ p["B"] + p["b1"])
        np.testing.assert_allclose(y, n1, atol=1e-5, err_msg="seq_state y vs numpy")
        np.testing.assert_allclose(state_out, np.stack([n0, n1]), atol=1e-5, err_msg="seq_state state_out")
        for r in range(rows):
            y_r, s_r = sess.run(None, {"x": xs[t, r:r + 1], "state": state[:, r:r + 1]})
            expect(np.array_equal(y_r[0], y[r]) and np.array_equal(s_r[:, 0], state_out[:, r]),
                   f"seq_state row {r} alone == row {r} in a batch of {rows} (step {t})")
        state = state_out


# ---------------------------------------------------------------------------
# pretrained models unpacked by setup.sh
# ---------------------------------------------------------------------------

# file -> ([(input, type, dims)], [(output, type, dims)]); None = a dimension without a name
PRETRAINED = {
    "silero_vad.onnx": (
        [("input", "FLOAT", [None, None]), ("state", "FLOAT", [2, None, 128]), ("sr", "INT64", [])],
        [("output", "FLOAT", [None, 1]), ("stateN", "FLOAT", [None, None, None])]),
    "silero_vad_16k_op15.onnx": (
        [("input", "FLOAT", ["batch", "sequence"]), ("state", "FLOAT", [2, "batch", 128]),
         ("sr", "INT64", [])],
        [("output", "FLOAT", ["batch", 1]),
         ("stateN", "FLOAT", ["AddstateN_dim_0", "batch", "AddstateN_dim_2"])]),
    "magika_standard_v3_3.onnx": (
        [("bytes", "INT32", ["unk__214", 2048])],
        [("target_label", "FLOAT", ["unk__215", 214])]),
    "ch_PP-OCRv4_det_infer.onnx": (
        [("x", "FLOAT", ["p2o.DynamicDimension.0", 3, "p2o.DynamicDimension.1",
                         "p2o.DynamicDimension.2"])],
        [("sigmoid_0.tmp_0", "FLOAT", ["p2o.DynamicDimension.3", 1, "p2o.DynamicDimension.4",
                                       "p2o.DynamicDimension.5"])]),
}


def signature(values, skip=()):
    out = []
    for v in values:
        if v.name in skip:
            continue
        t = v.type.tensor_type
        dims = [d.dim_param if d.dim_param else (d.dim_value if d.HasField("dim_value") else None)
                for d in t.shape.dim]
        out.append((v.name, TensorProto.DataType.Name(t.elem_type), dims))
    return out


def pretrained_sample(name, rng):
    if name.startswith("silero_vad"):
        return {"input": rng.uniform(-0.5, 0.5, (2, 512)).astype(np.float32),
                "state": np.zeros((2, 2, 128), dtype=np.float32),
                "sr": np.array(16000, dtype=np.int64)}
    if name.startswith("magika"):
        return {"bytes": rng.integers(0, 257, size=(2, 2048), dtype=np.int32)}
    return {"x": rng.uniform(-1.0, 1.0, (1, 3, 64, 96)).astype(np.float32)}


def check_pretrained(model_dir):
    rng = np.random.default_rng(0)
    for name, (want_in, want_out) in PRETRAINED.items():
        path = os.path.join(model_dir, name)
        expect(os.path.exists(path), f"{path} exists (run scripts/setup.sh)")
        model = onnx.load(path)
        inits = {i.name for i in model.graph.initializer}
        got_in, got_out = signature(model.graph.input, inits), signature(model.graph.output)
        expect(got_in == want_in, f"{name} inputs {got_in} == {want_in}")
        expect(got_out == want_out, f"{name} outputs {got_out} == {want_out}")
        outs = session(path).run(None, pretrained_sample(name, rng))
        expect(all(np.isfinite(o).all() for o in outs), f"{name} runs to finite outputs")
        print(f"  checked {name} ({os.path.getsize(path)} bytes; "
              f"{', '.join(n for n, _, _ in got_in)} -> "
              f"{', '.join(f'{n}{list(o.shape)}' for (n, _, _), o in zip(got_out, outs))})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory for the models")
    ap.add_argument("--pretrained", help="directory with the unpacked pretrained models to check")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    make_dtypes(args.out)
    make_seq_pool(args.out)
    make_unbatched_scale(args.out)
    make_seq_state(args.out)
    if args.pretrained:
        check_pretrained(args.pretrained)


if __name__ == "__main__":
    main()
