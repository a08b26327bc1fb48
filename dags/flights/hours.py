"""The streaming example's generator: the flights of 2013-01-01 arrive as one file per hour.

:func:`drop_hour` writes ``flights-2013-01-01-HH.csv`` (the flights scheduled to depart in hour
``HH``; columns :data:`COLUMNS`) into a landing folder under a temporary name and renames it, so
a Structured Streaming file source never reads half a file. Tests, the DAG and the benchmark
call it to make data "arrive" hour by hour. Standard library only.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

DAY = (2013, 1, 1)
COLUMNS = ("year", "month", "day", "hour", "carrier", "dep_delay", "arr_delay", "flight", "origin")


def flights_by_hour(flights_csv: str | os.PathLike[str], day: tuple[int, int, int] = DAY) -> dict[int, list[list[str]]]:
    """The day's rows of ``flights.csv`` (as :data:`COLUMNS`), by scheduled departure hour."""
    by_hour: dict[int, list[list[str]]] = {}
    with open(flights_csv, newline="") as fh:
        reader = csv.reader(fh)
        col = {name: i for i, name in enumerate(next(reader))}
        for row in reader:
            if (int(row[col["year"]]), int(row[col["month"]]), int(row[col["day"]])) != day:
                continue
            by_hour.setdefault(int(row[col["hour"]]), []).append([row[col[c]] for c in COLUMNS])
    return by_hour


def drop_hour(landing: str | os.PathLike[str], hour: int, rows: list[list[str]]) -> Path:
    """Land one hour's file atomically; returns its path."""
    folder = Path(landing)
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"flights-{DAY[0]}-{DAY[1]:02d}-{DAY[2]:02d}-{hour:02d}.csv"
    tmp = folder / f".{final.name}.tmp"
    with open(tmp, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(COLUMNS)
        writer.writerows(rows)
    os.replace(tmp, final)
    return final
