#!/usr/bin/env python3
"""Talks to `weir serve --grpc` with Triton's own gRPC client (tritonclient[grpc]) and, for what
that client never sends (typed `contents`, malformed messages), with the protocol's generated
stub from the same package. Used by tests/it/grpc.rs.

    grpc_client.py <command> --url HOST:PORT [--token T] [--onnx PATH]

Commands (each prints one JSON line with what it saw; exit status 1 with the failed check on
stderr):
  rpcs     every unary RPC, and an mlp request checked against onnxruntime
  dtypes   identity graphs dt_<type> over raw and typed contents, answers equal to what was sent
  bad      malformed requests: each refused with its status code and the field named, the server
           still ready afterwards
  auth     no token and a wrong one are UNAUTHENTICATED, the right one answers, liveness needs none
  stream   1,000 requests on one ModelStreamInfer stream, every id answered exactly once, and a
           malformed one among them answered with its error
  modelless  the model-less task `digits` with its requirements as request parameters: the
           variant, cold start and outputs of a min_accuracy 0.98 query, and the errors of an
           impossible accuracy and of a requirement of the wrong type
"""

import argparse
import json
import queue
import sys

import grpc
import ml_dtypes
import numpy as np
import tritonclient.grpc as tg
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc as pbg
from tritonclient.utils import InferenceServerException


def fail(message):
    print(f"grpc_client: {message}", file=sys.stderr)
    sys.exit(1)


def check(ok, message):
    if not ok:
        fail(message)


def headers(token):
    return {"authorization": f"Bearer {token}"} if token else None


def stub(url, token):
    channel = grpc.insecure_channel(url, options=[("grpc.max_send_message_length", 64 << 20)])
    metadata = [("authorization", f"Bearer {token}")] if token else None
    return pbg.GRPCInferenceServiceStub(channel), metadata


def mlp_rows(n, seed=1):
    return np.random.default_rng(seed).random((n, 64), dtype=np.float32)


def rpcs(args):
    c = tg.InferenceServerClient(args.url)
    h = headers(args.token)
    check(c.is_server_live(headers=h), "ServerLive")
    check(c.is_server_ready(headers=h), "ServerReady")
    check(c.is_model_ready("mlp", headers=h), "ModelReady")
    meta = c.get_server_metadata(headers=h, as_json=True)
    check(meta["name"] == "weir", f"ServerMetadata {meta}")
    model = c.get_model_metadata("mlp", headers=h, as_json=True)
    check(model["inputs"][0] == {"name": "x", "datatype": "FP32", "shape": ["-1", "64"]}, f"ModelMetadata {model}")
    rows = mlp_rows(5)
    x = tg.InferInput("x", list(rows.shape), "FP32")
    x.set_data_from_numpy(rows)
    result = c.infer("mlp", [x], request_id="rpcs-1", headers=h)
    got = result.as_numpy("probs")
    check(result.get_response().id == "rpcs-1", "the reply carries the request's id")
    import onnxruntime as ort
    session = ort.InferenceSession(args.onnx, providers=["CPUExecutionProvider"])
    want = np.concatenate([session.run(None, {"x": r[None, :]})[0] for r in rows])
    worst = float(np.max(np.abs(got - want)))
    check(worst < 1e-5, f"ModelInfer differs from onnxruntime by {worst}")
    print(json.dumps({"server": meta["name"], "outputs": list(got.shape), "max_abs_diff": worst}))


