"""Do ONNX Runtime sessions of one model, created one after another in one process, keep different
speeds for their whole life (a per-session "level", which would make one serving graph slower
than another in the same configuration)? K sessions with T intra-op threads (spinning on), R
rounds in a shuffled order of N back-to-back calls each; prints each session's median and how
well even and odd rounds agree on the ranking.

Usage: .weir/venv/bin/python benchmarks/serf/ort_session_levels.py MODEL K R N T
(benchmarks/SERF.md, *Why SERF runs what it runs*: shufflenet 6 30 40 2)."""
import sys, time, random, statistics as st
import numpy as np, onnxruntime as ort
model, K, R, N, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
sessions = []
for _ in range(K):
    o = ort.SessionOptions(); o.intra_op_num_threads = threads; o.inter_op_num_threads = 1
    o.add_session_config_entry("session.intra_op.allow_spinning", "1")
    sessions.append(ort.InferenceSession(model, o, providers=["CPUExecutionProvider"]))
inp = sessions[0].get_inputs()[0]
shape = [d if isinstance(d, int) else 1 for d in inp.shape]
x = np.random.rand(*shape).astype(np.float32)
for s in sessions:
    for _ in range(20): s.run(None, {inp.name: x})
times = [[] for _ in range(K)]
rng = random.Random(1)
for r in range(R):
    order = list(range(K)); rng.shuffle(order)
    for k in order:
        t0 = time.perf_counter()
        for _ in range(N): sessions[k].run(None, {inp.name: x})
        times[k].append((time.perf_counter() - t0) / N * 1e3)
    time.sleep(0.05)
allmed = st.median([t for ts in times for t in ts])
print(f"{model} t={threads}: {K} sessions, {R} rounds of {N} calls; overall median {allmed:.3f} ms")
for k, ts in enumerate(times):
    print(f"session {k}: median {st.median(ts):.3f} ms ({st.median(ts)/allmed:.3f}), rounds min {min(ts):.3f} max {max(ts):.3f}")
# how consistent: per round, rank of each session
meds = [st.median(ts) for ts in times]
print(f"spread of session medians: {min(meds):.3f}-{max(meds):.3f} ms ({max(meds)/min(meds):.3f}x)")
# split-half reliability: correlate medians of even and odd rounds
ev = [st.median(ts[0::2]) for ts in times]; od = [st.median(ts[1::2]) for ts in times]
print(f"even-round vs odd-round session medians, correlation {np.corrcoef(ev, od)[0,1]:.2f}")
