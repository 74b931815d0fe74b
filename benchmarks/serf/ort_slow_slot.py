"""ONNX Runtime alone: do two 1-thread sessions running back to back on two threads (SERF's `(2, 1)`
with both slots busy, as the profile measures it) go through stretches where one of them runs slower
than the other — one vCPU slow for seconds — with no weir thread in the process?

Each round runs both sessions back to back for ROUND_SECONDS, then idles 0.3 s; it prints each
thread's mean call (ms) and their ratio, and at the end how many rounds had one thread more than
10 % slower than the other. Usage, from the repository root:
.weir/venv/bin/python benchmarks/serf/ort_slow_slot.py [ROUNDS] (default 40) [MODEL] (default the
zoo's squeezenet)."""
import statistics
import sys
import threading
import time

import numpy as np
import onnxruntime as ort

ROUND_SECONDS = 0.5
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 40
MODEL = sys.argv[2] if len(sys.argv) > 2 else ".weir/zoo/squeezenet.onnx"


def session():
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(MODEL, options, providers=["CPUExecutionProvider"])


def request(s):
    i = s.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in i.shape]
    return {i.name: np.random.rand(*shape).astype(np.float32)}


def run_back_to_back(s, feed, until, out):
    while time.perf_counter() < until:
        started = time.perf_counter()
        s.run(None, feed)
        out.append(time.perf_counter() - started)


def main():
    sessions = [session(), session()]
    feeds = [request(s) for s in sessions]
    for s, f in zip(sessions, feeds):
        for _ in range(3):
            s.run(None, f)
    uneven = 0
    for r in range(ROUNDS):
        until = time.perf_counter() + ROUND_SECONDS
        calls = [[], []]
        threads = [
            threading.Thread(target=run_back_to_back, args=(s, f, until, c))
            for s, f, c in zip(sessions, feeds, calls)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        means = [statistics.mean(c) * 1e3 for c in calls]
        ratio = max(means) / min(means)
        uneven += ratio > 1.10
        print(f"round {r:2}: thread means {means[0]:.2f} / {means[1]:.2f} ms, slower/faster {ratio:.3f}")
        time.sleep(0.3)
    print(f"{uneven} of {ROUNDS} rounds with one thread more than 10 % slower than the other")


if __name__ == "__main__":
    main()
