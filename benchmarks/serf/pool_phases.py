#!/usr/bin/env python3
"""Pools the runs of several `weir bench serf --phases` tables that served the same load.

Each table (`--phases-table`) holds, per run, every set-up's mean latency per phase and over the
run. This reads those rows from every file given and reports, per scope (phase 1, 2, 3, whole run),
what the bench's own summary reports for one batch: the median of the per-run ratios SERF / best
fixed set-up of that run, and the ratio over all runs (SERF's mean over the runs against the fixed
set-up whose mean over the runs is lowest, among those that failed no request) with a 95 % interval
from resampling the runs.

Two differences from the bench: the bench weights each run by its answered requests, this weights
the runs' means equally (the tables do not hold the counts; runs of one load differ in requests by
the Poisson count's ≈ 1 %, so the two agree to the third digit); and for an even number of runs the
median here is the mean of the middle two, where the bench takes the upper one.

Pool only batches that served the same rates (the table's header and `run N — phases:` lines say
which); the script refuses files whose phase rates differ.

Usage: benchmarks/serf/pool_phases.py benchmarks/serf/phases_idle2.md benchmarks/serf/phases_pool.md
"""

import random
import re
import statistics
import sys

SCOPES = ["1 moderate", "2 low", "3 moderate", "whole run"]
DRAWS = 2000


def read_runs(path):
    """[(rates, {set-up: ([means per scope], failed)})] for every run of one table file."""
    runs = []
    current = None
    rates = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            head = re.match(r"### run \d+ — phases: (.*)", line)
            if head:
                rates = head.group(1).strip()
                current = {}
                runs.append((rates, current))
                continue
            if line.startswith("### "):
                current = None
                continue
            if current is None:
                continue
            row = re.match(r"\| (SERF auto|fixed c=\d+ t=\d+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| (\d+) \|", line)
            if row:
                means = [float(row.group(k)) for k in range(2, 6)]
                current[row.group(1)] = (means, int(row.group(6)))
    return runs


def pooled(runs, scope):
    """SERF's mean over `runs` / the lowest mean of a fixed set-up that never failed, and which."""
    def mean_of(setup):
        values = [r[setup][0][scope] for r in runs if setup in r]
        return statistics.fmean(values) if values else None

    fixed = sorted({s for r in runs for s in r if s.startswith("fixed")})
    candidates = []
    for s in fixed:
        if any(r[s][1] > 0 for r in runs if s in r):
            continue
        m = mean_of(s)
        if m is not None:
            candidates.append((m, s))
    serf = mean_of("SERF auto")
    if not candidates or serf is None:
        return None
    best, which = min(candidates)
    return serf / best, which


def per_run_median(runs, scope):
    ratios = []
    for r in runs:
        fixed = [v[0][scope] for s, v in r.items() if s.startswith("fixed") and v[1] == 0]
        if fixed and "SERF auto" in r:
            ratios.append(r["SERF auto"][0][scope] / min(fixed))
    return statistics.median(ratios) if ratios else None


def main(paths):
    runs, rates = [], set()
    for p in paths:
        for rate, table in read_runs(p):
            rates.add(rate)
            runs.append(table)
    if len(rates) > 1:
        sys.exit(f"the files served different loads, not poolable: {sorted(rates)}")
    print(f"{len(runs)} runs from {', '.join(paths)}; phases: {rates.pop() if rates else '?'}\n")
    print("| scope | per-run median | over all runs (best fixed on average) | 95 % interval |")
    print("|---|---|---|---|")
    rng = random.Random(11)
    for k, name in enumerate(SCOPES):
        whole = pooled(runs, k)
        draws = []
        for _ in range(DRAWS):
            pick = [runs[rng.randrange(len(runs))] for _ in runs]
            r = pooled(pick, k)
            if r is not None:
                draws.append(r[0])
        draws.sort()
        interval = (
            f"{draws[round((len(draws) - 1) * 0.025)]:.3f}–{draws[round((len(draws) - 1) * 0.975)]:.3f}"
            if len(runs) > 1 and draws
            else "–"
        )
        med = per_run_median(runs, k)
        print(
            f"| {name} | {med:.3f} | "
            + (f"{whole[0]:.3f} ({whole[1]})" if whole else "–")
            + f" | {interval} |"
        )


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
