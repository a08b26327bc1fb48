"""The Job calendar's rows, kept between requests: a date is planned again only when it changed.

Planned afresh, 366 dates of 50 guarded tasks cost about 1.3 s a request (docs/benchmarks.md):
18,300 job ids rendered, 18,300 entries read and decoded, a decision each, several MB of JSON
encoded. Almost none of it changes between two looks at the page. A date's row depends on

* the DAG version it is planned with and its runs (what :func:`~airflow_jrs.actions.planning.job_ids.job_ids`
  names: the jobs, their tasks and fingerprints);
* its jobs' entries: the store announces every write of an entry (:mod:`airflow_jrs.store.redis.changes`);
* which of its jobs hold a lease now ("running");
* when a kept entry's retention ends (its ``PTTL``, read with it).

So a request reads the latest DAG version's key and the runs (two small queries of the metadata
DB, as Airflow's own calendar does) and the held leases (one ``SCAN``); names the jobs again only
when the version or the runs changed, keeping every row whose jobs are the same; re-reads and
re-plans only the rows whose entries changed since they were built, whose held leases differ
or whose kept entry expired, in one batch read; and answers the kept rows' JSON joined, without
encoding it again. The rule that turns what was read into a cell is
:func:`~airflow_jrs.actions.planning.jobs.plan_jobs`, the one ``airflow-jrs plan`` applies.

While the store's notifications are not confirmed (just started, a lost connection, a
failover), nothing is kept: each request plans afresh, as before. Nothing holds a lock across a
DB read, a render or a store round trip: two requests may rebuild the same row, and the last
one's is kept.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from airflow_jrs.actions.planning.job_ids import job_ids
from airflow_jrs.actions.planning.jobs import plan_jobs, planned_date
from airflow_jrs.actions.planning.runs import ExistingRun, runs_by_date
from airflow_jrs.store.namespace import JobNamespace
from airflow_jrs.views.calendar import (
    LEGEND,
    CalendarJob,
    cell_state,
    date_facts,
    date_order,
    date_row,
    job_detail,
    task_columns,
)

log = logging.getLogger(__name__)

#: How many (DAG, date range) calendars an API server keeps (each about as large as its JSON).
KEPT_CALENDARS = 16

_Found = tuple[Any, Any, str]  # (interval, task, job id), as job_ids names them


def _dumps(value: Any) -> str:
    # FastAPI's JSONResponse encoding, so a kept answer reads byte for byte like a planned one
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


@dataclass(frozen=True)
class _Row:
    """One date's JSON and what it was built from."""

    body: str
    facts: str  # the tooltips' facts of its cells (views/calendar.py date_facts)
    inputs: tuple[Any, ...]  # its jobs as planned (task, map index, job id, fingerprint) and runs
    job_ids: frozenset[str]
    held: frozenset[str]  # its jobs that held a lease when it was built
    epoch: int  # the store's change epoch taken before its entries were read
    expires: float  # monotonic time at which a kept entry's retention ends (inf: none)


@dataclass
class _Plan:
    """One DAG's dates over one range, as named from one DAG version and one set of runs."""

    signature: tuple[Any, ...]
    dates: list[datetime | None]
    found: dict[datetime | None, list[_Found]]
    inputs: dict[datetime | None, tuple[Any, ...]]
    run_ids: dict[datetime | None, list[str]]
    runs: dict[float, ExistingRun]
    head: str  # '{"dag_id":...,"jobs":[...]'
    notes: list[str]
    rows: dict[datetime | None, _Row] = field(default_factory=dict)


_plans: dict[tuple[str, str, datetime, datetime], _Plan] = {}
_plans_lock = threading.Lock()  # held only to look up or replace a plan, never across I/O


