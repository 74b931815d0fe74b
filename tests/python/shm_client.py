#!/usr/bin/env python3
"""Moves tensors to and from `weir serve --shared-memory system` through POSIX shared memory with
Triton's own clients (tritonclient[http] or [grpc] and tritonclient.utils.shared_memory), as a
Triton user on the same host does. Used by tests/it/shared_memory.rs.

    shm_client.py http|grpc --url HOST:PORT --onnx MLP.onnx --model NAME

Prints one JSON line: what the checks saw; exits 1 with the failed check on stderr.
  - 20 requests, each its own input written into one input region and its output read from one
    output region at an offset, each equal (1e-5) to onnxruntime on that input and to the same
    request with its tensors in the message;
  - the regions' status as registered, unregistering one and then all;
  - hostile and mistaken requests, each refused naming what is wrong, the server answering a
    plain request afterwards: a key that names no object, a range past its object, an input
    byte size that is not its shape's, a region not registered, an object shrunk after it was
    registered, an output region too small, a CUDA registration.
"""

import argparse
import json
import os
import sys

import numpy as np
import onnxruntime as ort
import tritonclient.utils.shared_memory as shm

INPUT_BYTES = 64 * 4
OUTPUT_BYTES = 10 * 4


def fail(what):
    print(what, file=sys.stderr)
    sys.exit(1)


def refused(call, *words):
    """The message of the error `call` raises; fails when it does not raise or the message lacks
    one of `words`."""
    try:
        call()
    except Exception as e:  # tritonclient raises its own exception types per protocol
        text = str(e)
        for w in words:
            if w not in text:
                fail(f"error without `{w}`: {text}")
        return text
    fail(f"not refused: expected an error with {words}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("protocol", choices=["http", "grpc"])
    p.add_argument("--url", required=True)
    p.add_argument("--onnx", required=True)
    p.add_argument("--model", required=True)
    a = p.parse_args()
    if a.protocol == "grpc":
        import tritonclient.grpc as tc
    else:
        import tritonclient.http as tc
    client = tc.InferenceServerClient(a.url)
    session = ort.InferenceSession(a.onnx, providers=["CPUExecutionProvider"])
    tag = f"{a.protocol}_{os.getpid()}"
    inp = shm.create_shared_memory_region(f"in_{tag}", f"/weir_in_{tag}", INPUT_BYTES)
    # The output region starts 8 bytes into its object, and outputs go 16 bytes into the region.
    out = shm.create_shared_memory_region(f"out_{tag}", f"/weir_out_{tag}", 8 + 16 + OUTPUT_BYTES)
    seen = {}
    try:
        client.unregister_system_shared_memory()
        client.unregister_cuda_shared_memory()
        client.register_system_shared_memory("in", f"/weir_in_{tag}", INPUT_BYTES)
        client.register_system_shared_memory("out", f"/weir_out_{tag}", 16 + OUTPUT_BYTES, offset=8)
        status = client.get_system_shared_memory_status()
        if a.protocol == "grpc":
            regions = {n: (r.key, r.offset, r.byte_size) for n, r in status.regions.items()}
        else:
            regions = {r["name"]: (r["key"], r["offset"], r["byte_size"]) for r in status}
        seen["status"] = {n: list(v) for n, v in sorted(regions.items())}

        rng = np.random.default_rng(7)
        worst = 0.0
        for i in range(20):
            x = rng.standard_normal((1, 64)).astype(np.float32)
            shm.set_shared_memory_region(inp, [x])
            tin = tc.InferInput("x", [1, 64], "FP32")
            tin.set_shared_memory("in", INPUT_BYTES)
            tout = tc.InferRequestedOutput("probs")
            tout.set_shared_memory("out", OUTPUT_BYTES, offset=16)
            result = client.infer(a.model, [tin], outputs=[tout], request_id=str(i))
            got_output = result.get_output("probs")
            shape = list(got_output.shape if a.protocol == "grpc" else got_output["shape"])
            if shape != [1, 10]:
                fail(f"request {i}: output shape {shape}")
            y = shm.get_contents_as_numpy(out, np.float32, [1, 10], offset=8 + 16)
            want = session.run(None, {session.get_inputs()[0].name: x})[0]
            plain_in = tc.InferInput("x", [1, 64], "FP32")
            plain_in.set_data_from_numpy(x)
            plain = client.infer(a.model, [plain_in]).as_numpy("probs")
            if not np.array_equal(y, plain):
                fail(f"request {i}: shared memory {y} against the message's {plain}")
            worst = max(worst, float(np.abs(y - want).max()))
        seen["requests"] = 20
        seen["max_error"] = worst
        if worst > 1e-5:
            fail(f"outputs differ from onnxruntime by {worst}")

        def plain_request():
            tin = tc.InferInput("x", [1, 64], "FP32")
            tin.set_data_from_numpy(np.ones((1, 64), np.float32))
            return client.infer(a.model, [tin]).as_numpy("probs")

        def shm_request(region="in", size=INPUT_BYTES, out_size=OUTPUT_BYTES):
            tin = tc.InferInput("x", [1, 64], "FP32")
            tin.set_shared_memory(region, size)
            tout = tc.InferRequestedOutput("probs")
            tout.set_shared_memory("out", out_size)
            return client.infer(a.model, [tin], outputs=[tout])

        errors = {}
        errors["missing_key"] = refused(
            lambda: client.register_system_shared_memory("x", "/weir_no_such_object", 8), "key"
        )
        errors["past_object"] = refused(
            lambda: client.register_system_shared_memory("x", f"/weir_in_{tag}", INPUT_BYTES, offset=8),
            "offset",
        )
        errors["taken_name"] = refused(
            lambda: client.register_system_shared_memory("in", f"/weir_in_{tag}", 8), "already"
        )
        errors["byte_size"] = refused(lambda: shm_request(size=INPUT_BYTES - 4), "shared_memory_byte_size")
        errors["unknown_region"] = refused(lambda: shm_request(region="nowhere"), "nowhere")
        errors["small_output"] = refused(lambda: shm_request(out_size=8), "shared_memory_byte_size")
        errors["cuda"] = refused(
            lambda: client.register_cuda_shared_memory("c", b"\0" * 64, 0, 8), "CUDA"
        )
        # The client shrinks its input object after registering it.
        os.truncate(f"/dev/shm/weir_in_{tag}", 16)
        errors["shrunk"] = refused(shm_request, "no longer holds")
        if plain_request().shape != (1, 10):
            fail("the server stopped answering after the refusals")
        seen["errors"] = sorted(errors)

        client.unregister_system_shared_memory("in")
        status = client.get_system_shared_memory_status()
        left = [n for n in status.regions] if a.protocol == "grpc" else [r["name"] for r in status]
        client.unregister_system_shared_memory()
        status = client.get_system_shared_memory_status()
        none = [n for n in status.regions] if a.protocol == "grpc" else [r["name"] for r in status]
        seen["after_unregister"] = [left, none]
    finally:
        shm.destroy_shared_memory_region(inp)
        shm.destroy_shared_memory_region(out)
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
