#!/usr/bin/env python3
"""Talks to `weir serve` with Triton's own HTTP client (tritonclient[http]) and checks the
answers against a direct onnxruntime run of the same ONNX model. Used by tests/it/serve.rs.

Subcommands print one JSON line with what they saw and exit non-zero when a check fails.
"""
import argparse
import asyncio
import json
import sys

import numpy as np
import onnxruntime as ort
import tritonclient.http as http
import tritonclient.http.aio as http_aio


def reference(onnx_path, onnx_input, rows):
    """Runs the model one row at a time (works for fixed batch-1 and dynamic-batch models)."""
    session = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    return [session.run(None, {onnx_input: row[None, ...]})[0][0] for row in rows]


def make_rows(args):
    rng = np.random.default_rng(args.seed)
    shape = [int(d) for d in args.shape.split(",")]
    return [rng.random(shape, dtype=np.float32) for _ in range(args.requests)]


def infer_input(name, batch, binary):
    x = http.InferInput(name, list(batch.shape), "FP32")
    x.set_data_from_numpy(batch, binary_data=binary)
    return x


def check(outputs, want, tolerance):
    worst = 0.0
    for got, ref in zip(outputs, want):
        got = np.asarray(got).reshape(-1)
        ref = np.asarray(ref).reshape(-1)
        if got.shape != ref.shape:
            return float("inf")
        worst = max(worst, float(np.max(np.abs(got - ref))))
    return worst


def cmd_infer(args):
    rows = make_rows(args)
    binary = args.mode == "binary"
    client = http.InferenceServerClient(args.url, concurrency=args.concurrency)
    pending = []
    for i in range(0, len(rows), args.batch):
        batch = np.stack(rows[i:i + args.batch])
        out = http.InferRequestedOutput(args.output, binary_data=binary)
        pending.append(client.async_infer(args.model, [infer_input(args.input, batch, binary)],
                                          outputs=[out], request_id=str(i)))
    outputs = []
    for p in pending:
        result = p.get_result()
        arr = result.as_numpy(args.output)
        outputs.extend(list(arr))
    client.close()
    want = reference(args.onnx, args.onnx_input, rows)
    worst = check(outputs, want, args.tolerance)
    ok = len(outputs) == len(rows) and worst <= args.tolerance
    print(json.dumps({"requests": len(rows), "answered": len(outputs), "max_abs_diff": worst, "ok": ok}))
    return 0 if ok else 1


async def burst(args):
    rows = make_rows(args)
    async with http_aio.InferenceServerClient(args.url, conn_limit=args.requests) as client:
        async def one(i, row):
            x = http_aio.InferInput(args.input, [1] + list(row.shape), "FP32")
            x.set_data_from_numpy(row[None, ...], binary_data=True)
            try:
                r = await client.infer(args.model, [x], request_id=str(i))
                return r.as_numpy(args.output)[0]
            except Exception as e:  # report, do not hide
                return e
        if args.announce:
            print(json.dumps({"started": len(rows)}), flush=True)
        results = await asyncio.gather(*(one(i, r) for i, r in enumerate(rows)))
    errors = [str(r) for r in results if isinstance(r, Exception)]
    answers = [r for r in results if not isinstance(r, Exception)]
    worst = check(answers, reference(args.onnx, args.onnx_input, [rows[i] for i, r in enumerate(results) if not isinstance(r, Exception)]), args.tolerance) if answers else 0.0
    ok = not errors and len(answers) == len(rows) and worst <= args.tolerance
    print(json.dumps({"requests": len(rows), "answered": len(answers), "errors": errors[:5],
                      "error_count": len(errors), "max_abs_diff": worst, "ok": ok}), flush=True)
    return 0 if ok else 1


def cmd_metadata(args):
    client = http.InferenceServerClient(args.url)
    seen = {
        "live": client.is_server_live(),
        "ready": client.is_server_ready(),
        "model_ready": client.is_model_ready(args.model),
        "server": client.get_server_metadata(),
        "model": client.get_model_metadata(args.model),
    }
    client.close()
    model = seen["model"]
    ok = (seen["live"] and seen["ready"] and seen["model_ready"] and model["name"] == args.model
          and [i["name"] for i in model["inputs"]] == args.inputs.split(",")
          and [o["name"] for o in model["outputs"]] == args.outputs.split(","))
    seen["ok"] = ok
    print(json.dumps(seen))
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("infer", "burst"):
        s = sub.add_parser(name)
        s.add_argument("--url", required=True)
        s.add_argument("--model", required=True)
        s.add_argument("--input", required=True)
        s.add_argument("--output", required=True)
        s.add_argument("--onnx", required=True)
        s.add_argument("--onnx-input", required=True)
        s.add_argument("--shape", required=True, help="per-request shape, e.g. 3,224,224")
        s.add_argument("--requests", type=int, default=10)
        s.add_argument("--seed", type=int, default=0)
        s.add_argument("--tolerance", type=float, default=1e-5)
        if name == "infer":
            s.add_argument("--mode", choices=["json", "binary"], default="json")
            s.add_argument("--concurrency", type=int, default=1)
            s.add_argument("--batch", type=int, default=1)
        else:
            s.add_argument("--announce", action="store_true")
    m = sub.add_parser("metadata")
    m.add_argument("--url", required=True)
    m.add_argument("--model", required=True)
    m.add_argument("--inputs", required=True)
    m.add_argument("--outputs", required=True)
    args = p.parse_args()
    if args.cmd == "infer":
        return cmd_infer(args)
    if args.cmd == "burst":
        return asyncio.run(burst(args))
    return cmd_metadata(args)


if __name__ == "__main__":
    sys.exit(main())
