#!/usr/bin/env python3
"""How SERF read `(1, 2)`'s calls at moderate load, against the fixed `(1, 2)` of the same run.

For every run of `weir bench serf --phases` tables, SERF's measured service time of the tuple
`1 × 2` (one request running, two threads) in the load band holding the moderate rate (the online
table's "measured ms by load", band 136–169 requests/s for 144.2/s) is divided by the fixed
`(1, 2)` set-up's mean ORT call over the two moderate phases of the same run (the table's *Per
phase, ms per ORT call*). Reads of fewer than STINT_SAMPLES calls come from trials of a second or
a few (explorations, a short `Better` stint); more come from stints of tens of seconds. A trial
that reads `(1, 2)` slower than it serves keeps SERF out of it at that load.

Usage: benchmarks/serf/exploration_reads.py TABLE.md [TABLE.md ...]
"""

import statistics
import sys

from pool_phases import read_runs

BAND = "136–169"
STINT_SAMPLES = 1000


def reads(path):
    """[(run, SERF's 1 × 2 ms in the band, its samples, fixed (1, 2)'s moderate call ms)], read
    with `pool_phases.read_runs`."""
    out = []
    for run, (_, _, detail) in enumerate(read_runs(path), start=1):
        fixed = detail.calls.get("fixed c=1 t=2")
        serf = detail.bands.get("1 × 2", {}).get(BAND)
        if fixed and serf:
            out.append((run, *serf, (fixed[0] + fixed[2]) / 2))
    return out


def main(paths):
    trials, stints = [], []
    print(f"| table | run | SERF's 1 × 2 at {BAND}/s, ms (calls) | fixed (1, 2), ms | ratio |")
    print("|---|---|---|---|---|")
    for path in paths:
        for run, ms, n, fixed in reads(path):
            ratio = ms / fixed
            (stints if n >= STINT_SAMPLES else trials).append(ratio)
            print(f"| {path.split('/')[-1]} | {run} | {ms:.3f} ({n}) | {fixed:.3f} | {ratio:.3f} |")
    for name, values in (("trials", trials), ("stints", stints)):
        if values:
            print(f"\n{name} (< or ≥ {STINT_SAMPLES} calls): {len(values)}, median ratio "
                  f"{statistics.median(values):.3f}, range {min(values):.3f}–{max(values):.3f}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
