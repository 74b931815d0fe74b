"""ONNX Runtime alone: is a lone 1-thread call slower when consecutive calls go to different
sessions of the same model (what an executor with two session threads does with one request at a
time: the thread waiting longest takes the next job) than when they all go to one session? Each
session holds its own copy of the weights; a model whose weights fill the cache pays for the
switch. Usage, from the repository root:
    .weir/venv/bin/python benchmarks/serf/ort_session_rotation.py [MODEL] [ROUNDS]
(default .weir/models/mlp_l3.onnx, 3 rounds of 400 calls each way). Prints each round's mean and
median call (ms) for one session and for two in turn, and the median ratio."""
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort


def one_thread_session(model):
    """A 1-thread session of `model`, intra-op threads not spinning."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def warm_pair(model):
    """Two warmed 1-thread sessions of `model` and one random request for them (a dynamic
    dimension read as 1)."""
    sessions = [one_thread_session(model), one_thread_session(model)]
    signature = sessions[0].get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in signature.shape]
    feed = {signature.name: np.random.default_rng(7).random(shape, dtype=np.float32)}
    for session in sessions:
        for _ in range(20):
            session.run(None, feed)
    return sessions, feed


def calls(sessions, feed, n=400):
    """Mean and median (ms) of n calls, the i-th on sessions[i % len(sessions)]."""
    times = []
    for i in range(n):
        session = sessions[i % len(sessions)]
        started = time.perf_counter()
        session.run(None, feed)
        times.append(time.perf_counter() - started)
    return statistics.fmean(times) * 1e3, statistics.median(times) * 1e3


if __name__ == "__main__":
    model = sys.argv[1] if len(sys.argv) > 1 else ".weir/models/mlp_l3.onnx"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    (first, second), feed = warm_pair(model)
    ratios = []
    for r in range(rounds):
        alone = calls([first], feed)
        in_turn = calls([first, second], feed)
        ratios.append(in_turn[0] / alone[0])
        print(
            f"round {r + 1}: one session {alone[0]:.3f} ms (median {alone[1]:.3f}), "
            f"two in turn {in_turn[0]:.3f} ms (median {in_turn[1]:.3f}), ratio {ratios[-1]:.2f}"
        )
    print(f"{model}: median ratio, two sessions in turn / one session: {statistics.median(ratios):.2f}")
