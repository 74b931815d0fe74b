#!/usr/bin/env python3
"""Per-configuration error at the model node in `weir bench serf` tables.

Usage: node_error_by_config.py TABLE.md [TABLE.md ...]

For each table (one run of `benchmarks/serf/run_ort.sh`) and each configuration, prints the mean
signed error and the mean |error| of the column "at the node ms predicted / measured, error" over
the configuration's points: whether the model misses one configuration in one direction (as the
MLP's (2, 1) did before idle starts counted on every slot) or all of them alike (machine drift).
"""
import statistics
import sys

from serf_tables import percent, point_rows

AT_NODE = "at the node ms predicted / measured, error"


def node_errors(path):
    """{(model, config): [signed node error in %]} for the point rows of one table."""
    errors = {}
    for row in point_rows(path):
        error = percent(row[AT_NODE])
        if error is not None:
            errors.setdefault((row["model"], row["config"]), []).append(error)
    return errors


def main(paths):
    if not paths:
        sys.exit(__doc__)
    for path in paths:
        for (model, config), values in sorted(node_errors(path).items()):
            print(
                f"{path}\t{model}\t{config}\tpoints {len(values)}"
                f"\tmean {statistics.mean(values):+.1f} %"
                f"\tmean |error| {statistics.mean(abs(v) for v in values):.1f} %"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
