#!/usr/bin/env python3
"""Per-configuration error at the model node in `weir bench serf` tables.

Usage: node_error_by_config.py TABLE.md [TABLE.md ...]

For each table (one run of `benchmarks/serf/run_ort.sh`) and each configuration, prints the mean
signed error and the mean |error| of the column "at the node ms predicted / measured, error" over
the configuration's points: whether the model misses one configuration in one direction (as the
MLP's (2, 1) did before idle starts counted on every slot) or all of them alike (machine drift).
"""
import re
import statistics
import sys

NODE_ERROR = re.compile(r", ([+-]?[0-9.]+) %$")


def node_errors(path):
    """{(model, config): [signed node error in %]} for the point rows of one table."""
    header = None
    errors = {}
    with open(path, encoding="utf-8") as table:
        for line in table:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if "at the node ms predicted / measured, error" in cells:
                header = cells
                continue
            if header is None or len(cells) != len(header) or not cells[1].startswith("c="):
                continue
            at_node = cells[header.index("at the node ms predicted / measured, error")]
            found = NODE_ERROR.search(at_node)
            if found:
                errors.setdefault((cells[0], cells[1]), []).append(float(found.group(1)))
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
