"""Invariants a test checks after every recovery scenario, on real state (Redis and folders).

"Done is done" (docs/architecture.md invariant 1) is only worth something if what a committed result
names is still there: every later run skips the job on the strength of that entry. A cleanup
that removes the folder an adopted result points to (a successor's result names its predecessor's
folder) leaves an entry that
says SUCCEEDED over an empty directory, and nothing in the store notices. So a recovery test
ends with :func:`assert_clean_outputs_exist`, which looks at the files themselves.
"""

from __future__ import annotations

from typing import Any

from airflow_jrs.domain.paths import FENCE_PREFIX
from airflow_jrs.spark.commit import MARKER_NAME, read_commit_marker
from airflow_jrs.store import JobResultEntry, JobStatus, RedisJobResultStore


def _fs(location: str) -> tuple[Any, str]:
    import fsspec

    return fsspec.core.url_to_fs(location)


def _marker_folder(location: str) -> str | None:
    """The folder holding the commit marker of output ``location``: the location itself, or the
    attempt's staging folder (``fence-...``) above it when the output is a sub-path of it."""
    fs, path = _fs(location)
    prefix = location[: len(location) - len(path)] if location.endswith(path) else ""
    candidate = path.rstrip("/")
    while candidate:
        if fs.exists(f"{candidate}/{MARKER_NAME}"):
            return f"{prefix}{candidate}"
        name = candidate.rpartition("/")[2]
        if name.startswith(FENCE_PREFIX) or "/" not in candidate:
            return None
        candidate = candidate.rpartition("/")[0]
    return None


def _data_files(location: str) -> list[str]:
    """Files under ``location`` that hold data (not the marker, not Spark's hidden or ``_`` files)."""
    fs, path = _fs(location)
    names = fs.find(path) if fs.isdir(path) else [path]
    return [n for n in names if not n.rpartition("/")[2].startswith(("_", ".")) and fs.size(n) > 0]


def _parquet_rows(files: list[str], location: str) -> int | None:
    parquet = [f for f in files if f.endswith(".parquet")]
    if not parquet:
        return None
    import pyarrow.parquet as pq

    fs, _ = _fs(location)
    total = 0
    for name in parquet:
        with fs.open(name, "rb") as fh:
            total += pq.ParquetFile(fh).metadata.num_rows
    return total


#: Row files of the fault trials' stand-in application (:mod:`jrs_testbench.trials.app`): one row a line.
ROW_FILE_SUFFIX = ".rows"


def _line_rows(files: list[str], location: str) -> int | None:
    rows = [f for f in files if f.endswith(ROW_FILE_SUFFIX)]
    if not rows:
        return None
    fs, _ = _fs(location)
    total = 0
    for name in rows:
        with fs.open(name, "rb") as fh:
            total += sum(1 for _ in fh)
    return total


def check_outputs(entry: JobResultEntry) -> list[str]:
    """What is wrong with the outputs ``entry`` names (empty: nothing); see
    :func:`assert_clean_outputs_exist` for the rules."""
    result, problems = entry.result, []
    for name, location in sorted(result.outputs.items()):
        fs, path = _fs(location)
        if not fs.exists(path):
            problems.append(f"{result.job_id}: output {name!r} at {location} does not exist")
            continue
        folder = _marker_folder(location)
        marker = read_commit_marker(folder) if folder is not None else None
        if marker is None:
            problems.append(f"{result.job_id}: output {name!r} at {location} has no commit marker")
            continue
        if marker.get("job_id") not in (None, result.job_id):
            problems.append(f"{result.job_id}: the marker of {location} names job {marker.get('job_id')!r}")
        if result.application_id and marker.get("application_id") not in (None, result.application_id):
            problems.append(
                f"{result.job_id}: the marker of {location} names application {marker.get('application_id')!r}, "
                f"the result {result.application_id!r}"
            )
        metrics = marker.get("metrics") or {}
        if isinstance(metrics, dict) and metrics != result.metrics:
            problems.append(f"{result.job_id}: marker metrics {metrics} differ from the result's {result.metrics}")
        files = _data_files(location)
        if not files:
            problems.append(f"{result.job_id}: output {name!r} at {location} holds no data file")
            continue
        rows = metrics.get("rows") if isinstance(metrics, dict) else None
        counted = None
        if isinstance(rows, int):
            counted = _parquet_rows(files, location)
            counted = _line_rows(files, location) if counted is None else counted
        if counted is not None and counted != rows:
            problems.append(f"{result.job_id}: output {name!r} holds {counted} rows, its marker says {rows}")
    return problems


def assert_clean_outputs_exist(
    store: RedisJobResultStore, namespace: str | None = None, *, include_dirty: bool = False
) -> list[JobResultEntry]:
    """Every output a clean SUCCEEDED entry of ``namespace`` names exists and holds what its
    commit marker (:mod:`airflow_jrs.spark.commit`) says: the marker is there (in the output or
    its attempt's ``fence-...`` staging folder above it), names the same job, application and
    metrics as the entry, there is at least one non-empty data file, and when the marker counts
    ``rows`` of Parquet output (or of the trials' ``.rows`` files), the files hold that many rows.

    ``namespace`` defaults to the store's own; ``include_dirty`` also checks dirty SUCCEEDED
    entries (they make a run skip too). Returns the entries checked, so a caller can assert it
    checked something."""
    if namespace is not None and namespace != store.namespace:
        store = RedisJobResultStore(store.client, namespace)
    entries = [
        e
        for e in store.list_entries(limit=10_000)
        if e.result.status is JobStatus.SUCCEEDED and (e.is_clean or include_dirty)
    ]
    problems = [p for e in entries for p in check_outputs(e)]
    assert not problems, "committed results name outputs that are gone or incomplete:\n" + "\n".join(problems)
    return entries