# Per type: numpy dtype, values exactly representable in it, and its typed contents field.
DTYPES = {
    "bool": (np.bool_, [True, False, True, True, False, False, True, False], "bool_contents"),
    "u8": (np.uint8, [0, 255, 0, 1, 254, 42, 7, 100], "uint_contents"),
    "i8": (np.int8, [-128, 127, 0, 1, -1, 42, 7, 100], "int_contents"),
    "u64": (np.uint64, [0, 2**64 - 1, 0, 1, 2**64 - 2, 42, 7, 100], "uint64_contents"),
    "i64": (np.int64, [-(2**63), 2**63 - 1, 0, 1, -1, 42, 7, 100], "int64_contents"),
    "f16": (np.float16, [0.5, -2.0, 65504.0, -0.0, 6.103515625e-05, 5.960464477539063e-08, 3.0, -1.25], None),
    "bf16": (ml_dtypes.bfloat16, [0.5, -2.0, 1.5, -0.0, 256.0, -7.5, 3.0, 1.0], None),
    "f32": (np.float32, [0.5, -2.0, 3.4028234663852886e38, -0.0, 1.401298464324817e-45, 0.25, 1024.0, float("nan")], "fp32_contents"),
    "f64": (np.float64, [0.1, -2.5, 1.7976931348623157e308, -0.0, 5e-324, float("inf"), 3.0, 1 / 3], "fp64_contents"),
    "string": (np.object_, [b"", b"a", "h\u00e9llo".encode(), "\u00fc\u4e2d".encode(), b"x" * 300, b"b", b"c", b"d"], "bytes_contents"),
}


def triton_type(t):
    return {"bool": "BOOL", "u8": "UINT8", "i8": "INT8", "u64": "UINT64", "i64": "INT64", "f16": "FP16",
            "bf16": "BF16", "f32": "FP32", "f64": "FP64", "string": "BYTES"}[t]


def same(got, want):
    got, want = np.asarray(got).reshape(-1), np.asarray(want).reshape(-1)
    if want.dtype == np.object_:
        return [bytes(g) for g in got] == [bytes(w) for w in want]
    g = got.view(np.uint8)
    w = np.ascontiguousarray(want.astype(got.dtype)).view(np.uint8)
    return g.tobytes() == w.tobytes()


def dtypes(args):
    c = tg.InferenceServerClient(args.url)
    s, md = stub(args.url, args.token)
    seen = {}
    for t, (np_type, values, field) in DTYPES.items():
        model = f"dt_{t}"
        array = np.array(values, dtype=np_type).reshape(2, 4)
        datatype = triton_type(t)
        x = tg.InferInput("x", [2, 4], datatype)
        x.set_data_from_numpy(array)
        result = c.infer(model, [x], outputs=[tg.InferRequestedOutput("y")])
        check(result.get_output("y").datatype == datatype, f"{model} y datatype")
        check(same(result.as_numpy("y"), array), f"{model}: raw contents did not come back as sent")
        modes = ["raw"]
        if field is not None:
            # Typed contents both ways: sent in the type's field, asked for typed back.
            req = pb.ModelInferRequest(model_name=model, id=f"typed-{t}")
            i = req.inputs.add(name="x", datatype=datatype, shape=[2, 4])
            flat = [v for v in values]
            getattr(i.contents, field).extend(flat)
            o = req.outputs.add(name="y")
            o.parameters["binary_data"].bool_param = False
            reply = s.ModelInfer(req, metadata=md)
            check(len(reply.raw_output_contents) == 0, f"{model}: typed reply expected")
            check(reply.id == f"typed-{t}", f"{model}: typed reply id")
            back = list(getattr(reply.outputs[0].contents, field))
            want = np.array(values, dtype=np_type)
            check(same(np.array(back, dtype=np_type), want), f"{model}: typed contents {back} != {values}")
            modes.append("typed")
        seen[datatype] = modes
    print(json.dumps({"dtypes": seen}))


def expect_refused(s, md, req, code, field, what):
    try:
        s.ModelInfer(req, metadata=md)
    except grpc.RpcError as e:
        check(e.code() in (code if isinstance(code, tuple) else (code,)),
              f"{what}: got {e.code()} ({e.details()}), expected {code}")
        check(field in e.details(), f"{what}: message `{e.details()}` does not name `{field}`")
        return {"case": what, "code": e.code().name, "message": e.details()}
    fail(f"{what}: answered, expected {code}")


