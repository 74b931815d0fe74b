"""ONNX Runtime alone: is a configuration slower in the first moments after a switch into it?

SERF judges a configuration it has just explored on the calls of its first one to three seconds.
Here one process holds what a switchable executor holds for shufflenet on 2 cores (two 1-thread
sessions, one 2-thread session, all warmed), serves Poisson arrivals at RATE requests/s from one
shared queue, and toggles between `(2, 1)` (two threads, a 1-thread session each) and `(1, 2)`
(one thread on the 2-thread session) every SECONDS seconds. Each call's duration is binned by the
time since the switch into its configuration; the last bin (from 2 s on) is the settled speed.

Usage, from the repository root (nothing else running):
    .weir/venv/bin/python benchmarks/serf/ort_switch_transient.py [RATE] [SECONDS] [SWITCHES]
(defaults 144 requests/s, 6 s, 20 switches).
"""
import queue
import random
import statistics
import sys
import threading
import time

import numpy as np
import onnxruntime as ort

MODEL = '.weir/zoo/shufflenet.onnx'
RATE = float(sys.argv[1]) if len(sys.argv) > 1 else 144.0
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 6.0
SWITCHES = int(sys.argv[3]) if len(sys.argv) > 3 else 20
BINS = [0.0, 0.1, 0.25, 0.5, 1.0, 2.0]


def session(threads):
    o = ort.SessionOptions()
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    o.add_session_config_entry('session.intra_op.allow_spinning', '1')
    return ort.InferenceSession(MODEL, o, providers=['CPUExecutionProvider'])


def feed(s):
    i = s.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in i.shape]
    return {i.name: np.random.rand(*shape).astype(np.float32)}


one_a, one_b, two = session(1), session(1), session(2)
feeds = {id(s): feed(s) for s in (one_a, one_b, two)}
for s in (one_a, one_b, two):
    for _ in range(20):
        s.run(None, feeds[id(s)])

jobs = queue.Queue()
state = {'mode': '21', 'since': time.perf_counter(), 'period': 0}
active = threading.Condition()
calls = []  # (mode, period, seconds since the switch into it at the call's start, duration s)
lock = threading.Lock()
done = threading.Event()


def worker(index):
    while not done.is_set():
        with active:
            while index == 1 and state['mode'] == '12' and not done.is_set():
                active.wait(0.1)
        try:
            jobs.get(timeout=0.05)
        except queue.Empty:
            continue
        mode, since, period = state['mode'], state['since'], state['period']
        s = (one_a if index == 0 else one_b) if mode == '21' else two
        start = time.perf_counter()
        s.run(None, feeds[id(s)])
        end = time.perf_counter()
        with lock:
            calls.append((mode, period, start - since, end - start))


workers = [threading.Thread(target=worker, args=(i,)) for i in (0, 1)]
for w in workers:
    w.start()

random.seed(7)
begin = time.perf_counter()
total = SECONDS * (SWITCHES + 1)
next_switch = begin + SECONDS
t = begin
while t < begin + total:
    t += random.expovariate(RATE)
    now = time.perf_counter()
    if t > now:
        time.sleep(t - now)
    if time.perf_counter() >= next_switch:
        with active:
            state['mode'] = '12' if state['mode'] == '21' else '21'
            state['since'] = time.perf_counter()
            state['period'] += 1
            active.notify_all()
        next_switch += SECONDS
    jobs.put(1)
done.set()
for w in workers:
    w.join()

print(f'shufflenet, {RATE:.0f} requests/s, switching every {SECONDS:.0f} s, {SWITCHES} switches')
print('| configuration | ' + ' | '.join(
    f'{lo:g}–{hi:g} s' for lo, hi in zip(BINS, BINS[1:])) + f' | from {BINS[-1]:g} s | first s / settled |')
print('|---' * (len(BINS) + 2) + '|')
for mode, name in (('12', '(1, 2)'), ('21', '(2, 1)')):
    # The first period follows no switch: left out.
    mine = [(a, d) for m, p, a, d in calls if m == mode and p > 0]
    cells = []
    means = []
    for lo, hi in list(zip(BINS, BINS[1:])) + [(BINS[-1], SECONDS)]:
        ds = [d * 1e3 for a, d in mine if lo <= a < hi]
        means.append(statistics.mean(ds) if ds else float('nan'))
        cells.append(f'{means[-1]:.3f} ms ({len(ds)})' if ds else '—')
    first = [d * 1e3 for a, d in mine if a < 1.0]
    ratio = statistics.mean(first) / means[-1] if first else float('nan')
    print(f'| {name} | ' + ' | '.join(cells) + f' | {ratio:.3f} |')
