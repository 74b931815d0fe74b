#!/usr/bin/env python3
"""How often the 2-thread calls of SERF and of fixed `(1, 2)` were in the VM's slow state, per
phase, from `weir bench serf --phases --calls-csv DIR` traces.

On the 2-vCPU VM a 2-thread ONNX Runtime call takes about 3 ms or about 6 ms for tens of seconds
at a time (`ort_thread_states.py`; `weir_operators::model::pinning`). SERF runs `(1, 2)` only in
stints, and judges it by what those stints measure, so whether its stints meet the slow state more
often than fixed `(1, 2)` meets it in the same phase is the question this answers: more often would
point at something in SERF's own graph (its idle 1-thread sessions, the switches), the same would
leave it to the host.

Per run, each set-up's 2-thread calls are binned per second of the run (when they began; seconds
with fewer than 5 such calls are left out, and so is the first quarter second after each of SERF's
switches, which the scheduler leaves out as settling). A second is *slow* when its mean call is
above 1.5 × the run's fast level, the 10th percentile of every 2-thread call of the run in both
set-ups (≈ 3 ms, so the line sits halfway between the two states). The table gives, per run and
phase, SERF's 2-thread seconds and the share of them slow, and fixed `(1, 2)`'s share of slow
seconds in the same phase (– where the run has no fixed `(1, 2)` trace: the bench skips it when
the planning profile puts it beyond its capacity); the last rows pool the seconds of all runs.

Usage: two_thread_states.py [--phases 0-60,60-120,120-180] DIR [DIR ...]
"""

import argparse
import csv
import os
import statistics

from phase_windows import parse_windows, trace_runs

MIN_CALLS = 5
SETTLE_S = 0.25
SLOW_OVER_FAST = 1.5


def two_thread_calls(path, skip_settling):
    """`(began_s, ms)` of the trace's 2-thread calls (optionally without those settling)."""
    with open(path, newline="") as f:
        return [
            (float(r["began_s"]), float(r["ms"]))
            for r in csv.DictReader(f)
            if r["threads"] == "2"
            and not (skip_settling and float(r["since_switch_s"]) < SETTLE_S)
        ]


def seconds(calls, lo, hi):
    """Mean call per whole second of `[lo, hi)` with at least MIN_CALLS calls."""
    by_second = {}
    for began, ms in calls:
        if lo <= began < hi:
            by_second.setdefault(int(began), []).append(ms)
    return [statistics.mean(v) for v in by_second.values() if len(v) >= MIN_CALLS]


def share(slow, total):
    return f"{slow / total:.0%}" if total else "–"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--phases", default="0-60,60-120,120-180")
    parser.add_argument("dirs", nargs="+")
    args = parser.parse_args()
    phases = parse_windows(args.phases)
    pooled = {p: [0, 0, 0, 0] for p in phases}
    print("| run | phase s | SERF 2-thread seconds | SERF slow | fixed (1, 2) slow |")
    print("|---|---|---|---|---|")
    for d, run, serf_path, fixed_path in trace_runs(args.dirs, "1x2"):
        serf = two_thread_calls(serf_path, skip_settling=True)
        fixed = two_thread_calls(fixed_path, skip_settling=False) if fixed_path else []
        every = sorted(ms for _, ms in serf + fixed)
        if len(every) < 10:
            continue
        line = SLOW_OVER_FAST * every[len(every) // 10]
        for lo, hi in phases:
            s, x = seconds(serf, lo, hi), seconds(fixed, lo, hi)
            s_slow = sum(m > line for m in s)
            x_slow = sum(m > line for m in x)
            acc = pooled[(lo, hi)]
            acc[0] += s_slow
            acc[1] += len(s)
            acc[2] += x_slow
            acc[3] += len(x)
            print(
                f"| {os.path.basename(d)}/{run} | {lo:g}–{hi:g} | {len(s)} | "
                f"{share(s_slow, len(s))} | {share(x_slow, len(x))} |"
            )
    for (lo, hi), (s_slow, s_all, x_slow, x_all) in pooled.items():
        print(
            f"| **all** | {lo:g}–{hi:g} | {s_all} | **{share(s_slow, s_all)}** | "
            f"**{share(x_slow, x_all)}** |"
        )


if __name__ == "__main__":
    main()