def mlp_request(shape=(1, 64), datatype="FP32", raw=None, name="x", model="mlp"):
    req = pb.ModelInferRequest(model_name=model, id="bad")
    req.inputs.add(name=name, datatype=datatype, shape=list(shape))
    req.raw_input_contents.append(raw if raw is not None else bytes(4 * 64))
    return req


def bad(args):
    s, md = stub(args.url, args.token)
    I = grpc.StatusCode.INVALID_ARGUMENT
    cases = [
        (mlp_request(datatype="FP8"), I, "inputs[0] (x).datatype", "unknown datatype"),
        (mlp_request(shape=(1, -64)), I, "inputs[0] (x).shape", "negative dimension"),
        (mlp_request(shape=(2**40, 2**40)), I, "inputs[0] (x).shape", "overflowing shape"),
        (mlp_request(raw=bytes(4 * 63)), I, "inputs[0] (x).contents (raw)", "short raw contents"),
        (mlp_request(name="nope"), I, "inputs[0] (nope)", "unknown input"),
        (mlp_request(model="nope"), grpc.StatusCode.NOT_FOUND, "model_name", "unknown model"),
    ]
    two_raw = mlp_request()
    two_raw.raw_input_contents.append(b"\x00")
    cases.append((two_raw, I, "raw_input_contents", "more raw entries than inputs"))
    wrong_field = pb.ModelInferRequest(model_name="mlp")
    wi = wrong_field.inputs.add(name="x", datatype="FP32", shape=[1, 64])
    wi.contents.int64_contents.extend([1] * 64)
    cases.append((wrong_field, I, "inputs[0] (x).contents.int64_contents", "typed contents in the wrong field"))
    out = mlp_request()
    out.outputs.add(name="nope")
    cases.append((out, I, "outputs", "unknown output"))
    u8 = pb.ModelInferRequest(model_name="dt_u8")
    ui = u8.inputs.add(name="x", datatype="UINT8", shape=[1, 4])
    ui.contents.uint_contents.extend([1, 2, 300, 4])
    cases.append((u8, I, "inputs[0] (x).contents", "UINT8 value out of range"))
    half = pb.ModelInferRequest(model_name="dt_f16")
    hi = half.inputs.add(name="x", datatype="FP16", shape=[1, 4])
    hi.contents.fp32_contents.extend([1, 2, 3, 4])
    cases.append((half, I, "raw_input_contents", "FP16 in typed contents"))
    big = mlp_request(raw=bytes(args.max_bytes + 1))
    # tonic refuses a message over the cap before decoding it, with OUT_OF_RANGE ("decoded
    # message length too large"); gRPC's C core says RESOURCE_EXHAUSTED for the same.
    too_big = (grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.RESOURCE_EXHAUSTED)
    cases.append((big, too_big, "too large", "message over the size cap"))
    seen = [expect_refused(s, md, req, code, field, what) for req, code, field, what in cases]
    ready = s.ServerReady(pb.ServerReadyRequest(), metadata=md).ready
    check(ready, "the server is not ready after the bad requests")
    good = s.ModelInfer(mlp_request(), metadata=md)
    check(len(good.raw_output_contents) == 1, "a good request after the bad ones is answered")
    print(json.dumps({"refused": seen, "ready_after": ready}))


def auth(args):
    s, _ = stub(args.url, None)
    results = {}
    for label, md in [("missing", None), ("wrong", [("authorization", "Bearer not-the-token")])]:
        for rpc, call in [("ServerReady", lambda m: s.ServerReady(pb.ServerReadyRequest(), metadata=m)),
                          ("ModelInfer", lambda m: s.ModelInfer(mlp_request(), metadata=m))]:
            try:
                call(md)
                fail(f"{rpc} with a {label} token was answered")
            except grpc.RpcError as e:
                check(e.code() == grpc.StatusCode.UNAUTHENTICATED, f"{rpc} {label}: {e.code()}")
                results[f"{rpc}/{label}"] = e.code().name
    check(s.ServerLive(pb.ServerLiveRequest()).live, "liveness needs no token")
    good = [("authorization", f"Bearer {args.token}")]
    check(s.ServerReady(pb.ServerReadyRequest(), metadata=good).ready, "ServerReady with the token")
    check(len(s.ModelInfer(mlp_request(), metadata=good).raw_output_contents) == 1, "ModelInfer with the token")
    c = tg.InferenceServerClient(args.url)
    check(c.is_server_ready(headers=headers(args.token)), "tritonclient with the token")
    results["with_token"] = "OK"
    print(json.dumps(results))


