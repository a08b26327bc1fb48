"""What a person does to one job, each a POST naming the job again (``{"confirm": job_id}``).

The writes are :mod:`airflow_jrs.actions.writes` (the CLI's too); here: who may (``PUT`` on the
job's DAG, or on every DAG for a job that names none), and Airflow's audit log (the Log table,
"Browse > Audit Log", as Airflow's own routes write it: who, which job, the body, allowed or not).
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.api_fastapi.core_api.security import GetUserDep
from airflow.api_fastapi.logging.decorators import action_logging
from fastapi import APIRouter, Depends, Request

from airflow_jrs.actions import writes
from airflow_jrs.exceptions import JobResultEntryError
from airflow_jrs.plugins.routes.deps import ConfirmBody, Jobs, confirmed, user_api
from airflow_jrs.plugins.security import Access, Connected, actor, who
from airflow_jrs.views.job import job_dag, lease_dag

log = logging.getLogger("airflow_jrs.plugins.api")

router = APIRouter()


def _audited(event: str) -> list[Any]:
    return [Depends(action_logging(event=event))]


@router.post("/api/results/{job_id:path}/forget", dependencies=_audited("jrs_forget"))
def forget(user: GetUserDep, b: Jobs, job_id: str, body: ConfirmBody) -> dict[str, Any]:
    """Forget the result on purpose: the next run of the job computes it again.

    A compare-and-set on the entry read here, and on the one the page showed when the body
    names its ``created_at``: a result written since the person looked is not forgotten."""
    confirmed(job_id, body)
    entry = b.store.get_entry(job_id)
    Access(user).require("PUT", job_dag(b.store, entry))
    writes.forget(b.store, job_id, actor(user), shown=body.get("created_at"), entry=entry)  # the entry authorized
    log.warning("Job results: %s forgot job %r", who(user), job_id)
    return {"job_id": job_id, "done": "forgotten", "message": "forgotten (kept in history); the job runs again"}


@router.post("/api/results/{job_id:path}/recompute", dependencies=_audited("jrs_recompute"))
def recompute(user: GetUserDep, b: Jobs, job_id: str, body: ConfirmBody, request: Request) -> dict[str, Any]:
    """Compute the job again now: forget its result and clear its task instance through
    Airflow's API with the user's own token (:func:`airflow_jrs.actions.writes.recompute_job`)."""
    confirmed(job_id, body)
    entry = b.store.get_entry(job_id)
    Access(user).require("PUT", job_dag(b.store, entry))
    done = writes.recompute_job(  # on the entry authorized: a newer one is not recomputed unseen
        b.jobs, user_api(request), job_id, actor(user), shown=body.get("created_at"), entry=entry
    )
    log.warning("Job results: %s recomputes job %r: %s", who(user), job_id, done.message)
    return done.json()


@router.post("/api/results/{job_id:path}/mark-clean", dependencies=_audited("jrs_mark_clean"))
def mark_clean(user: GetUserDep, b: Jobs, job_id: str, body: ConfirmBody) -> dict[str, Any]:
    """Mark a dirty result clean without its cleanup (when its staging data is already gone)."""
    confirmed(job_id, body)
    Access(user).require("PUT", job_dag(b.store, b.store.get_entry(job_id)))
    changed = writes.mark_clean(b.store, job_id, f"namespace {b.store.namespace!r}")
    log.warning("Job results: %s marked job %r clean", who(user), job_id)
    return {"job_id": job_id, "done": "clean", "changed": changed}


@router.post("/api/results/{job_id:path}/release-quarantine", dependencies=_audited("jrs_release_quarantine"))
def release_quarantine(user: GetUserDep, b: Jobs, job_id: str, body: ConfirmBody) -> dict[str, Any]:
    """Drop a quarantined (corrupt) entry after inspection; returns its bytes."""
    confirmed(job_id, body)
    Access(user).require("PUT", None)  # a corrupt entry names no DAG: only who may edit all
    text = writes.release_quarantine(b.store, job_id, actor(user), f"namespace {b.store.namespace!r}")
    log.warning("Job results: %s released job %r from quarantine", who(user), job_id)
    return {"job_id": job_id, "done": "released", "bytes": text[:4000]}


@router.post("/api/results/{job_id:path}/stop", dependencies=_audited("jrs_stop"))
def stop(user: GetUserDep, b: Jobs, job_id: str, body: ConfirmBody) -> dict[str, Any]:
    """Ask a running streaming job to stop at its next batch boundary (STOPPED)."""
    return _stream_request(b, user, job_id, body, "stop")


@router.post("/api/results/{job_id:path}/cancel", dependencies=_audited("jrs_cancel"))
def cancel(user: GetUserDep, b: Jobs, job_id: str, body: ConfirmBody) -> dict[str, Any]:
    """Ask a running streaming job to cancel at once (CANCELED)."""
    return _stream_request(b, user, job_id, body, "cancel")


def _stream_request(b: Connected, user: Any, job_id: str, body: Any, kind: str) -> dict[str, Any]:
    confirmed(job_id, body)
    holder = b.jobs.lease(job_id).peek()
    try:
        entry = b.store.get_entry(job_id)
    except JobResultEntryError:
        entry = None
    Access(user).require("PUT", lease_dag(holder) or job_dag(b.store, entry))
    doc = writes.stream(b.jobs, job_id, kind, by=f"Job results page ({who(user)})")
    log.warning("Job results: %s requested %s of job %r", who(user), kind, job_id)
    return {"job_id": job_id, "done": kind, "fence": doc.get("fence")}
