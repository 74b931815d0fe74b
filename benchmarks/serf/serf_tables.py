"""Reads the point rows of `weir bench serf` tables (one file per run).

Each point row of such a table is one configuration served at one load; `point_rows` gives it as
a dict from the header's column names to the cells, `percent` the signed error a cell ends with.
Used by `error_layers.py`.
"""
import re

POINT_HEADER_MARK = "service ms predicted / measured"
PERCENT_AT_END = re.compile(r"([+-]?[0-9.]+) %$")


def point_rows(path):
    """Yields {column name: cell} for every point row (config × load) of one table file."""
    header = None
    with open(path, encoding="utf-8") as table:
        for line in table:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if POINT_HEADER_MARK in cells:
                header = cells
                continue
            if header is None or len(cells) != len(header) or not cells[1].startswith("c="):
                continue
            yield dict(zip(header, cells))


def percent(cell):
    """The signed per cent a cell ends with ("-15.3 %", "8.5 / 10.0, -15.3 %"), None for "–"."""
    found = PERCENT_AT_END.search(cell)
    return float(found.group(1)) if found else None

