"""A noisy neighbour for the phases bench: busy-loops for BUSY_MS, then sleeps an exponential gap with
mean IDLE_MS, until killed (3 and 12: about a fifth of one core, in bursts).

Usage: .weir/venv/bin/python benchmarks/serf/noisy_neighbour.py BUSY_MS IDLE_MS &
(benchmarks/SERF.md, *Why SERF runs what it runs*, the neighbour batch)."""
import sys, time, random
busy, idle = float(sys.argv[1]) / 1e3, float(sys.argv[2]) / 1e3
rng = random.Random(7)
while True:
    end = time.perf_counter() + busy
    while time.perf_counter() < end:
        pass
    time.sleep(rng.expovariate(1 / idle))
