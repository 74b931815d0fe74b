#!/usr/bin/env python3
"""Prediction error of `weir bench serf` tables, binned by how far the call time drifted.

Usage: error_by_service_drift.py TABLE.md [TABLE.md ...]

Every point row records the mean service time the model expected from the profile and the mean
ONNX Runtime call time measured while the point ran ("service ms predicted / measured"). Their
ratio is how far the machine's speed moved between the profile and that point. This pools the
points of all tables given, per model, into bins of |measured / predicted − 1| (< 5 %, 5–10 %,
10–20 %, ≥ 20 %) and prints, per bin, the mean |error| end to end, at the node (queue + call) and
in situ (the model given the measured call time). If the queueing model is right and the profile's
service level is what misses, the error should fall with the drift and the in-situ error should
not depend on it.

A second table takes the points whose call time held within 5 % of the profile and splits their
latency per configuration into the node's share and the path outside it (weir's ingress and
egress plus the in-process load generator's lateness, `sender late µs`), signed: what is left of
the error where the machine kept its speed.
"""
import statistics
import sys

from serf_tables import pair, percent, point_rows

BINS = [(0.05, "< 5 %"), (0.10, "5–10 %"), (0.20, "10–20 %"), (float("inf"), "≥ 20 %")]
SERVICE = "service ms predicted / measured"
AT_NODE = "at the node ms predicted / measured, error"
OUTSIDE = "outside the node ms predicted / measured"


def drift(row):
    """|measured call time / predicted service − 1| of one point."""
    predicted, measured = pair(row[SERVICE])
    return abs(measured / predicted - 1.0)


def bin_label(value):
    return next(label for bound, label in BINS if value < bound)


def mean_abs(values):
    values = [abs(v) for v in values if v is not None]
    return f"{statistics.mean(values):.1f} %" if values else "–"


def main(paths):
    if not paths:
        sys.exit(__doc__)
    rows = [row for path in paths for row in point_rows(path)]
    models = sorted({row["model"] for row in rows})
    print(f"{len(rows)} points from {len(paths)} tables\n")
    print("| model | call time drift | points | mean \\|error\\| | at the node | in situ |")
    print("|---|---|---|---|---|---|")
    for model in models:
        for _, label in BINS:
            points = [r for r in rows if r["model"] == model and bin_label(drift(r)) == label]
            if not points:
                continue
            print(
                f"| {model} | {label} | {len(points)} | {mean_abs(percent(r['error']) for r in points)}"
                f" | {mean_abs(percent(r[AT_NODE]) for r in points)}"
                f" | {mean_abs(percent(r['in-situ error']) for r in points)} |"
            )
    print("\nPoints whose call time held within 5 % of the profile, per configuration (means):\n")
    print("| model | config | points | error (signed) | at the node ms predicted / measured, error "
          "| outside the node ms predicted / measured | of which sender late ms |")
    print("|---|---|---|---|---|---|---|")
    held = [r for r in rows if drift(r) < BINS[0][0]]
    for key in sorted({(r["model"], r["config"]) for r in held}):
        points = [r for r in held if (r["model"], r["config"]) == key]
        node = [pair(r[AT_NODE]) for r in points]
        outside = [pair(r[OUTSIDE]) for r in points]
        print(
            f"| {key[0]} | {key[1]} | {len(points)}"
            f" | {statistics.mean(percent(r['error']) for r in points):+.1f} %"
            f" | {statistics.mean(p for p, _ in node):.3f} / {statistics.mean(m for _, m in node):.3f},"
            f" {statistics.mean(percent(r[AT_NODE]) for r in points):+.1f} %"
            f" | {statistics.mean(p for p, _ in outside):.3f} / {statistics.mean(m for _, m in outside):.3f}"
            f" | {statistics.mean(float(r['sender late µs']) for r in points) / 1000:.3f} |"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
