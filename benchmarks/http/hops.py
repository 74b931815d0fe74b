#!/usr/bin/env python3
"""Where one HTTP binary request's time goes: thread wake-ups and minor page faults per request,
and (under callgrind) instructions per request in and outside ONNX Runtime.

Serves a one-model squeezenet graph with `weir serve`, sends requests one at a time (binary
tensors, keep-alive), and reads each server thread's voluntary context switches from
/proc/<pid>/task/*/status before and after: a thread that sleeps and is woken once per request
(a hand-off to it) counts one. `--pinned` runs the node with `pin_cores_from: 0`, whose session
threads keep every call (the hand-off path), against the default, whose worker runs a lone
request's call itself when the executor is idle. `--callgrind` runs the server under valgrind's
callgrind, collecting only while the measured requests run, and splits the instructions by the
object they ran in (libonnxruntime is the model; the rest is weir, the kernel interface and libc).

    python3 benchmarks/http/hops.py --weir target/release/weir [--pinned] [--callgrind]
        [--callgrind-out FILE]   # keep the profile: callgrind_annotate --inclusive=yes FILE
"""

import argparse
import collections
import glob
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def graph(pinned):
    executor = "{instances: 1, intra_op_threads: 1%s}" % (", pin_cores_from: 0" if pinned else "")
    return f"""name: hops
inputs:
  - {{name: x, dtype: f32, shape: [3, 224, 224]}}
nodes:
  - model:
      id: squeezenet
      path: {REPO}/.weir/zoo/squeezenet.onnx
      inputs: {{data_0: x}}
      executor: {executor}
outputs:
  - {{name: y, from: squeezenet.softmaxout_1}}
"""


def body():
    data = bytes(3 * 224 * 224 * 4)
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "x",
                    "shape": [1, 3, 224, 224],
                    "datatype": "FP32",
                    "parameters": {"binary_data_size": len(data)},
                }
            ],
            "outputs": [{"name": "y", "parameters": {"binary_data": True}}],
        }
    ).encode()
    return header, header + data


def switches(pid):
    """Voluntary context switches per thread name (threads of one name summed)."""
    out = collections.Counter()
    for status in glob.glob(f"/proc/{pid}/task/*/status"):
        try:
            text = open(status).read()
        except OSError:
            continue
        name = re.search(r"^Name:\s*(.*)$", text, re.M).group(1)
        n = int(re.search(r"^voluntary_ctxt_switches:\s*(\d+)", text, re.M).group(1))
        # Numbered threads of one pool (tokio-runtime-w, ort-squeezenet-0...) by their pool.
        out[re.sub(r"[-_:]?\d+$", "", name)] += n
    return out


def minor_faults(pid):
    """The process's minor page faults so far (/proc/<pid>/stat, field 10)."""
    text = open(f"/proc/{pid}/stat").read()
    return int(text[text.rindex(")") + 2:].split()[7])


def post(conn, header, payload):
    conn.request(
        "POST",
        "/v2/models/hops/infer",
        body=payload,
        headers={
            "Content-Type": "application/octet-stream",
            "Inference-Header-Content-Length": str(len(header)),
        },
    )
    r = conn.getresponse()
    r.read()
    if r.status != 200:
        sys.exit(f"HTTP {r.status}")


def object_costs(path):
    """Self instructions per object from a callgrind output file."""
    names, costs = {}, collections.Counter()
    ob, skip_next = None, False
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        # An object's name is given once, where its number first appears (ob=, cob=).
        named = re.match(r"c?ob=\((\d+)\) (.+)", line)
        if named:
            names[named.group(1)] = named.group(2)
        if line.startswith("ob="):
            m = re.match(r"ob=\((\d+)\)(?: (.*))?", line)
            if m:
                if m.group(2):
                    names[m.group(1)] = m.group(2)
                ob = names.get(m.group(1), m.group(1))
            else:
                ob = line[3:]
        elif line.startswith("calls="):
            skip_next = True
        elif line and (line[0].isdigit() or line[0] in "+-*"):
            if skip_next:
                skip_next = False
                continue
            parts = line.split()
            if len(parts) >= 2:
                costs[ob] += int(parts[1])
    return costs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weir", required=True)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--pinned", action="store_true")
    ap.add_argument("--callgrind", action="store_true")
    ap.add_argument("--callgrind-out", help="keep the callgrind profile here (for callgrind_annotate)")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="weir-hops-")
    spec = os.path.join(work, "hops.yaml")
    open(spec, "w").write(graph(args.pinned))
    port = free_port()
    cmd = [args.weir, "serve", spec, "--http", f"127.0.0.1:{port}"]
    out = os.path.join(work, "callgrind.out")
    if args.callgrind:
        cmd = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={out}",
        ] + cmd
    env = dict(os.environ, WEIR_LOG="error", WEIR_REQUEST_TIMEOUT_MS="3600000")
    server = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        header, payload = body()
        deadline = time.time() + 600
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
                post(conn, header, payload)
                break
            except (ConnectionRefusedError, OSError):
                if time.time() > deadline or server.poll() is not None:
                    sys.exit("server did not start")
                time.sleep(0.5)
        for _ in range(args.warmup):
            post(conn, header, payload)
        if args.callgrind:
            subprocess.run(["callgrind_control", "-i", "on", str(server.pid)], check=True,
                           stdout=subprocess.DEVNULL)
        before = switches(server.pid)
        faults = minor_faults(server.pid)
        started = time.time()
        for _ in range(args.requests):
            post(conn, header, payload)
        elapsed = time.time() - started
        after = switches(server.pid)
        faults = minor_faults(server.pid) - faults
        if args.callgrind:
            subprocess.run(["callgrind_control", "-d", str(server.pid)], check=True,
                           stdout=subprocess.DEVNULL)
        n = args.requests
        print(f"{'pinned (hand-off path)' if args.pinned else 'default'}: {n} requests, "
              f"{elapsed / n * 1000:.3f} ms each{' under callgrind' if args.callgrind else ''}")
        print("wake-ups per request by thread:")
        total = 0.0
        for name in sorted(after):
            d = (after[name] - before.get(name, 0)) / n
            if d >= 0.05:
                print(f"  {name:24s} {d:6.2f}")
                total += d
        print(f"  {'all threads':24s} {total:6.2f}")
        print(f"minor page faults per request: {faults / n:.1f}")
        if args.callgrind:
            time.sleep(2)
            costs = collections.Counter()
            for f in glob.glob(out + "*"):
                costs.update(object_costs(f))
            ort = sum(c for o, c in costs.items() if "onnxruntime" in str(o))
            every = sum(costs.values())
            print(f"instructions per request: {every / n:,.0f} in all, {ort / n:,.0f} in "
                  f"ONNX Runtime, {(every - ort) / n:,.0f} outside it")
            for o, c in costs.most_common(8):
                print(f"  {c / n:14,.0f}  {o}")
            if args.callgrind_out:
                for i, f in enumerate(sorted(glob.glob(out + "*"))):
                    shutil.copy(f, args.callgrind_out + (f".{i}" if i else ""))
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
