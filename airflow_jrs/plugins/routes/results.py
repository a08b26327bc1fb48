"""Reads: health, the dashboard summary, the results list, one job, the leases, the task
instance tab. Each job is shown only to who may read its DAG (:class:`~..security.Access`)."""

from __future__ import annotations

from typing import Annotated, Any

from airflow.api_fastapi.core_api.security import GetUserDep
from fastapi import APIRouter, Query

from airflow_jrs.plugins.routes.deps import Jobs, parse_since, spark_ui
from airflow_jrs.plugins.security import Access, Connected, VisibleQuery
from airflow_jrs.plugins.task_instance import map_index as parse_map_index
from airflow_jrs.plugins.task_instance import running_job, xcom_payload
from airflow_jrs.store import EntryState, JobStatus
from airflow_jrs.views.job import entry_dag, held_leases, inspect_job, lease_dag
from airflow_jrs.views.json import entry_json, held_lease_json, job_json

MAX_LIMIT = 500

router = APIRouter()


@router.get("/api/health")
def health(user: GetUserDep, b: Jobs) -> dict[str, Any]:
    """Is the store reachable? One PING; the namespace, never the server or its credentials."""
    took = b.store.ping()
    return {"status": "ok", "namespace": b.store.namespace, "ping_ms": round(took * 1000, 2)}


@router.get("/api/summary")
def summary(user: GetUserDep, b: Jobs) -> dict[str, Any]:
    """The dashboard widget: dirty results and held leases of DAGs the user may read, the
    quarantined entries (they name no DAG), and the oldest dirty result (cleanup overdue?)."""
    access = Access(user)
    dirty = [e for e in b.store.get_dirty_entries() if access.allowed("GET", entry_dag(e))]
    leases = [h for h in b.jobs.held_leases().values() if access.allowed("GET", lease_dag(h))]
    dated = [e for e in dirty if e.created_at is not None]
    oldest = min(dated, key=lambda e: e.created_at) if dated else None  # type: ignore[arg-type,return-value]
    return {
        "dirty": len(dirty),
        "quarantined": len(b.store.get_quarantined()),
        "leases_held": len(leases),
        "oldest_dirty": None
        if oldest is None or oldest.created_at is None
        else {"job_id": oldest.job_id, "since": oldest.created_at.isoformat()},
    }


@router.get("/api/results")
def results(
    user: GetUserDep,
    b: Jobs,
    state: Annotated[EntryState | None, Query()] = None,
    status: Annotated[JobStatus | None, Query()] = None,
    dag_id: Annotated[str | None, Query()] = None,
    prefix: Annotated[str | None, Query(alias="job_id_prefix")] = None,
    since: Annotated[str | None, Query(description="ISO-8601; entries created at or after")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> dict[str, Any]:
    """Entries newest first, filtered, paged; only jobs of DAGs the user may read."""
    store = b.store
    access = Access(user)
    query = VisibleQuery(
        state=state, status=status, dag_id=dag_id or None, prefix=prefix or None, since=parse_since(since),
        access=access, results=store,
    )  # fmt: skip
    found = store.find_entries(query, limit=limit + 1, offset=offset)
    dirty = [e for e in store.get_dirty_entries() if access.allowed("GET", entry_dag(e))]
    return {
        "namespace": store.namespace,
        "entries": [entry_json(e, spark_ui()) for e in found[:limit]],
        "limit": limit,
        "offset": offset,
        "has_more": len(found) > limit,
        "counts": {"dirty": len(dirty), "quarantined": len(store.get_quarantined())},
        "can_edit_all": access.allowed("PUT", None),
    }


@router.get("/api/results/{job_id:path}")
def result(user: GetUserDep, b: Jobs, job_id: str) -> dict[str, Any]:
    """One job, as ``airflow-jrs show --json`` prints it: entry, history, lease holder, intent,
    heartbeat, stop request, recoveries and their story, links; an unreadable (quarantined)
    entry shows as a problem."""
    return job_detail(b, Access(user), job_id)


def job_detail(b: Connected, access: Access, job_id: str) -> dict[str, Any]:
    """One job (:func:`~airflow_jrs.views.job.inspect_job`), if the user may read its DAG, and
    whether the user may act on it."""
    view = inspect_job(b.jobs, job_id)
    access.require("GET", view.dag_id)
    return {**job_json(view, spark_ui()), "can_edit": access.allowed("PUT", view.dag_id)}


@router.get("/api/task-instance")
def task_instance(
    user: GetUserDep,
    b: Jobs,
    dag_id: str,
    run_id: str,
    task_id: str,
    map_index: Annotated[str | None, Query(description="an integer; missing or unfilled means -1")] = None,
) -> dict[str, Any]:
    """The job of one task instance (from its XCom, or its lease while it runs): reused or computed."""
    index = parse_map_index(map_index)
    access = Access(user)
    access.require("GET", dag_id)
    payload = xcom_payload(dag_id, run_id, task_id, index)
    job_id = payload.get("job_id") if payload else None
    running = False
    if not job_id:  # still running (or failed before it returned): its lease names it
        job_id = running_job(b.jobs, dag_id, run_id, task_id, index)
        running = job_id is not None
    task = {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": index}
    if not job_id:
        return {"job_id": None, "task": task}
    detail = job_detail(b, access, job_id)
    attempt = (detail.get("entry") or {}).get("attempt") or {}
    produced_here = (attempt.get("dag_id"), attempt.get("run_id"), attempt.get("task_id")) == (dag_id, run_id, task_id)
    detail["task"] = {
        **task,
        "payload": payload,
        # reused: this task found the job done and did not start Spark
        "reused": bool(payload.get("skipped")) if payload else None,
        "produced_entry": produced_here if detail.get("entry") else None,
        "running": bool(running),
    }
    return detail


@router.get("/api/leases")
def leases(user: GetUserDep, b: Jobs) -> dict[str, Any]:
    """Leases held now (who computes what), with the running attempt's intent."""
    access = Access(user)
    out = [held_lease_json(h) for h in held_leases(b.jobs) if access.allowed("GET", lease_dag(h.holder))]
    return {"namespace": b.store.namespace, "leases": out}
