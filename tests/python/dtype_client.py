#!/usr/bin/env python3
"""Sends one Open Inference Protocol request to `weir serve` with Triton's own HTTP client
(tritonclient[http]) and prints what the client read back, in the form ort_reference.py writes, so
a test compares the two. Used by tests/it/dtypes.rs.

    dtype_client.py --url HOST:PORT --model NAME --mode binary|json [--outputs y,z] < request.json

The request is {"inputs": [{"name", "datatype", "shape", "data"}]}, read into numpy arrays as
ort_reference.py reads it (BF16 as ml_dtypes.bfloat16, which the client requires; BYTES as
strings, sent as their UTF-8 bytes). Each input is sent as binary data or as JSON per --mode; the
outputs are asked for the same way, read with `as_numpy`, and printed as ort_reference.py prints
its answer:
    {"outputs": [{"name", "datatype", "shape", "data"}, ...]}
Exit status 0 on an answer; 1 with the server's message on stderr when the request is refused;
2 when the request is malformed.
"""

import argparse
import json
import sys

import tritonclient.http as http
from tritonclient.utils import InferenceServerException

# The request is read, and the answer written, exactly as the reference reads and writes them.
from ort_reference import BadRequest, json_values, read_input


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
    try:
        arrays = [read_input(entry, k) for k, entry in enumerate(request["inputs"])]
    except BadRequest as e:
        print(f"dtype_client: bad request: {e}", file=sys.stderr)
        sys.exit(2)
    for name, datatype, array in arrays:
        x = http.InferInput(name, list(array.shape), datatype)
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
