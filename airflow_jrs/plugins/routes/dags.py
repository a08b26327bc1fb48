"""A DAG over a date range: its calendar, and the two actions that act on dates.

* ``GET /api/dags/{dag_id}/calendar``: each date's jobs as the store knows them
  (:mod:`airflow_jrs.views.calendar`), read like ``airflow-jrs plan`` reads them;
* ``POST /api/dags/{dag_id}/backfill-missing``: the missing-only backfill of
  ``airflow-jrs backfill --missing-only`` (:mod:`airflow_jrs.actions.backfill`);
* ``POST /api/dags/{dag_id}/recompute``: ``airflow-jrs recompute --dag-id`` over the dates,
  downstream jobs included (:mod:`airflow_jrs.actions.recompute`).

A preview (``"dry_run": true``) needs read access to the DAG, changes nothing and is not
audit-logged; acting needs edit access, and goes to Airflow through its REST API with the
user's own token (Airflow authorizes each call and logs it) besides this app's audit log entry.
A span is at most :data:`~airflow_jrs.plugins.routes.deps.MAX_DAYS` days: each request walks the
DAG's timetable over all of it.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.api_fastapi.common.db.common import SessionDep
from airflow.api_fastapi.core_api.security import GetUserDep
from airflow.api_fastapi.logging.decorators import action_logging
from fastapi import APIRouter, Depends, HTTPException, Request, Response

from airflow_jrs.actions import backfill, recompute
from airflow_jrs.actions.airflow_api import AirflowApiError
from airflow_jrs.actions.planning.dags import find_dag, find_dag_version
from airflow_jrs.plugins.calendar import calendar_body
from airflow_jrs.plugins.calendar import calendar_facts as kept_facts
from airflow_jrs.plugins.routes.deps import Jobs, RangeBody, day_range, user_api
from airflow_jrs.plugins.security import Access, actor, who

log = logging.getLogger("airflow_jrs.plugins.api")

router = APIRouter()


@router.get("/api/dags/{dag_id}/calendar")
def calendar(user: GetUserDep, b: Jobs, dag_id: str, start: str, end: str) -> Response:
    """Each date of the DAG from ``start`` to ``end`` (``YYYY-MM-DD``, inclusive) by guarded
    task: committed, dirty, failed, canceled, stopped, running, missing or quarantined. Rows
    are kept between requests and planned again when their jobs change
    (:mod:`airflow_jrs.plugins.calendar`)."""
    Access(user).require("GET", dag_id)
    first, last = day_range(start, end)
    dag_key, dag = find_dag_version(dag_id)
    body = calendar_body(b.jobs, dag_key, dag, first, last)
    return Response(content=body, media_type="application/json")


@router.get("/api/dags/{dag_id}/calendar/facts")
def calendar_facts(user: GetUserDep, b: Jobs, dag_id: str, start: str, end: str, logical_date: str) -> Response:
    """The tooltips' facts of one date of the calendar from ``start`` to ``end`` (``logical_date``
    as the calendar gives it): for each task whose job has a result, its status, commit and write
    times, the attempt and fence that wrote it, its outputs and Spark's run time. The page asks
    them when a cell is hovered, so the calendar itself stays small."""
    Access(user).require("GET", dag_id)
    first, last = day_range(start, end)
    dag_key, dag = find_dag_version(dag_id)
    body = kept_facts(b.jobs, dag_key, dag, first, last, logical_date)
    if body is None:
        raise HTTPException(404, f"the calendar of {dag_id!r} from {start} to {end} has no date {logical_date!r}")
    return Response(content=body, media_type="application/json")


def _dry_run(body: Any) -> bool:
    value = body.get("dry_run", True) if isinstance(body, dict) else True
    if not isinstance(value, bool):
        raise HTTPException(400, f"dry_run={value!r}: send true (preview) or false (do it)")
    return value


def _audit_acts(event: str) -> list[Any]:
    """Airflow's audit log entry for a request that acts (``"dry_run": false``), not for a
    preview: a preview changes nothing, and the log would read as if every viewer had acted."""
    log_action = action_logging(event=event)

    async def audit(request: Request, session: SessionDep, user: GetUserDep) -> None:
        try:
            body = await request.json()
        except ValueError:
            body = None
        if (body.get("dry_run", True) if isinstance(body, dict) else True) is True:
            return
        await log_action(request, session, user)

    return [Depends(audit)]


AUDIT_BACKFILL = _audit_acts("jrs_backfill_missing")
AUDIT_RECOMPUTE = _audit_acts("jrs_recompute_range")


@router.post("/api/dags/{dag_id}/backfill-missing", dependencies=AUDIT_BACKFILL)
def backfill_missing(user: GetUserDep, b: Jobs, dag_id: str, body: RangeBody, request: Request) -> dict[str, Any]:
    """Runs only for the dates where some job is not committed: a preview (``dry_run``, the
    default) of the dates and jobs and how (``backfill``: one Airflow backfill; ``runs``: a run per
    date), or the runs themselves."""
    dry_run = _dry_run(body)
    Access(user).require("GET" if dry_run else "PUT", dag_id)
    first, last = day_range(body.get("start"), body.get("end"))
    missing = backfill.plan_missing(b.store, find_dag(dag_id), first, last)
    doc: dict[str, Any] = {
        "dag_id": dag_id,
        "start": first.date().isoformat(),
        "end": last.date().isoformat(),
        "dry_run": dry_run,
        "how": missing.how,
        "runs": [p.json() for p in missing.needed],
        "jobs": [{"job_id": j, "why": w, "logical_date": p.logical_date.isoformat()}
                 for p in missing.needed for j, w in p.missing],
        "blocked": [{"job_id": j, "why": w, "logical_date": p.logical_date.isoformat()}
                    for p in missing.plans for j, w in p.blocked],
        "summary": missing.summary,
    }  # fmt: skip
    if dry_run or not missing.todo:
        return doc
    started = backfill.Started(backfill.how(missing.todo))
    try:
        backfill.start_missing(user_api(request), missing, started)
    except AirflowApiError as exc:
        made = started.made()
        done = f"; created so far: {', '.join(made)}" if made else "; nothing created"
        raise HTTPException(502, f"{exc}{done}") from None
    log.warning("Job results: %s started a missing-only backfill of %s: %s", who(user), dag_id, started.made())
    return {**doc, "how": started.how, "backfills": started.backfills, "created": started.runs, "notes": started.notes}


@router.post("/api/dags/{dag_id}/recompute", dependencies=AUDIT_RECOMPUTE)
def recompute_range(user: GetUserDep, b: Jobs, dag_id: str, body: RangeBody, request: Request) -> dict[str, Any]:
    """Compute the DAG's jobs of the dates again (of ``task_ids`` only, when given): a preview
    (``dry_run``, the default) listing every job it computes, downstream ones included, or the
    recompute itself (each result forgotten, kept in history; each run's task instances cleared)."""
    dry_run = _dry_run(body)
    access = Access(user)
    access.require("GET" if dry_run else "PUT", dag_id)
    may_clear = access.allowed("PUT", dag_id)  # Airflow's dry run of a clear needs the right to clear
    first, last = day_range(body.get("start"), body.get("end"))
    task_ids = body.get("task_ids")
    if task_ids is not None and (not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids)):
        raise HTTPException(400, 'task_ids: send a list of task ids, e.g. ["submit"], or null for every task')
    api = user_api(request)
    targets: list[recompute.Target] = []
    try:
        dag = find_dag(dag_id)
        targets = recompute.by_dates(b.jobs, api, dag, first, last, task_ids or None)
        # a job id may be shared across DAGs: its result is the writer DAG's to forget
        recompute.leave_foreign_alone(b.store, targets, lambda writer: access.allowed("PUT", writer))
        notes = recompute.preview(b.jobs, api, targets, dag=dag, may_clear=may_clear)
        if not dry_run:
            recompute.apply(b.store, api, targets, actor(user))
    except AirflowApiError as exc:
        forgotten = [t.job_id for t in targets if t.forgotten]
        done = (f"; the results of {forgotten} are forgotten (kept in history): their next runs compute them, or "
                "clear their task instances in the Airflow UI") if forgotten else "; nothing was changed"  # fmt: skip
        raise HTTPException(502, f"{exc}{done}") from None
    if not dry_run:
        log.warning("Job results: %s recomputed %d jobs of %s", who(user), len(targets), dag_id)
    return {
        "dag_id": dag_id,
        "start": first.date().isoformat(),
        "end": last.date().isoformat(),
        "dry_run": dry_run,
        "runs": sorted({t.run_id for t in targets if t.run_id}),
        "jobs": [t.json() for t in targets],
        "knock_on": [t.json() for t in targets if t.downstream],
        "notes": notes,
    }
