#!/usr/bin/env python3
"""Where in a phase SERF's calls cost more than a fixed set-up's, from `weir bench serf --phases
--calls-csv DIR` traces.

Each directory holds, per run, one CSV per set-up (`runN-serf.csv`, `runN-fixed-1x2.csv`, ...;
columns `began_s,since_switch_s,ms,idle_before_ms,concurrency,threads`). For every run found in
the directories given, this divides SERF's mean ONNX Runtime call over a window of the run by the
fixed set-up's mean call over the same window, then reports per window the median, range and mean
of those ratios over all runs.

Calls, not latencies: the traces hold the call times only. A window where SERF ran another
configuration than the fixed one (an exploration, the lag before a switch) or paid a switch's
transient shows a ratio above 1; a window where both ran the same configuration throughout shows
the two graphs' own levels (random per graph on the 2-vCPU VM, `pool_phases.py`'s second table).

Usage: phase_windows.py [--fixed 1x2] [--windows 60-70,70-120] DIR [DIR ...]
(default windows: the first ten seconds of the low phase and the rest of it, of the 60 s phases
the bench runs by default).
"""

import argparse
import csv
import glob
import os
import statistics


def read_calls(path):
    """The trace's calls as `(began_s, ms)` pairs."""
    with open(path, newline="") as f:
        return [(float(r["began_s"]), float(r["ms"])) for r in csv.DictReader(f)]


def mean_call(calls, lo, hi):
    """Mean call time (ms) of the calls that began in `[lo, hi)` seconds, or None if none did."""
    inside = [ms for began, ms in calls if lo <= began < hi]
    return statistics.mean(inside) if inside else None


def trace_runs(dirs, fixed):
    """Per run found in `dirs`: `(dir, run, serf_trace, fixed_trace)`, `fixed_trace` None when the run
    has no trace of fixed set-up `fixed` (CxT)."""
    for d in dirs:
        for serf in sorted(glob.glob(os.path.join(d, "run*-serf.csv"))):
            run = os.path.basename(serf).split("-")[0]
            other = os.path.join(d, f"{run}-fixed-{fixed}.csv")
            yield d, run, serf, other if os.path.exists(other) else None


def parse_windows(text):
    windows = []
    for part in text.split(","):
        lo, hi = part.split("-")
        windows.append((float(lo), float(hi)))
    return windows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixed", default="1x2", help="the fixed set-up to compare with (CxT)")
    parser.add_argument("--windows", default="60-70,70-120", help="windows in seconds, LO-HI,...")
    parser.add_argument("dirs", nargs="+")
    args = parser.parse_args()
    windows = parse_windows(args.windows)
    ratios = {w: [] for w in windows}
    runs = 0
    for _, _, serf, fixed in trace_runs(args.dirs, args.fixed):
        if fixed is None:
            continue
        runs += 1
        serf_calls, fixed_calls = read_calls(serf), read_calls(fixed)
        for lo, hi in windows:
            s, x = mean_call(serf_calls, lo, hi), mean_call(fixed_calls, lo, hi)
            if s is not None and x:
                ratios[(lo, hi)].append(s / x)
    if runs == 0:
        raise SystemExit(f"no run with both a SERF and a fixed {args.fixed} trace in {args.dirs}")
    print(f"{runs} runs; SERF's mean call over fixed {args.fixed}'s, per window")
    print()
    print("| window s | runs | median | range | mean |")
    print("|---|---|---|---|---|")
    for (lo, hi), rs in ratios.items():
        if rs:
            print(
                f"| {lo:g}–{hi:g} | {len(rs)} | {statistics.median(rs):.3f} | "
                f"{min(rs):.3f}–{max(rs):.3f} | {statistics.mean(rs):.3f} |"
            )


if __name__ == "__main__":
    main()
