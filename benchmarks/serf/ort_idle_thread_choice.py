"""ONNX Runtime alone, serving: does it matter which idle session thread takes the next request?
Two 1-thread sessions of one model, one worker thread each, serve Poisson arrivals from a shared
queue; a request that finds workers idle goes either to the one idle longest (what threads waiting
on one queue get: consecutive lone requests alternate between the sessions) or to the one that
went idle last (warm-session affinity: lone requests stay on one session). Prints the mean call
(ms) of each choice per round. Usage, from the repository root:
    .weir/venv/bin/python benchmarks/serf/ort_idle_thread_choice.py [MODEL] [RATE] [SECONDS] [ROUNDS]
(default .weir/models/mlp_l3.onnx, 180 requests/s, 8 s, 3 rounds). The sessions and the request
are `ort_session_rotation.py`'s."""
import random
import statistics
import sys
import threading
import time

from ort_session_rotation import warm_pair

model = sys.argv[1] if len(sys.argv) > 1 else ".weir/models/mlp_l3.onnx"
rate = float(sys.argv[2]) if len(sys.argv) > 2 else 180.0
seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 8.0
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
sessions, feed = warm_pair(model)


def serve(last_idle_first):
    """Mean call (ms) over `seconds` of Poisson arrivals at `rate`."""
    lock = threading.Lock()
    idle, queued, calls = [], [], []
    bells = [threading.Event() for _ in sessions]
    stopping = [False]

    def worker(k):
        while True:
            with lock:
                if queued:
                    queued.pop(0)
                    job = True
                else:
                    if stopping[0]:
                        return
                    idle.append(k)
                    job = False
            if not job:
                bells[k].wait()
                bells[k].clear()
                continue
            started = time.perf_counter()
            sessions[k].run(None, feed)
            calls.append(time.perf_counter() - started)

    workers = [threading.Thread(target=worker, args=(k,)) for k in range(len(sessions))]
    for w in workers:
        w.start()
    at = time.perf_counter()
    end = at + seconds
    arrivals = random.Random(1)
    while at < end:
        at += arrivals.expovariate(rate)
        wait = at - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        with lock:
            queued.append(1)
            if idle:
                k = idle.pop() if last_idle_first else idle.pop(0)
                bells[k].set()
    time.sleep(0.05)
    with lock:
        stopping[0] = True
    for bell in bells:
        bell.set()
    for w in workers:
        w.join()
    return statistics.fmean(calls) * 1e3


for r in range(rounds):
    longest, last = serve(False), serve(True)
    print(f"round {r + 1}: idle longest first {longest:.3f} ms, went idle last first {last:.3f} ms")