def stream(args):
    c = tg.InferenceServerClient(args.url)
    replies = queue.Queue()
    c.start_stream(callback=lambda result, error: replies.put((result, error)), headers=headers(args.token))
    rows = mlp_rows(args.count, seed=3)
    for k in range(args.count):
        x = tg.InferInput("x", [1, 64], "FP32")
        x.set_data_from_numpy(rows[k:k + 1])
        c.async_stream_infer("mlp", [x], request_id=str(k))
        if k == args.count // 2:
            # A bad request mid-stream is answered with its error; the stream goes on.
            bad = tg.InferInput("x", [1, 63], "FP32")
            bad.set_data_from_numpy(rows[k:k + 1, :63])
            c.async_stream_infer("mlp", [bad], request_id="bad")
    ids = {}
    errors = []
    for _ in range(args.count + 1):
        result, error = replies.get(timeout=60)
        if error is not None:
            errors.append(str(error))
            continue
        rid = result.get_response().id
        ids[rid] = ids.get(rid, 0) + 1
        check(result.as_numpy("probs").shape == (1, 10), "probs shape")
    c.stop_stream()
    check(len(errors) == 1 and "shape" in errors[0], f"the bad request's error: {errors}")
    check(sorted(ids) == sorted(str(k) for k in range(args.count)), "some ids missing or unknown")
    check(all(n == 1 for n in ids.values()), "an id answered more than once")
    check(replies.empty(), "more replies than requests")
    print(json.dumps({"requests": args.count, "answered_once": len(ids), "errors": errors}))


def digits_pixels():
    """The image tests/it/modelless_serve.rs sends (PIXELS there)."""
    return np.array([[((i * 7) % 17) / 16.0 for i in range(64)]], dtype=np.float32)


def modelless_refusal(c, parameters, h):
    x = tg.InferInput("x", [1, 64], "FP32")
    x.set_data_from_numpy(digits_pixels())
    try:
        c.infer("digits", [x], parameters=parameters, headers=h)
    except InferenceServerException as e:
        check(e.status() == "StatusCode.INVALID_ARGUMENT", f"{parameters}: {e.status()} {e}")
        return e.message()
    fail(f"{parameters} was answered")


def modelless(args):
    c = tg.InferenceServerClient(args.url)
    h = headers(args.token)
    x = tg.InferInput("x", [1, 64], "FP32")
    x.set_data_from_numpy(digits_pixels())
    result = c.infer("digits", [x], parameters={"min_accuracy": 0.98}, headers=h)
    response = result.get_response()
    output = response.outputs[0].name
    print(json.dumps({
        "variant": response.parameters["variant"].string_param,
        "cold_start": response.parameters["cold_start"].bool_param,
        "outputs": result.as_numpy(output).ravel().tolist(),
        "impossible": modelless_refusal(c, {"min_accuracy": 0.9999}, h),
        "wrong_type": modelless_refusal(c, {"min_accuracy": "high"}, h),
    }))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["rpcs", "dtypes", "bad", "auth", "stream", "modelless"])
    ap.add_argument("--url", required=True)
    ap.add_argument("--token")
    ap.add_argument("--onnx")
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--max-bytes", type=int, default=4 << 20)
    args = ap.parse_args()
    try:
        globals()[args.command](args)
    except (InferenceServerException, grpc.RpcError) as e:
        fail(f"{args.command}: {e}")


if __name__ == "__main__":
    main()
