#!/usr/bin/env python3
"""A Triton sequence model's requests through Triton's own clients (tritonclient[http] and
tritonclient[grpc]) against `weir serve --model-repository`. Used by tests/it/triton_sequences.rs.

    sequence_client.py --http HOST:PORT --grpc HOST:PORT --model NAME

Over each client in turn, two sequences interleaved step by step (their ids differ per client),
then the first restarted after its end; every request sends `x` alone and names its sequence
with `sequence_id`, `sequence_start` and `sequence_end` as Triton's clients do. Prints one JSON
object: per client, the model's inputs as its metadata lists them, every step's outputs
(`y`, `corr`, `ended`) in order, and the error a request naming no sequence got.
"""

import argparse
import json

import numpy as np
import tritonclient.grpc as tg
import tritonclient.http as th


def steps(base):
    a, b = base + 1, base + 2
    return [
        (a, [1, 2, 3, 4], True, False),
        (b, [10, 10, 10, 10], True, False),
        (a, [1, 1, 1, 1], False, False),
        (b, [5, 5, 5, 5], False, True),
        (a, [2, 2, 2, 2], False, True),
        (a, [7, 7, 7, 7], True, False),
    ]


def run(module, client, model, base):
    meta = client.get_model_metadata(model)
    if isinstance(meta, dict):
        names = [t["name"] for t in meta["inputs"]]
    else:
        names = [t.name for t in meta.inputs]
    seen = {"inputs": names, "steps": []}
    for seq, x, start, end in steps(base):
        t = module.InferInput("x", [1, 4], "FP32")
        t.set_data_from_numpy(np.array([x], dtype=np.float32))
        r = client.infer(
            model, [t], sequence_id=seq, sequence_start=start, sequence_end=end
        )
        seen["steps"].append(
            {
                "sequence": seq,
                "y": r.as_numpy("y").reshape(-1).tolist(),
                "corr": int(r.as_numpy("corr").reshape(-1)[0]),
                "ended": int(r.as_numpy("ended").reshape(-1)[0]),
            }
        )
    t = module.InferInput("x", [1, 4], "FP32")
    t.set_data_from_numpy(np.ones((1, 4), dtype=np.float32))
    try:
        client.infer(model, [t])
        seen["no_sequence"] = "answered"
    except Exception as e:  # tritonclient's InferenceServerException
        seen["no_sequence"] = str(e)
    return seen


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--http", required=True)
    p.add_argument("--grpc", required=True)
    p.add_argument("--model", required=True)
    a = p.parse_args()
    out = {
        "http": run(th, th.InferenceServerClient(a.http), a.model, 10),
        "grpc": run(tg, tg.InferenceServerClient(a.grpc), a.model, 20),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
