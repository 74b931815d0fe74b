#!/usr/bin/env python3
"""ONNX Runtime's own answer to an Open Inference Protocol request: the reference weir's tests
compare served outputs with.

    ort_reference.py MODEL.onnx [--outputs a,b] < request.json > reply.json

The request is the tensor part of an OIP (KServe v2) JSON inference request:
    {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 4], "data": [...]}, ...]}
with `data` row-major (flat, or nested lists, which are flattened). Other keys (`parameters`,
`outputs`, `id`) are ignored. The reply has one entry per model output, in the model's order, or
in the order `--outputs` names them:
    {"outputs": [{"name": "y", "datatype": "FP32", "shape": [2, 4], "data": [...]}, ...]}

Datatypes: BOOL (JSON true/false), UINT8..UINT64 and INT8..INT64 (JSON integers within the type's
range), FP16, FP32, FP64, BF16 (JSON numbers, or the strings "NaN", "Infinity", "-Infinity"),
BYTES (UTF-8 strings; ONNX string tensors). A JSON number is read as a double and then rounded to
nearest-even into the declared type (FP16, BF16 and FP32 directly from the double, never through
another type). Output floats are written as the exact value of each element (the shortest decimal
that reads back as the same double; FP16 and BF16 widen exactly), non-finite ones as the strings
above; integers exactly (UINT64 too); BOOL as true/false; BYTES as strings.

The model runs in onnxruntime's Python API on the CPU provider with default session options, so
its answers are ONNX Runtime's. Exit status: 0 with the reply on stdout; 2 with a message on stderr
when the request is malformed (naming the input and field); 1 when ONNX Runtime refuses the model
or the inputs.
"""

import argparse
import ctypes
import json
import math
import sys

import ml_dtypes
import numpy as np
import onnxruntime as ort
from onnx import TensorProto

# OIP datatype -> (numpy dtype, ONNX Runtime type string)
DATATYPES = {
    "BOOL": (np.bool_, "tensor(bool)"),
    "UINT8": (np.uint8, "tensor(uint8)"),
    "UINT16": (np.uint16, "tensor(uint16)"),
    "UINT32": (np.uint32, "tensor(uint32)"),
    "UINT64": (np.uint64, "tensor(uint64)"),
    "INT8": (np.int8, "tensor(int8)"),
    "INT16": (np.int16, "tensor(int16)"),
    "INT32": (np.int32, "tensor(int32)"),
    "INT64": (np.int64, "tensor(int64)"),
    "FP16": (np.float16, "tensor(float16)"),
    "FP32": (np.float32, "tensor(float)"),
    "FP64": (np.float64, "tensor(double)"),
    "BF16": (ml_dtypes.bfloat16, "tensor(bfloat16)"),
    "BYTES": (np.object_, "tensor(string)"),
}
BY_ORT_TYPE = {ort_type: name for name, (_, ort_type) in DATATYPES.items()}
NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class BadRequest(Exception):
    pass


def flatten(data, where):
    if not isinstance(data, list):
        raise BadRequest(f"{where}: expected a JSON array")
    flat, stack = [], [iter(data)]
    while stack:
        for item in stack[-1]:
            if isinstance(item, list):
                stack.append(iter(item))
                break
            flat.append(item)
        else:
            stack.pop()
    return flat


def check_elements(flat, datatype, where):
    np_type = DATATYPES[datatype][0]
    for k, v in enumerate(flat):
        if datatype == "BOOL":
            ok = isinstance(v, bool)
        elif datatype == "BYTES":
            ok = isinstance(v, str)
        elif np.issubdtype(np_type, np.integer):
            info = np.iinfo(np_type)
            ok = isinstance(v, int) and not isinstance(v, bool) and info.min <= v <= info.max
        else:
            ok = (isinstance(v, (int, float)) and not isinstance(v, bool)) or v in NON_FINITE
        if not ok:
            raise BadRequest(f"{where}[{k}]: {json.dumps(v)} is not a {datatype} value")


def to_bf16(doubles):
    """Round doubles to bfloat16, nearest-even, in one step: round to odd into f32 first (24 bits,
    more than bf16's 8 + 2, so the second rounding cannot land on a false tie)."""
    f = doubles.astype(np.float32)
    finite = np.isfinite(doubles)
    overshoot = finite & (np.abs(f.astype(np.float64)) > np.abs(doubles))
    f = np.where(overshoot, np.nextafter(f, np.float32(0)), f)
    inexact = finite & (f.astype(np.float64) != doubles)
    bits = f.view(np.uint32) | inexact.astype(np.uint32)
    return bits.view(np.float32).astype(ml_dtypes.bfloat16)


def to_array(flat, datatype, shape):
    np_type = DATATYPES[datatype][0]
    if datatype == "BYTES":
        return np.array(flat, dtype=object).reshape(shape)
    if datatype == "BOOL" or np.issubdtype(np_type, np.integer):
        return np.array(flat, dtype=np_type).reshape(shape)
    doubles = np.array([NON_FINITE.get(v, v) if isinstance(v, str) else v for v in flat],
                       dtype=np.float64).reshape(shape)
    with np.errstate(over="ignore"):  # out of range rounds to an infinity, as IEEE says
        return to_bf16(doubles) if datatype == "BF16" else doubles.astype(np_type)


