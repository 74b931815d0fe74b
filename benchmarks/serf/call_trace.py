#!/usr/bin/env python3
"""How long a configuration's calls stay slow after SERF switches to it, from call traces.

Reads the CSV files `weir bench serf --phases --calls-csv DIR` writes (`run<R>-<set-up>.csv`,
one line per call of the model node: when it began, how long after the set-up's start or SERF's
last switch, its duration, its thread's idle time before it, the configuration it ran in). For
each configuration SERF ran in a phase, SERF's calls are binned by the time since the switch into
it and each bin's mean is divided by the mean call of the fixed set-up of that configuration in
the same phase of the same run (its settled state: calls from 10 s into the phase on). A ratio
near 1 from some bin on says the switch's transient ends there; a ratio above 1 at every age
says the configuration serves slower inside SERF than alone. The fixed set-up's own calls are
binned by the time since the phase began, to show its start-up, if any.

Usage: benchmarks/serf/call_trace.py DIR [PHASE_SECONDS]  (default 60, the bench's default)
"""

import collections
import csv
import glob
import os
import re
import statistics
import sys

AGE_BINS = [0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 10.0, 30.0, float("inf")]
PHASES = ["1 moderate", "2 low", "3 moderate"]
SETTLED_FROM = 10.0


def read_trace(path):
    """[(began_s, since_switch_s, ms, idle_before_ms or None, (c, t))] in file order."""
    with open(path, newline="") as f:
        return [
            (
                float(row["began_s"]),
                float(row["since_switch_s"]),
                float(row["ms"]),
                float(row["idle_before_ms"]) if row["idle_before_ms"] else None,
                (int(row["concurrency"]), int(row["threads"])),
            )
            for row in csv.DictReader(f)
        ]


def runs(folder):
    """{run: {set-up: trace}} for every `run<R>-<set-up>.csv` in `folder`."""
    out = collections.defaultdict(dict)
    for path in glob.glob(os.path.join(folder, "run*-*.csv")):
        m = re.match(r"run(\d+)-(.+)\.csv$", os.path.basename(path))
        if m:
            out[int(m.group(1))][m.group(2)] = read_trace(path)
    return dict(sorted(out.items()))


def age_bin(age):
    for lo, hi in zip(AGE_BINS, AGE_BINS[1:]):
        if lo <= age < hi:
            return lo, hi
    return AGE_BINS[-2], AGE_BINS[-1]


def label(lo, hi):
    return f"{lo:g}–{hi:g} s" if hi != float("inf") else f"≥ {lo:g} s"


def fixed_settled(trace, phase, phase_seconds):
    """Mean ms of a fixed set-up's calls from SETTLED_FROM s into `phase` to its end."""
    start = phase * phase_seconds
    ms = [c[2] for c in trace if start + SETTLED_FROM <= c[0] < start + phase_seconds]
    return statistics.fmean(ms) if ms else None


def serf_against_fixed(all_runs, phase_seconds, serf_name):
    """{(config, phase, bin): [per-run ratio of SERF's mean call in the bin to fixed's settled]},
    and the calls behind each."""
    ratios = collections.defaultdict(list)
    counts = collections.Counter()
    for setups in all_runs.values():
        serf = setups.get(serf_name)
        if not serf:
            continue
        by_bin = collections.defaultdict(list)
        for began, since, ms, _, config in serf:
            phase = min(int(began // phase_seconds), len(PHASES) - 1)
            by_bin[(config, phase, age_bin(since))].append(ms)
        references = {}
        for (config, phase, bins), ms in by_bin.items():
            if (config, phase) not in references:
                fixed = setups.get(f"fixed-{config[0]}x{config[1]}")
                references[(config, phase)] = fixed and fixed_settled(fixed, phase, phase_seconds)
            reference = references[(config, phase)]
            if reference:
                ratios[(config, phase, bins)].append(statistics.fmean(ms) / reference)
                counts[(config, phase, bins)] += len(ms)
    return ratios, counts


def fixed_start_up(all_runs, phase_seconds):
    """{(config, phase, bin): [per-run ratio of the fixed set-up's mean call in the bin (time
    since the phase began) to its settled mean]}."""
    ratios = collections.defaultdict(list)
    for setups in all_runs.values():
        for name, trace in setups.items():
            if not name.startswith("fixed-"):
                continue
            for phase in range(len(PHASES)):
                reference = fixed_settled(trace, phase, phase_seconds)
                if not reference:
                    continue
                start = phase * phase_seconds
                by_bin = collections.defaultdict(list)
                for began, _, ms, _, config in trace:
                    if start <= began < start + phase_seconds:
                        by_bin[age_bin(began - start)].append(ms)
                for bins, ms in by_bin.items():
                    ratios[(trace[0][4], phase, bins)].append(statistics.fmean(ms) / reference)
    return ratios


def print_table(title, ratios, counts=None):
    print(f"\n{title}\n")
    print("| configuration | phase | age | runs | calls | median ratio | range |")
    print("|---|---|---|---|---|---|---|")
    for key in sorted(ratios):
        config, phase, (lo, hi) = key
        values = ratios[key]
        calls = str(counts[key]) if counts else ""
        print(
            f"| ({config[0]}, {config[1]}) | {PHASES[phase]} | {label(lo, hi)} | {len(values)} "
            f"| {calls} | {statistics.median(values):.3f} | {min(values):.3f}–{max(values):.3f} |"
        )


def main(folder, phase_seconds):
    all_runs = runs(folder)
    if not all_runs:
        sys.exit(f"no run<R>-<set-up>.csv files in {folder}")
    serf_names = sorted({n for s in all_runs.values() for n in s if n.startswith("serf")})
    print(f"{len(all_runs)} run(s) in {folder}; phases of {phase_seconds:g} s")
    for name in serf_names:
        ratios, counts = serf_against_fixed(all_runs, phase_seconds, name)
        print_table(
            f"{name}: mean call by time since the switch into its configuration, over the fixed "
            f"set-up's settled mean call (≥ {SETTLED_FROM:g} s into the phase)",
            ratios,
            counts,
        )
    print_table(
        "fixed set-ups: mean call by time since the phase began, over their own settled mean",
        fixed_start_up(all_runs, phase_seconds),
    )


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 60.0)
