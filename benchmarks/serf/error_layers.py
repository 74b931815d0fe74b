#!/usr/bin/env python3
"""The prediction error of `weir bench serf` tables, layer by layer, one line per table.

Usage: error_layers.py TABLE.md [TABLE.md ...]

Each layer takes one source of error away, so the step from one to the next is what that source
costs (mean |error| and p90 over the table's points):

- end to end: the model on the profile taken once, plus the path, against the measured latency;
- second profile: the same from the second profile, if the run took one ("–" without): one taken
  just before each configuration's loads (`--reprofile`: what the profile's age costs) or one
  whose rounds are spread over minutes (`--spread-profile`: what measuring one moment costs);
- SERF online: the same model on the profile blended with the calls the node served before the
  point (what `parallelism: auto` predicts from; "–" in tables from before the column);
- level carried: the profile slowed to the service level (measured over predicted mean service)
  of the last point served, the causal counterpart of in situ;
- in situ: the model with its service level set to the calls measured during the point;
- in situ at the node: the same against the node's own queue wait plus call, without the path
  outside it (weir's ingress and egress and the load generator's lateness);
- at the node with both SCVs: that, with Kingman's waiting for the measured spreads of the
  arrivals at the node and of the calls.

It also prints the range of two spreads per table: the CV of the mean call time across 0.5 s
windows within a point (does the service level move during a point?) and the SCV of the gaps
between arrivals at the node (1 for Poisson; above 1 if the path delivers requests in clumps).
"""
import statistics
import sys

from serf_tables import percent, point_rows

LAYERS = [
    ("end to end", "error"),
    ("second profile", ("from the second profile: ms, error",
                        # the column's name in the first `--reprofile` tables
                        "from a profile taken just before the configuration: ms, error")),
    ("SERF online", "from the calls served before (SERF online): ms, error"),
    ("level carried", "at the service level of the last point served: ms, error"),
    ("in situ", "in-situ error"),
    ("in situ at the node", None),
    ("at the node, both SCVs", "in-situ at the node with both SCVs: ms, error"),
]
AT_NODE = "at the node ms predicted / measured, error"


def node_in_situ(row):
    """The in-situ prediction less the predicted path, against the node's measured time (%)."""
    try:
        in_situ = float(row["in-situ predicted ms"])
    except ValueError:
        return None
    path = float(row["predicted ms"]) - float(row[AT_NODE].split("/")[0])
    measured = float(row[AT_NODE].split("/")[1].split(",")[0])
    return (in_situ - path - measured) / measured * 100.0


def summary(errors):
    """'mean / p90' of the absolute errors, or '–'."""
    values = sorted(abs(e) for e in errors if e is not None)
    if not values:
        return "–"
    p90 = values[max(0, -(-9 * len(values) // 10) - 1)]
    return f"{statistics.mean(values):.1f} / {p90:.1f} %"


def spread(rows, column):
    values = [float(r[column]) for r in rows if r.get(column, "–") not in ("–", "")]
    return f"{min(values):.3f}–{max(values):.3f}" if values else "–"


def main(paths):
    print("| table | points | " + " | ".join(name for name, _ in LAYERS)
          + " | window CV | arrival SCV at the node |")
    print("|---" * (len(LAYERS) + 4) + "|")
    for path in paths:
        rows = list(point_rows(path))
        cells = []
        for _, column in LAYERS:
            if column is None:
                cells.append(summary(node_in_situ(r) for r in rows))
            else:
                names = column if isinstance(column, tuple) else (column,)
                found = next((n for n in names if n in (rows[0] if rows else {})), None)
                cells.append(summary(percent(r[found]) for r in rows) if found else "–")
        print(f"| {path} | {len(rows)} | " + " | ".join(cells)
              + f" | {spread(rows, 'window CV')} | {spread(rows, 'arrival SCV at the node')} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
