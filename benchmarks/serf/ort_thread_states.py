#!/usr/bin/env python3
"""ONNX Runtime alone (no weir): how long a 1-thread and a 2-thread call of the same model take,
round after round, to show whether the machine's 2-thread speed is steady.

Each round times 30 calls on a 1-thread session, then 30 on a 2-thread session (spinning on, as
`weir bench serf` serves), and prints the two medians; the summary counts the rounds where the
2-thread median is above `--slow-ms`. On the 2-vCPU VM of benchmarks/SERF.md (*serf phases*,
2026-11-25) 2-thread shufflenet calls switched between ~3 ms and ~6 ms for tens of seconds at a
time while 1-thread calls stayed at ~5 ms.

    .weir/venv/bin/python benchmarks/serf/ort_thread_states.py [--model M] [--rounds N]
"""

import argparse
import statistics
import time

import numpy as np
import onnxruntime as ort


def session(path, threads, pin):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.add_session_config_entry("session.intra_op.allow_spinning", "1")
    if pin and threads > 1:
        # Workers on CPUs 2.. (ORT's ids are 1-based), the caller pinned to CPU 0 below.
        options.add_session_config_entry(
            "session.intra_op_thread_affinities",
            ";".join(str(w + 1) for w in range(1, threads)),
        )
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def median_ms(s, feed, calls):
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        s.run(None, feed)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=".weir/zoo/shufflenet.onnx")
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--slow-ms", type=float, default=4.5)
    parser.add_argument("--pin", action="store_true", help="caller on CPU 0, workers on CPU 1..")
    args = parser.parse_args()
    if args.pin:
        import os

        os.sched_setaffinity(0, {0})
    one, two = session(args.model, 1, args.pin), session(args.model, 2, args.pin)
    spec = one.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in spec.shape]
    feed = {spec.name: np.random.default_rng(7).random(shape, dtype=np.float32)}
    for s in (one, two):
        median_ms(s, feed, 10)
    rows = []
    for _ in range(args.rounds):
        rows.append((median_ms(one, feed, args.calls), median_ms(two, feed, args.calls)))
    print("per round, t=1 ms / t=2 ms:")
    print(" ".join(f"{a:.1f}/{b:.1f}" for a, b in rows))
    slow = [r for r in rows if r[1] > args.slow_ms]
    fast = [r for r in rows if r[1] <= args.slow_ms]
    mean = lambda v: sum(v) / len(v) if v else float("nan")
    print(
        f"{len(rows)} rounds; {len(slow)} with the 2-thread median above {args.slow_ms} ms "
        f"(t=2 {mean([b for _, b in slow]):.2f} ms, t=1 {mean([a for a, _ in slow]):.2f} ms in them); "
        f"{len(fast)} below (t=2 {mean([b for _, b in fast]):.2f} ms, t=1 {mean([a for a, _ in fast]):.2f} ms)"
    )


if __name__ == "__main__":
    main()