def calendar_body(
    jobs: JobNamespace,
    dag_key: tuple[str, str],
    dag: Any,
    start: datetime,
    end: datetime,
    *,
    versions: Callable[[str], Any] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> str:
    """The calendar of ``dag`` (its latest version, ``dag_key``) from ``start`` to ``end`` as JSON
    text: :func:`airflow_jrs.views.calendar.calendar_json`'s document, its rows kept between calls.

    :param versions: a version id's serialized DAG (the one a run used)
    """
    plan, rows = _current_rows(jobs, dag_key, dag, start, end, versions, clock)
    body = ",".join(rows[d].body for d in plan.dates)
    return f'{plan.head},"dates":[{body}],"notes":{_dumps(plan.notes)},"legend":{_dumps(LEGEND)}}}'


def calendar_facts(
    jobs: JobNamespace,
    dag_key: tuple[str, str],
    dag: Any,
    start: datetime,
    end: datetime,
    logical_date: str,
    *,
    versions: Callable[[str], Any] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> str | None:
    """The tooltips' facts of one date of that calendar (``logical_date`` as the calendar gives
    it) as JSON text (:func:`airflow_jrs.views.calendar.date_facts`); ``None`` when the calendar
    has no such date. From the same kept rows, so a hover reads the store only when they changed."""
    plan, rows = _current_rows(jobs, dag_key, dag, start, end, versions, clock)
    for d in plan.dates:
        if (d.isoformat() if d is not None else "") == logical_date:
            return rows[d].facts
    return None


def _current_rows(
    jobs: JobNamespace,
    dag_key: tuple[str, str],
    dag: Any,
    start: datetime,
    end: datetime,
    versions: Callable[[str], Any] | None,
    clock: Callable[[], float],
) -> tuple[_Plan, dict[datetime | None, _Row]]:
    """The plan of the calendar and each date's row, good now: kept ones checked, stale ones built again."""
    from airflow_jrs.actions.planning.dags import version_dag

    changes = jobs.results.changes()
    runs, run_ids, runs_note = runs_by_date(dag.dag_id, start, end)  # one query: plan with them, list them
    signature = (dag_key, _runs_signature(runs, run_ids), runs_note)
    key = (jobs.namespace, dag.dag_id, start, end)
    with _plans_lock:
        plan = _plans.get(key)
    if plan is None or plan.signature != signature:
        fresh = _name_jobs(dag, start, end, runs, run_ids, versions or version_dag, signature, runs_note)
        if plan is not None:  # keep the rows whose jobs were named alike
            fresh.rows = {d: r for d, r in plan.rows.items() if fresh.inputs.get(d) == r.inputs}
        plan = fresh
        with _plans_lock:
            if key not in _plans and len(_plans) >= KEPT_CALENDARS:
                _plans.pop(next(iter(_plans)), None)
            _plans[key] = plan
    now = clock()
    held = _held_of(jobs).read(jobs, now, clock)
    held_ids = frozenset(held)
    stale = [
        d for d in plan.dates
        if not _still_good(plan.rows.get(d), held_ids, changes.unchanged_since, now)
    ]  # fmt: skip
    rows = plan.rows
    if stale:
        keep, epoch = changes.active, changes.epoch  # before the read: a write after it is announced after
        rows = {**rows, **_rebuild(jobs, plan, stale, held, epoch, now)}
        if keep:
            plan.rows = rows
    return plan, rows


class _HeldLeases:
    """The namespace's held leases, read at most every :data:`HELD_FRESH` seconds.

    Leases have no index and announce nothing: listing them is a ``SCAN`` of the whole
    keyspace (about 20 ms at 36,000 keys), which would be most of a kept calendar's answer.
    A read younger than :data:`HELD_FRESH` is served as it is; an older one (up to
    :data:`HELD_USABLE`) is served while one background thread reads them again; an older one
    still is read by the request itself. So a lease taken or released shows as "running" (or
    stops) within about :data:`HELD_FRESH` seconds of a look at the page.
    """

    def __init__(self) -> None:
        self._held: Mapping[str, Any] = {}
        self._at = -math.inf
        self._lock = threading.Lock()  # held only to claim the refresh, never across I/O
        self._refreshing = False

    def read(self, jobs: JobNamespace, now: float, clock: Callable[[], float]) -> Mapping[str, Any]:
        age = now - self._at
        if age < HELD_FRESH:
            return self._held
        if age < HELD_USABLE:
            with self._lock:
                start, self._refreshing = not self._refreshing, True
            if start:
                threading.Thread(target=self._refresh_quietly, args=(jobs, clock), daemon=True).start()
            return self._held
        return self._refresh(jobs, clock)

    def _refresh(self, jobs: JobNamespace, clock: Callable[[], float]) -> Mapping[str, Any]:
        at = clock()  # before the SCAN: a lease released during it is read again soon
        try:
            held = jobs.held_leases()
        finally:
            self._refreshing = False
        self._held, self._at = held, at
        return held

    def _refresh_quietly(self, jobs: JobNamespace, clock: Callable[[], float]) -> None:
        try:
            self._refresh(jobs, clock)
        except Exception as exc:  # the next request past HELD_USABLE reads them itself, and fails closed
            log.warning("Job results: could not list the held leases of %r: %s", jobs.namespace, exc)


#: Seconds a listing of the held leases is served as it is (see :class:`_HeldLeases`).
HELD_FRESH = 2.0
#: Seconds after which a listing is too old to serve while a new one is read.
HELD_USABLE = 30.0
_held: dict[str, _HeldLeases] = {}


def _held_of(jobs: JobNamespace) -> _HeldLeases:
    with _plans_lock:
        return _held.setdefault(jobs.namespace, _HeldLeases())


def _still_good(
    row: _Row | None, held: frozenset[str], unchanged_since: Callable[[frozenset[str], int], bool], now: float
) -> bool:
    return (
        row is not None
        and now < row.expires
        and (row.job_ids & held) == row.held
        and unchanged_since(row.job_ids, row.epoch)
    )


def _rebuild(
    jobs: JobNamespace,
    plan: _Plan,
    dates: list[datetime | None],
    held: Mapping[str, Any],
    epoch: int,
    now: float,
) -> dict[datetime | None, _Row]:
    """The rows of ``dates`` planned again from one batch read of their entries (read after ``epoch``)."""
    found = [item for d in dates for item in plan.found[d]]
    expiries: dict[str, float] = {}
    answers = jobs.results.read_many([job_id for _, _, job_id in found], expiries=expiries)
    planned = plan_jobs(jobs, found, plan.runs, answers, held, jobs.intents.list_intents())
    by_date: dict[datetime | None, list[CalendarJob]] = {d: [] for d in dates}
    for p in planned:
        by_date[p.logical_date].append(
            CalendarJob(
                p.logical_date, p.task_id, p.job_id,
                cell_state(p.status, p.result_status, p.job_id in held, stale=p.stale), p.map_index,
                detail=job_detail(p.entry), fingerprint_known=p.fingerprint_known,
            )
        )  # fmt: skip
    rows = {}
    for d in dates:
        ids = frozenset(job_id for _, _, job_id in plan.found[d])
        ttl = min((expiries[j] for j in ids if j in expiries), default=math.inf)
        rows[d] = _Row(
            _dumps(date_row(d, by_date[d], plan.run_ids.get(d, []))), _dumps(date_facts(d, by_date[d])),
            plan.inputs[d], ids, frozenset(j for j in ids if j in held), epoch, now + ttl,
        )  # fmt: skip
    return rows


def _name_jobs(
    dag: Any,
    start: datetime,
    end: datetime,
    runs: dict[float, ExistingRun],
    run_ids: Mapping[float, list[str]],
    versions: Callable[[str], Any],
    signature: tuple[Any, ...],
    runs_note: str | None,
) -> _Plan:
    found, notes = job_ids(dag, start, end, runs, versions)
    if runs_note:
        notes.append(runs_note)
    by_date: dict[datetime | None, list[_Found]] = {}
    columns: list[CalendarJob] = []
    for info, task, job_id in found:
        when = planned_date(info)
        by_date.setdefault(when, []).append((info, task, job_id))
        columns.append(CalendarJob(when, task.task_id, job_id, "", task.map_index))
    dates = sorted(by_date, key=date_order)
    ids = {d: list(run_ids.get(d.timestamp(), [])) if d is not None else [] for d in dates}
    inputs = {
        d: (
            tuple((task.task_id, task.map_index, job_id, task.fingerprint, task.accept_changed_fingerprint)
                  for _, task, job_id in by_date[d]),
            tuple(ids[d]),
        )
        for d in dates
    }  # fmt: skip
    head = _dumps({"dag_id": dag.dag_id, "jobs": task_columns(columns)})[:-1]
    return _Plan(signature, dates, by_date, inputs, ids, runs, head, notes)


def _runs_signature(runs: Mapping[float, ExistingRun], run_ids: Mapping[float, list[str]]) -> tuple[Any, ...]:
    """What of the runs names the jobs or shows on the page (a run's conf does neither)."""
    named = tuple(sorted((ts, r.run_id, r.data_interval, r.dag_version_id) for ts, r in runs.items()))
    return named, tuple(sorted((ts, tuple(ids)) for ts, ids in run_ids.items()))


def forget_kept() -> None:
    """Drop every kept calendar (tests; a reconnect with new settings)."""
    with _plans_lock:
        _plans.clear()
        _held.clear()
