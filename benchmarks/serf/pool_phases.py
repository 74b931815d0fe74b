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

A second table compares ONNX Runtime call times, not latencies: for each phase in which
SERF ran one configuration throughout (after the first 2 s of the phase, any stint elsewhere at
most 1.5 s long), SERF's mean call over the fixed set-up of that configuration's in the same run
(the tables' *Per phase, ms per ORT call*). A ratio above 1 there is a cost of SERF's own (or
drift between set-ups served minutes apart), not a decision. Its last row divides, run by run,
SERF's phase-3 over phase-1 call by the fixed set-up's: a cost that only follows a switch back
shows there, with each set-up's own level in its run taken out.

Then, when the runs differ in it, the first table again for two groups: the runs in which every
fixed set-up held at moderate load, and those in which one collapsed (a moderate-phase mean more
than 1.5× the best fixed set-up's: on a host where the all-core `(1, 2)` is bistable at the moderate
load, whether it holds is the host's doing, not SERF's). SERF's case differs between them: where a fixed set-up
collapses, avoiding it is a gain; where all hold, SERF can at best tie the best one.

Usage: pool_phases.py TABLE.md [TABLE.md ...]  (the files behind the pooled figure: benchmarks/serf/README.md)
"""

import random
import re
import statistics
import sys
from dataclasses import dataclass

SCOPES = ["1 moderate", "2 low", "3 moderate", "whole run"]
DRAWS = 2000
PHASE_CALLS = re.compile(
    r"\| (SERF auto|fixed c=\d+ t=\d+) \| ([\d.]+) / \d+ % \| ([\d.]+) / \d+ % \| ([\d.]+) / \d+ % \|"
)
# (phase index in the per-phase call table, start s, end s) of the three phases.
PHASES = [(0, 0.0, 60.0), (1, 60.0, 120.0), (2, 120.0, 180.0)]
MODERATE_PHASES = [PHASES[0], PHASES[2]]
# SERF's online table: a tuple's row, with its measured ms per load band in the last cell.
TUPLE_ROW = re.compile(r"\| (\d+ × \d+) \| \d+ \| [\d.]+ \| [\d.]+ \| (.*) \|")
SETTLE_S = 2.0
COLLAPSE_FACTOR = 1.5
STINT_S = 1.5


@dataclass
class RunDetail:
    """What one run's table says besides the means: per-phase call times and SERF's switches."""

    calls: dict  # set-up -> [mean ORT call ms in phase 1, 2, 3]
    timeline: list  # [(time s, "fixed c=C t=T")], SERF's configuration from that time on
    bands: dict  # SERF's tuple "R × T" -> {load band "lo–hi": (measured ms, samples)}


def held_throughout(timeline, start, end):
    """The set-up name of the configuration SERF ran through [start + SETTLE_S, end) with no
    stint elsewhere longer than STINT_S, or None."""
    def config_at(t):
        now = None
        for when, cfg in timeline:
            if when <= t:
                now = cfg
        return now

    held = config_at(start + SETTLE_S)
    if held is None:
        return None
    edges = [start + SETTLE_S] + [t for t, _ in timeline if start + SETTLE_S < t < end] + [end]
    for a, b in zip(edges, edges[1:]):
        if config_at(a) != held and b - a > STINT_S:
            return None
    return held


def held_in_phases(detail, phases):
    """[(phase index, set-up name SERF held throughout or None)] for `phases`."""
    return [(phase, held_throughout(detail.timeline, start, end)) for phase, start, end in phases]


def switch_back_ratios(details):
    """[(SERF's phase-3 call / its phase-1 call) / (the fixed set-up's same ratio)] for the runs in
    which SERF ran one configuration throughout both moderate phases: whether phase 3, after the
    low phase in another configuration, costs SERF more than it costs the fixed set-up in the same
    run (a switch-back cost), with each set-up's own level between the two taken out."""
    ratios = []
    for d in details:
        serf = d.calls.get("SERF auto")
        (_, first), (_, third) = held_in_phases(d, MODERATE_PHASES)
        if serf and first == third and first in d.calls:
            fixed = d.calls[first]
            ratios.append((serf[2] / serf[0]) / (fixed[2] / fixed[0]))
    return ratios


def call_time_pairs(details):
    """{phase index: [SERF's call / the same configuration's fixed call]} over the runs."""
    pairs = {}
    for d in details:
        serf = d.calls.get("SERF auto")
        for phase, held in held_in_phases(d, PHASES):
            if serf and held in d.calls:
                pairs.setdefault(phase, []).append(serf[phase] / d.calls[held][phase])
    return pairs


def read_runs(path):
    """[(rates, {set-up: ([means per scope], failed)}, RunDetail)] for every run of one table file."""
    runs = []
    current = None
    rates = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            head = re.match(r"### run \d+ — phases: (.*)", line)
            if head:
                rates = head.group(1).strip()
                current = {}
                detail = RunDetail(calls={}, timeline=[], bands={})
                runs.append((rates, current, detail))
                continue
            if line.startswith("### "):
                current = None
                continue
            if current is None:
                continue
            calls = PHASE_CALLS.match(line)
            if calls:
                detail.calls[calls.group(1)] = [float(calls.group(k)) for k in (2, 3, 4)]
                continue
            switches = re.match(r"SERF's configurations: (.*)", line)
            if switches:
                detail.timeline.extend(
                    (float(t), f"fixed {cfg}")
                    for cfg, t in re.findall(r"(c=\d+ t=\d+) at ([\d.]+) s", switches.group(1))
                )
                continue
            tuple_row = TUPLE_ROW.match(line)
            if tuple_row:
                detail.bands[tuple_row.group(1)] = {
                    band: (float(ms), int(n))
                    for band, ms, n in re.findall(r"([\d–]+): ([\d.]+), (\d+)", tuple_row.group(2))
                }
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


def collapsed(run):
    """Whether some fixed set-up collapsed in `run`: a moderate-phase mean more than
    COLLAPSE_FACTOR times the best fixed set-up's in that phase (a queue that outgrew its load)."""
    for phase, _, _ in MODERATE_PHASES:
        means = [v[0][phase] for s, v in run.items() if s.startswith("fixed")]
        if means and max(means) > COLLAPSE_FACTOR * min(means):
            return True
    return False


def print_pooled(runs, rng):
    """The pooled table (per-run median, ratio over all runs, 95 % interval) for `runs`."""
    print("| scope | per-run median | over all runs (best fixed on average) | 95 % interval |")
    print("|---|---|---|---|")
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


def main(paths):
    runs, details, rates = [], [], set()
    for p in paths:
        for rate, table, detail in read_runs(p):
            rates.add(rate)
            runs.append(table)
            details.append(detail)
    if len(rates) > 1:
        sys.exit(f"the files served different loads, not poolable: {sorted(rates)}")
    print(f"{len(runs)} runs from {', '.join(paths)}; phases: {rates.pop() if rates else '?'}\n")
    rng = random.Random(11)
    print_pooled(runs, rng)
    pairs = call_time_pairs(details)
    print("\nSERF's ORT call over the fixed set-up of the configuration it ran throughout the phase:\n")
    print("| phase | pairs | mean | range |")
    print("|---|---|---|---|")
    for phase, values in sorted(pairs.items()):
        print(
            f"| {SCOPES[phase]} | {len(values)} | {statistics.fmean(values):.3f}"
            f" | {min(values):.3f}–{max(values):.3f} |"
        )
    back = switch_back_ratios(details)
    if back:
        print(
            f"| phase 3 / phase 1, SERF over fixed (runs with one configuration in both) | {len(back)}"
            f" | {statistics.fmean(back):.3f} | {min(back):.3f}–{max(back):.3f} |"
        )
    held, fell = [], []
    for r in runs:
        (fell if collapsed(r) else held).append(r)
    for label, group in (("every fixed set-up held", held), ("a fixed set-up collapsed", fell)):
        if group and len(group) < len(runs):
            print(
                f"\nThe {len(group)} runs in which {label} at moderate load (a moderate-phase mean"
                f" above {COLLAPSE_FACTOR}× the best fixed set-up's is a collapse):\n"
            )
            print_pooled(group, rng)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
