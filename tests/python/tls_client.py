#!/usr/bin/env python3
"""Talks to `weir serve --tls-cert ...` with Triton's own clients over TLS (tritonclient.http with
ssl=True, tritonclient.grpc with ssl=True), checking answers of the `mlp` graph against a direct
onnxruntime run. Used by tests/it/tls.rs.

    tls_client.py http|grpc --url HOST:PORT --ca CA.pem [--cert C.pem --key K.pem]
                  [--expect ok|refused|plaintext-refused] --onnx mlp_a.onnx

--expect ok (the default): 3 requests of 4 rows each, every answer within 1e-4 of onnxruntime.
--expect refused: the request must fail (a client certificate the server refuses, or none).
--expect plaintext-refused: the same request without TLS must fail (the port speaks TLS).
Prints one JSON line with what it saw; exits 1 when the expectation is not met.
"""

import argparse
import json
import sys

import numpy as np
import onnxruntime as ort
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

TIMEOUT_S = 20.0


def rows(seed):
    return np.random.default_rng(seed).random((4, 64), dtype=np.float32)


def reference(onnx, batch):
    session = ort.InferenceSession(onnx, providers=["CPUExecutionProvider"])
    return np.concatenate([session.run(None, {"x": row[None, :]})[0] for row in batch])


def http_client(args, tls):
    if not tls:
        return httpclient.InferenceServerClient(
            args.url, connection_timeout=TIMEOUT_S, network_timeout=TIMEOUT_S)
    options = {"ca_certs": args.ca}
    if args.cert:
        options.update(certfile=args.cert, keyfile=args.key)
    return httpclient.InferenceServerClient(
        args.url, ssl=True, ssl_options=options,
        connection_timeout=TIMEOUT_S, network_timeout=TIMEOUT_S)


def grpc_client(args, tls):
    if not tls:
        return grpcclient.InferenceServerClient(args.url)
    return grpcclient.InferenceServerClient(
        args.url, ssl=True, root_certificates=args.ca,
        private_key=args.key, certificate_chain=args.cert)


def infer(args, tls):
    """Three requests; returns the largest difference from onnxruntime."""
    worst = 0.0
    if args.protocol == "http":
        client = http_client(args, tls)
        for seed in range(3):
            batch = rows(seed)
            x = httpclient.InferInput("x", list(batch.shape), "FP32")
            x.set_data_from_numpy(batch, binary_data=True)
            out = httpclient.InferRequestedOutput("probs", binary_data=True)
            got = client.infer("mlp", [x], outputs=[out], request_id=f"tls-{seed}").as_numpy("probs")
            worst = max(worst, float(np.max(np.abs(got - reference(args.onnx, batch)))))
        client.close()
    else:
        client = grpc_client(args, tls)
        for seed in range(3):
            batch = rows(seed)
            x = grpcclient.InferInput("x", list(batch.shape), "FP32")
            x.set_data_from_numpy(batch)
            got = client.infer("mlp", [x], request_id=f"tls-{seed}",
                               client_timeout=TIMEOUT_S).as_numpy("probs")
            worst = max(worst, float(np.max(np.abs(got - reference(args.onnx, batch)))))
        client.close()
    return worst


def main():
    p = argparse.ArgumentParser()
    p.add_argument("protocol", choices=["http", "grpc"])
    p.add_argument("--url", required=True)
    p.add_argument("--ca", required=True)
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--onnx", required=True)
    p.add_argument("--expect", default="ok", choices=["ok", "refused", "plaintext-refused"])
    args = p.parse_args()
    tls = args.expect != "plaintext-refused"
    try:
        worst = infer(args, tls)
    except Exception as e:  # noqa: BLE001 - any failure is what a refusal looks like
        if args.expect == "ok":
            print(json.dumps({"error": str(e)}))
            sys.exit(1)
        print(json.dumps({"refused": True, "error": str(e)[:300]}))
        return
    if args.expect != "ok":
        print(json.dumps({"refused": False}))
        sys.exit(1)
    print(json.dumps({"answered": 3, "max_abs_diff": worst}))
    if worst > 1e-4:
        sys.exit(1)


if __name__ == "__main__":
    main()
