#!/usr/bin/env python3
"""Model control through Triton's own clients (tritonclient[grpc] and tritonclient[http]) against
`weir serve --model-repository --model-control-mode explicit`. Used by
tests/it/model_control.rs.

    repository_client.py --grpc HOST:PORT --http HOST:PORT --model NAME

Over each client in turn: the repository index, unloading MODEL (no longer ready), loading it
again (ready), and loading it with a configuration given as JSON. Prints one JSON line with what
it saw; exit status 1 with the failed check on stderr.
"""

import argparse
import json
import sys
import time

import tritonclient.grpc as tg
import tritonclient.http as th


def fail(message):
    print(f"repository_client: {message}", file=sys.stderr)
    sys.exit(1)


def wait_ready(client, model, ready):
    deadline = time.monotonic() + 30
    while client.is_model_ready(model) != ready:
        if time.monotonic() > deadline:
            fail(f"{model} never became {'ready' if ready else 'unready'}")
        time.sleep(0.05)


def exercise(client, model, index_of):
    seen = {"index": index_of(client)}
    client.unload_model(model)
    wait_ready(client, model, False)
    client.load_model(model)
    wait_ready(client, model, True)
    config = json.dumps({"max_batch_size": 2, "version_policy": {"latest": {"num_versions": 1}}})
    client.load_model(model, config=config)
    wait_ready(client, model, True)
    seen["versions"] = client.get_model_metadata(model, as_json=True)["versions"] \
        if isinstance(client, tg.InferenceServerClient) \
        else client.get_model_metadata(model)["versions"]
    return seen


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--grpc", required=True)
    parser.add_argument("--http", required=True)
    parser.add_argument("--model", required=True)
    args = parser.parse_args()
    grpc_client = tg.InferenceServerClient(url=args.grpc)
    http_client = th.InferenceServerClient(url=args.http)
    out = {
        "grpc": exercise(
            grpc_client,
            args.model,
            lambda c: c.get_model_repository_index(as_json=True).get("models", []),
        ),
        "http": exercise(http_client, args.model, lambda c: c.get_model_repository_index()),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
