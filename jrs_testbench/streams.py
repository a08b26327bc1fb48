"""Streaming test support: landing files one by one, reading a file sink's committed output.

* :func:`drop_rows_file`: one CSV file per "hour" of input, written under a temporary name and
  renamed, so the file source never sees half a file;
* :func:`committed_rows`: the rows a Structured Streaming file sink committed, read through its
  ``_spark_metadata`` log (files an interrupted batch left behind are not in it, exactly as
  Spark's own reader sees it);

The flights example's generator (one landing file per hour) lives with the example, in
``dags/flights/hours.py``.

Standard library plus pyarrow (the test environment has it); no Airflow, no Spark.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any


def drop_rows_file(
    landing: str | os.PathLike[str], name: str, header: Sequence[str], rows: Iterable[Sequence[Any]]
) -> Path:
    """Write ``<landing>/<name>`` atomically (temporary dot-file, then rename)."""
    folder = Path(landing)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}.tmp"
    with open(tmp, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    final = folder / name
    os.replace(tmp, final)
    return final


def drop_id_files(landing: str | os.PathLike[str], parts: Iterable[int], rows_per_file: int = 10) -> None:
    """The tests' input: file ``part-<k>.csv`` holds ids ``k*rows .. k*rows+rows-1``."""
    for k in parts:
        ids = range(k * rows_per_file, (k + 1) * rows_per_file)
        drop_rows_file(landing, f"part-{k:04d}.csv", ("id", "part"), ((i, k) for i in ids))


def committed_files(output_dir: str | os.PathLike[str]) -> list[Path]:
    """Data files the file sink committed (``_spark_metadata`` log: deltas and compactions)."""
    meta = Path(output_dir) / "_spark_metadata"
    if not meta.is_dir():
        return []
    added: dict[str, bool] = {}
    for log_file in sorted(meta.iterdir(), key=lambda p: int(p.name.split(".")[0]) if p.name[0].isdigit() else -1):
        if not log_file.name[0].isdigit():
            continue
        lines = log_file.read_text().splitlines()[1:]  # first line: the log's version ("v1")
        for line in lines:
            entry = json.loads(line)
            path = entry["path"].removeprefix("file://")
            added[path] = entry.get("action", "add") == "add"
    return [Path(p) for p, keep in added.items() if keep]


def committed_rows(output_dir: str | os.PathLike[str], column: str = "id") -> list[Any]:
    """Values of ``column`` in every committed row of a file sink's output (with repeats)."""
    import pyarrow.parquet as pq

    values: list[Any] = []
    for path in committed_files(output_dir):
        values.extend(pq.read_table(path, columns=[column]).column(column).to_pylist())
    return values
