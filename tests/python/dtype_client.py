#!/usr/bin/env python3
"""Sends one Open Inference Protocol request to `weir serve` with Triton's own HTTP client
(tritonclient[http]) and prints what the client read back, in the form ort_reference.py writes, so
a test compares the two. Used by tests/it/dtypes.rs.

    dtype_client.py --url HOST:PORT --model NAME --mode binary|json [--outputs y,z] < request.json

The request is {"inputs": [{"name", "datatype", "shape", "data"}]} with `data` as JSON numbers
(or "NaN", "Infinity", "-Infinity"), booleans, or strings (BYTES, sent as their UTF-8 bytes). Each
input becomes a numpy array of the datatype's numpy type (BF16: ml_dtypes.bfloat16, as the client
requires) and is sent as binary data or as JSON per --mode; the outputs are asked for the same way,
read with `as_numpy`, and printed as
    {"outputs": [{"name", "datatype", "shape", "data"}, ...]}
with floats widened exactly to doubles (non-finite ones as the strings above), integers exact,
BOOL as true/false and BYTES as UTF-8 strings. Exit status 0 on an answer; 1 with the server's
message on stderr when the request is refused.
"""

import argparse
import json
import math
import sys

import ml_dtypes
import numpy as np
import tritonclient.http as http
from tritonclient.utils import InferenceServerException

NUMPY = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
    "BF16": ml_dtypes.bfloat16,
    "BYTES": np.object_,
}
FLOATS = {"FP16", "FP32", "FP64", "BF16"}
NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def flatten(data):
    if not isinstance(data, list):
        return [data]
    return [v for item in data for v in flatten(item)]


def to_array(entry):
    datatype, shape, flat = entry["datatype"], entry["shape"], flatten(entry["data"])
    if datatype == "BYTES":
        array = np.array([s.encode("utf-8") for s in flat], dtype=np.object_)
    elif datatype in FLOATS:
        doubles = np.array([NON_FINITE.get(v, v) if isinstance(v, str) else v for v in flat],
                           dtype=np.float64)
        array = doubles.astype(NUMPY[datatype])
    else:
        array = np.array(flat, dtype=NUMPY[datatype])
    return array.reshape(shape)


def json_values(array, datatype):
    flat = array.reshape(-1)
    if datatype == "BYTES":
        return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in flat]
    if datatype not in FLOATS:
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--mode", choices=["binary", "json"], required=True)
    ap.add_argument("--outputs", required=True, help="comma-separated output names")
    args = ap.parse_args()
    binary = args.mode == "binary"
    request = json.load(sys.stdin)
    inputs = []
    for entry in request["inputs"]:
        array = to_array(entry)
        x = http.InferInput(entry["name"], list(array.shape), entry["datatype"])
        x.set_data_from_numpy(array, binary_data=binary)
        inputs.append(x)
    names = [n for n in args.outputs.split(",") if n]
    wanted = [http.InferRequestedOutput(n, binary_data=binary) for n in names]
    client = http.InferenceServerClient(args.url)
    try:
        result = client.infer(args.model, inputs, outputs=wanted)
    except InferenceServerException as e:
        print(f"dtype_client: refused: {e}", file=sys.stderr)
        sys.exit(1)
    finally:
        client.close()
    outputs = []
    for name in names:
        datatype = result.get_output(name)["datatype"]
        array = result.as_numpy(name)
        outputs.append({"name": name, "datatype": datatype, "shape": list(array.shape),
                        "data": json_values(array, datatype)})
    json.dump({"outputs": outputs}, sys.stdout, allow_nan=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
