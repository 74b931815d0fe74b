"""ONNX Runtime alone: are two 1-thread sessions serving Poisson arrivals together (SERF's `(2, 1)`)
slower when the process also holds a spinning 2-thread session that served 15 s just before (what
a switchable executor holds after a low phase in `(1, 2)`)? Variant A: no such session (15 s idle
instead); B: with it. Each round serves 160 requests/s for 25 s; rounds alternate the order.
Usage: .weir/venv/bin/python benchmarks/serf/ort_idle_session.py [ROUNDS] (default 3), from the
repository root. Prints each round's mean call (ms) and the medians."""
import onnxruntime as ort, numpy as np, time, threading, random, statistics, sys
m='.weir/zoo/shufflenet.onnx'
def sess(t):
    o=ort.SessionOptions(); o.intra_op_num_threads=t; o.inter_op_num_threads=1
    o.add_session_config_entry('session.intra_op.allow_spinning','1')
    return ort.InferenceSession(m,o,providers=['CPUExecutionProvider'])
x=None
def inp(s):
    i=s.get_inputs()[0]; shape=[d if isinstance(d,int) else 1 for d in i.shape]
    return i.name, np.random.rand(*shape).astype(np.float32)
def serve(sessions, rate, secs):
    """Poisson arrivals at `rate` into a shared queue served by one thread per session; mean call ms."""
    import queue
    q=queue.Queue(); times=[]; lock=threading.Lock(); stop=time.time()+secs
    def worker(s):
        name,x=inp(s)
        while True:
            j=q.get()
            if j is None: return
            t0=time.perf_counter(); s.run(None,{name:x}); d=time.perf_counter()-t0
            with lock: times.append(d)
    ws=[threading.Thread(target=worker,args=(s,)) for s in sessions]
    [w.start() for w in ws]
    t=time.time()
    while t<stop:
        t+=random.expovariate(rate); time.sleep(max(0,t-time.time())); q.put(1)
    for _ in ws: q.put(None)
    [w.join() for w in ws]
    return statistics.mean(times)*1e3
random.seed(1)
res={'A':[],'B':[]}
for r in range(int(sys.argv[1]) if len(sys.argv)>1 else 3):
    for v in ('A','B') if r%2==0 else ('B','A'):
        a,b=sess(1),sess(1)
        if v=='B':
            s2=sess(2); serve([s2],60,15)
        else:
            time.sleep(15)
        ms=serve([a,b],160,25); res[v].append(ms); print(r,v,round(ms,3),flush=True)
        del a,b
        if v=='B': del s2
print({k:(round(statistics.median(v),3),[round(x,2) for x in v]) for k,v in res.items()})
