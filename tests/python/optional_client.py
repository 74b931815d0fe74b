#!/usr/bin/env python3
"""A model with an optional input (`optional: true` on an overridable initializer) through
Triton's own clients (tritonclient[http] and tritonclient[grpc]) against
`weir serve --model-repository`. Used by tests/it/triton_optional.rs.

    optional_client.py --http HOST:PORT --grpc HOST:PORT --model NAME --onnx MODEL.onnx
                       --optional scale --requests N

Over each client: the model's configuration (each input's `optional`), then N requests sent at
once, alternately without and with the optional input, each with its own request id. Every answer
is checked against onnxruntime run on that request alone (without the input: the file's value).
Prints one JSON object: per client, the inputs' `optional` flags, how many requests were sent,
how many answers came back per id, and the largest difference from onnxruntime.
"""

import argparse
import json
import threading

import numpy as np
import onnxruntime as ort
import tritonclient.grpc as tg
import tritonclient.http as th


def requests(n, seed):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        x = rng.random((1, 4), dtype=np.float32)
        scale = rng.random((1, 4), dtype=np.float32) * 10 if i % 2 else None
        out.append((f"r{seed}-{i}", x, scale))
    return out


def optional_flags(client, model):
    config = client.get_model_config(model)
    if isinstance(config, dict):
        inputs = config["input"]
        return {t["name"]: bool(t.get("optional", False)) for t in inputs}
    return {t.name: t.optional for t in config.config.input}


def run(module, client, model, args, seed):
    session = ort.InferenceSession(args.onnx, providers=["CPUExecutionProvider"])
    sent = requests(args.requests, seed)
    answers = {}
    lock = threading.Lock()
    done = threading.Event()

    def record(rid, result, error):
        with lock:
            entry = answers.setdefault(rid, [])
            entry.append((result, error))
            if sum(len(v) for v in answers.values()) == len(sent):
                done.set()

    pending = []
    for rid, x, scale in sent:
        tensors = []
        for name, value in [("x", x), (args.optional, scale)]:
            if value is None:
                continue
            t = module.InferInput(name, list(value.shape), "FP32")
            t.set_data_from_numpy(value)
            tensors.append(t)
        if module is th:
            pending.append((rid, client.async_infer(model, tensors, request_id=rid)))
        else:
            client.async_infer(
                model,
                tensors,
                request_id=rid,
                callback=lambda result, error, rid=rid: record(rid, result, error),
            )
    for rid, p in pending:
        try:
            record(rid, p.get_result(), None)
        except Exception as e:  # tritonclient's InferenceServerException
            record(rid, None, e)
    done.wait(60)

    worst = 0.0
    errors = []
    counts = {}
    for rid, x, scale in sent:
        got = answers.get(rid, [])
        counts[rid] = len(got)
        if len(got) != 1:
            continue
        result, error = got[0]
        if error is not None:
            errors.append(f"{rid}: {error}")
            continue
        response = result.get_response()
        answered_id = response["id"] if isinstance(response, dict) else response.id
        if answered_id != rid:
            errors.append(f"{rid}: answered as {answered_id}")
        feed = {"x": x} if scale is None else {"x": x, args.optional: scale}
        want = session.run(None, feed)[0]
        worst = max(worst, float(np.max(np.abs(result.as_numpy("y") - want))))
    return {
        "optional": optional_flags(client, model),
        "sent": len(sent),
        "answers_per_id": sorted(set(counts.values())),
        "errors": errors,
        "max_abs_diff": worst,
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--http", required=True)
    p.add_argument("--grpc", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--onnx", required=True)
    p.add_argument("--optional", required=True)
    p.add_argument("--requests", type=int, default=40)
    a = p.parse_args()
    http = th.InferenceServerClient(a.http, concurrency=8)
    grpc = tg.InferenceServerClient(a.grpc)
    out = {
        "http": run(th, http, a.model, a, 1),
        "grpc": run(tg, grpc, a.model, a, 2),
    }
    http.close()
    grpc.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