def read_input(entry, k):
    where = f"inputs[{k}]"
    if not isinstance(entry, dict):
        raise BadRequest(f"{where}: expected an object")
    for key in ("name", "datatype", "shape", "data"):
        if key not in entry:
            raise BadRequest(f"{where}: missing field {key}")
    name, datatype, shape = entry["name"], entry["datatype"], entry["shape"]
    if not isinstance(name, str):
        raise BadRequest(f"{where}.name: expected a string")
    where = f"inputs[{k}] ({name})"
    if datatype not in DATATYPES:
        raise BadRequest(f"{where}.datatype: {json.dumps(datatype)} is not one of {', '.join(DATATYPES)}")
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                              for d in shape):
        raise BadRequest(f"{where}.shape: expected an array of non-negative integers")
    flat = flatten(entry["data"], f"{where}.data")
    count = math.prod(shape)
    if len(flat) != count:
        raise BadRequest(f"{where}.data: {len(flat)} elements, shape {shape} needs {count}")
    check_elements(flat, datatype, f"{where}.data")
    return name, datatype, to_array(flat, datatype, shape)


# onnxruntime's numpy bridge has no bfloat16, and its OrtValues hold no strings: a BF16 input goes
# in as an OrtValue over its bits (session.run takes OrtValues beside numpy arrays), and a model with
# a BF16 output runs through run_with_ort_values, whose results are read back as raw bits.

def bf16_ort_value(array):
    return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(array.view(np.uint16), TensorProto.BFLOAT16)


def bf16_from_ort_value(value):
    shape = value.shape()
    count = math.prod(shape)
    raw = ctypes.string_at(value.data_ptr(), 2 * count) if count else b""
    return np.frombuffer(raw, dtype=np.uint16).view(ml_dtypes.bfloat16).reshape(shape)


def run(session, names, arrays):
    """Runs the model; returns the named outputs as numpy arrays (bfloat16 ones as ml_dtypes')."""
    types = {o.name: o.type for o in session.get_outputs()}
    if all(types[n] != "tensor(bfloat16)" for n in names):
        feeds = {n: bf16_ort_value(a) if a.dtype == ml_dtypes.bfloat16 else a for n, a in arrays.items()}
        return session.run(names, feeds)
    if any(a.dtype == np.object_ for a in arrays.values()):
        raise RuntimeError("onnxruntime's Python API cannot feed strings to a model with a bfloat16 output")
    feeds = {n: bf16_ort_value(a) if a.dtype == ml_dtypes.bfloat16 else ort.OrtValue.ortvalue_from_numpy(a)
             for n, a in arrays.items()}
    values = session.run_with_ort_values(names, feeds)
    return [bf16_from_ort_value(v) if types[n] == "tensor(bfloat16)" else v.numpy()
            for n, v in zip(names, values)]


def json_values(array, datatype):
    flat = array.reshape(-1)
    if datatype == "BYTES":
        return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in flat]
    if datatype == "BOOL" or np.issubdtype(array.dtype, np.integer):
        return flat.tolist()
    out = []
    for v in flat.astype(np.float64).tolist():
        if math.isnan(v):
            out.append("NaN")
        elif math.isinf(v):
            out.append("Infinity" if v > 0 else "-Infinity")
        else:
            out.append(v)
    return out


def reference(model, request, wanted):
    if not isinstance(request, dict) or not isinstance(request.get("inputs"), list):
        raise BadRequest('request: expected {"inputs": [...]}')
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    names = wanted or [o.name for o in session.get_outputs()]
    known = {o.name for o in session.get_outputs()}
    for n in names:
        if n not in known:
            raise BadRequest(f"--outputs: the model has no output {n} (it has {', '.join(sorted(known))})")
    arrays = {}
    for k, entry in enumerate(request["inputs"]):
        name, _, array = read_input(entry, k)
        if name in arrays:
            raise BadRequest(f"inputs[{k}] ({name}): given twice")
        arrays[name] = array
    types = {o.name: o.type for o in session.get_outputs()}
    outputs = []
    for name, array in zip(names, run(session, names, arrays)):
        if types[name] not in BY_ORT_TYPE:
            raise RuntimeError(f"output {name} has type {types[name]}, no Open Inference Protocol datatype")
        datatype = BY_ORT_TYPE[types[name]]
        outputs.append({"name": name, "datatype": datatype, "shape": list(array.shape),
                        "data": json_values(array, datatype)})
    return {"outputs": outputs}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="path of the ONNX model")
    ap.add_argument("--outputs", help="comma-separated output names (default: every output)")
    args = ap.parse_args()
    wanted = [n for n in args.outputs.split(",") if n] if args.outputs else None
    try:
        request = json.load(sys.stdin)
        reply = reference(args.model, request, wanted)
    except (BadRequest, json.JSONDecodeError, UnicodeDecodeError) as e:
        print(f"ort_reference: bad request: {e}", file=sys.stderr)
        sys.exit(2)
    except Exception as e:  # ONNX Runtime's refusals: a model it cannot load, inputs it rejects
        print(f"ort_reference: onnxruntime: {e}", file=sys.stderr)
        sys.exit(1)
    json.dump(reply, sys.stdout, allow_nan=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
