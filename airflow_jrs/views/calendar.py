"""A DAG's jobs by date: the Job results page's calendar, one cell per date and task.

Each cell says where the task's job of that date stands: ``committed`` (clean and SUCCEEDED),
``dirty`` (SUCCEEDED, cleanup pending), ``failed``, ``canceled`` or ``stopped`` (its last
result), ``running`` (an attempt holds its lease), ``missing`` (no result), or ``quarantined``
(an entry that cannot be read: its task fails until someone looks). A committed or dirty job
whose task would compute it again, because its rendered arguments, ``job_version`` or code
changed since (the result's fingerprint differs from the one the dag-processor planned), is
``stale``; where the fingerprint is known only at run time the cell says so (``fingerprint``:
``unknown``) rather than guessing. A mapped task is one cell
whose ``state`` is the state of the map index that needs a person most (:data:`URGENCY`) and
whose ``map`` counts the map indexes by state. Airflow-free: the caller reads the jobs
(:func:`airflow_jrs.actions.planning.jobs.plan_range`) and the runs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_jrs.domain.identity import run_key

#: Most urgent first: the state a mapped task's cell shows is the first any of its indexes has.
URGENCY = ("quarantined", "failed", "canceled", "stopped", "running", "stale", "dirty", "missing", "committed")
#: What the page's legend says of the cells (the dates are logical dates in UTC).
LEGEND = {
    "time_zone": "UTC",
    "mapped": "a mapped task's cell shows the state of its map index that needs a person most "
    "(quarantined, failed, canceled, stopped, running, stale, dirty, missing, committed), and counts its map "
    "indexes by state",
    "stale": "committed, but its task would compute it again: its arguments, job_version or code changed since",
    "unknown": "committed; whether it would compute again is known only when its task renders its arguments",
}


@dataclass(frozen=True)
class CalendarJob:
    """One job of one date, as the calendar shows it."""

    logical_date: datetime | None
    task_id: str
    job_id: str
    state: str
    map_index: int = -1
    #: The tooltip's facts: commit time, the attempt that wrote it, outputs, run time (answered
    #: apart from the cells, :func:`date_facts`).
    detail: Mapping[str, Any] | None = None
    fingerprint_known: bool = True


def cell_state(status: str, result_status: str | None, running: bool, stale: bool = False) -> str:
    """A planned job's status (``airflow-jrs plan``'s words) as a calendar state."""
    if running:
        return "running"
    if stale:
        return "stale"
    if status == "failed" and result_status in ("CANCELED", "STOPPED"):
        return result_status.lower()
    if status in ("quarantined", "unreadable"):
        return "quarantined"
    return status


def _cell(jobs: list[CalendarJob]) -> dict[str, Any]:
    if len(jobs) == 1 and jobs[0].map_index < 0:
        one = jobs[0]
        cell: dict[str, Any] = {"state": one.state, "job_id": one.job_id}
        if not one.fingerprint_known and one.state in ("committed", "dirty"):
            cell["fingerprint"] = "unknown"
        return cell
    counts = Counter(j.state for j in jobs)
    state = next(s for s in URGENCY if counts[s]) if all(s in URGENCY for s in counts) else jobs[0].state
    first = next(j for j in sorted(jobs, key=lambda j: j.map_index) if j.state == state)
    return {"state": state, "job_id": first.job_id, "map": {"count": len(jobs), "states": dict(counts)}}


def job_detail(entry: Any) -> dict[str, Any] | None:
    """The tooltip's facts of a stored entry (:class:`airflow_jrs.store.JobResultEntry`)."""
    if entry is None:
        return None
    result = entry.result
    start, end = result.start_time, result.end_time
    attempt = result.attempt
    return {
        "status": result.status.value,
        "committed_at": entry.created_at.isoformat() if entry.is_clean and entry.created_at else None,
        "written_at": entry.created_at.isoformat() if entry.created_at else None,
        "attempt": f"{attempt.run_id} try {attempt.try_number}" if attempt else None,
        "fence": result.fence,
        "outputs": dict(result.outputs),
        "run_seconds": round((end - start).total_seconds(), 1) if start and end else None,
    }


def task_columns(jobs: Iterable[CalendarJob]) -> list[dict[str, str]]:
    """The calendar's columns: its tasks in DAG order, a mapped one labelled so."""
    tasks: dict[str, bool] = {}  # task id -> mapped
    for job in jobs:
        tasks[job.task_id] = tasks.get(job.task_id, False) or job.map_index >= 0
    return [{"task_id": t, "label": f"{t} (mapped)" if mapped else t} for t, mapped in tasks.items()]


def date_row(when: datetime | None, jobs: Iterable[CalendarJob], run_ids: Iterable[str]) -> dict[str, Any]:
    """One date of the calendar: its Airflow runs and one cell per task (of ``jobs``, that date's)."""
    cells: dict[str, list[CalendarJob]] = {}
    for job in jobs:
        cells.setdefault(job.task_id, []).append(job)
    return {
        "run_key": run_key({"logical_date": when}) if when is not None else None,
        "logical_date": when.isoformat() if when is not None else None,
        "run_ids": list(run_ids) if when is not None else [],
        "cells": {task_id: _cell(found) for task_id, found in cells.items()},
    }


def date_facts(when: datetime | None, jobs: Iterable[CalendarJob]) -> dict[str, Any]:
    """The tooltips' facts of one date's cells (:func:`job_detail`, by task id), asked apart from
    the calendar when a cell is hovered: a year of 50 jobs' facts would be most of its answer."""
    return {
        "logical_date": when.isoformat() if when is not None else None,
        "cells": {job.task_id: dict(job.detail) for job in jobs if job.detail and job.map_index < 0},
    }


def date_order(when: datetime | None) -> tuple[bool, datetime | None]:
    """Oldest first; the jobs of no date (an asset-triggered DAG's) last."""
    return (when is None, when)


def calendar_json(
    dag_id: str, jobs: Iterable[CalendarJob], runs: Mapping[float, list[str]], notes: Iterable[str] = ()
) -> dict[str, Any]:
    """The calendar of ``dag_id``: its tasks in DAG order, then one row per date, oldest first,
    with the Airflow runs of that logical date (``runs``, by timestamp) and one cell per task."""
    jobs = list(jobs)
    by_date: dict[datetime | None, list[CalendarJob]] = {}
    for job in jobs:
        by_date.setdefault(job.logical_date, []).append(job)
    dates = [
        date_row(when, found, runs.get(when.timestamp(), []) if when is not None else [])
        for when, found in sorted(by_date.items(), key=lambda item: date_order(item[0]))
    ]
    return {"dag_id": dag_id, "jobs": task_columns(jobs), "dates": dates, "notes": list(notes), "legend": LEGEND}
