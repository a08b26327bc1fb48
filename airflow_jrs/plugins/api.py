"""The Job results app: a JSON API over the job result store, and the pages that use it.

Security, in the order a request meets it:

* Airflow mounts plugin apps *without* its own authentication, so the whole app depends on
  Airflow's ``requires_authenticated`` (the ``_token`` cookie the UI holds, or a bearer token,
  checked by Airflow's auth manager): no token, no byte, pages and assets included.
* Each job is authorized against the DAG of the attempt that wrote its result (``GET`` to read,
  ``PUT`` to act, as Airflow's own DAG routes do); a job without a known DAG needs access to
  all DAGs. Listings leave out what the user may not read.
* Actions take a JSON body naming the job again (``{"confirm": job_id}``): a JSON body cannot
  come from a cross-site form, and a stray click on the wrong row cannot act.
* Answers carry job data only: never the connection, and error texts have the connection's
  password masked should a driver ever print it.

Who may see what, and the masking, live in :mod:`airflow_jrs.plugins.security`; what a job
is and how it reads as JSON, in :mod:`airflow_jrs.views` (the CLI shows the same views); which
job a task instance ran, in :mod:`airflow_jrs.plugins.task_instance`.

Handlers are plain ``def``: FastAPI runs them in its threadpool, where the store's sync API may
block without stalling the API server's event loop.
"""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from airflow.api_fastapi.core_api.security import GetUserDep, requires_authenticated
from airflow.api_fastapi.logging.decorators import action_logging
from airflow.configuration import conf
from fastapi import Body, Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse
from starlette.responses import Response

from airflow_jrs.exceptions import (
    CorruptIntentError,
    JobResultEntryChangedError,
    JobResultEntryError,
    JrsError,
    NoSuchJobResultError,
    StoreUnavailableError,
)
from airflow_jrs.plugins.security import Access, Backend, Connected, VisibleQuery, actor, who
from airflow_jrs.plugins.task_instance import map_index as parse_map_index
from airflow_jrs.plugins.task_instance import running_job, xcom_payload
from airflow_jrs.store import EntryState, JobStatus
from airflow_jrs.views.job import entry_dag, held_leases, inspect_job, job_dag, lease_dag
from airflow_jrs.views.json import entry_json, held_lease_json, job_json
from airflow_jrs.views.links import SPARK_UI_OPTION

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
PAGES = {"": "index.html", "ti": "ti.html"}
ASSETS = {"app.js": "application/javascript", "style.css": "text/css"}
#: Pages may run their own script and talk to their own origin, nothing else; only Airflow may frame them.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "frame-ancestors 'self'; base-uri 'none'; form-action 'none'"
)
MAX_LIMIT = 500


def spark_ui() -> str | None:
    """The ``[jrs] spark_ui_url`` template, for the Spark links of entries."""
    return conf.get("jrs", SPARK_UI_OPTION, fallback=None)


def _parse_since(since: str | None) -> datetime | None:
    if not since:
        return None
    try:
        value = datetime.fromisoformat(since.replace("Z", "+00:00"))
    except ValueError:
        raise HTTPException(400, f"since={since!r} is not an ISO-8601 date or time") from None
    if value.tzinfo is None:
        from datetime import UTC

        value = value.replace(tzinfo=UTC)
    return value


ConfirmBody = Annotated[dict[str, Any], Body(examples=[{"confirm": "my_dag.my_task.2024-01-01"}])]


def _confirmed(job_id: str, body: dict[str, Any]) -> None:
    if not isinstance(body, dict) or body.get("confirm") != job_id:
        raise HTTPException(400, 'send {"confirm": "<the job id>"} to confirm the action on this job')


# -- the app ------------------------------------------------------------------------------------


def create_app(backend: Backend | None = None) -> FastAPI:
    backend = backend or Backend()
    app = FastAPI(
        title="airflow-jrs: Job results",
        dependencies=[Depends(requires_authenticated())],
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )

    @app.exception_handler(JrsError)
    def _jrs_error(request: Request, exc: JrsError) -> JSONResponse:
        if isinstance(exc, StoreUnavailableError):
            backend.reset()
            code = 503
        elif isinstance(exc, NoSuchJobResultError):
            code = 404
        elif isinstance(exc, (JobResultEntryError, CorruptIntentError)):
            code = 409
        else:
            code = 400
        return JSONResponse({"detail": backend.mask(str(exc)), "error": type(exc).__name__}, status_code=code)

    @app.middleware("http")
    async def _headers(request: Request, call_next: Any) -> Response:
        response: Response = await call_next(request)
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Content-Security-Policy"] = CSP
        return response

    # -- pages and assets (behind authentication like everything else) ------------------------
    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / PAGES[""], media_type="text/html")

    @app.get("/ti", include_in_schema=False)
    def task_instance_page() -> FileResponse:
        return FileResponse(STATIC / PAGES["ti"], media_type="text/html")

    @app.get("/static/{name}", include_in_schema=False)
    def asset(name: str) -> FileResponse:
        if name not in ASSETS:
            raise HTTPException(404, "no such asset")
        return FileResponse(STATIC / name, media_type=ASSETS[name])

    @app.get("/index.html", include_in_schema=False)
    def index_html() -> RedirectResponse:
        return RedirectResponse("./", status_code=307)

    # -- reads -------------------------------------------------------------------------------
    @app.get("/api/health")
    def health(user: GetUserDep) -> dict[str, Any]:
        """Is the store reachable? One PING; the namespace, never the server or its credentials."""
        b = backend.get()
        took = b.store.ping()
        return {"status": "ok", "namespace": b.store.namespace, "ping_ms": round(took * 1000, 2)}

    @app.get("/api/results")
    def results(
        user: GetUserDep,
        state: Annotated[EntryState | None, Query()] = None,
        status: Annotated[JobStatus | None, Query()] = None,
        dag_id: Annotated[str | None, Query()] = None,
        prefix: Annotated[str | None, Query(alias="job_id_prefix")] = None,
        since: Annotated[str | None, Query(description="ISO-8601; entries created at or after")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
        offset: Annotated[int, Query(ge=0)] = 0,
    ) -> dict[str, Any]:
        """Entries newest first, filtered, paged; only jobs of DAGs the user may read."""
        store = backend.get().store
        access = Access(user)
        query = VisibleQuery(
            state=state, status=status, dag_id=dag_id or None, prefix=prefix or None, since=_parse_since(since),
            access=access,
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

    @app.get("/api/results/{job_id:path}")
    def result(user: GetUserDep, job_id: str) -> dict[str, Any]:
        """One job, as ``airflow-jrs show --json`` prints it: entry, history, lease holder, intent,
        heartbeat, stop request, recoveries; an unreadable (quarantined) entry shows as a problem."""
        return job_detail(backend.get(), Access(user), job_id)

    @app.get("/api/task-instance")
    def task_instance(
        user: GetUserDep,
        dag_id: str,
        run_id: str,
        task_id: str,
        map_index: Annotated[str | None, Query(description="an integer; missing or unfilled means -1")] = None,
    ) -> dict[str, Any]:
        """The job of one task instance (from its XCom, or its lease while it runs): reused or computed."""
        index = parse_map_index(map_index)
        access = Access(user)
        access.require("GET", dag_id)
        b = backend.get()
        payload = xcom_payload(dag_id, run_id, task_id, index)
        job_id = payload.get("job_id") if payload else None
        running = False
        if not job_id:  # still running (or failed before it returned): its lease names it
            job_id = running_job(b.jobs, dag_id, run_id, task_id, index)
            running = job_id is not None
        if not job_id:
            return {
                "job_id": None,
                "task": {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": index},
            }
        detail = job_detail(b, access, job_id)
        attempt = (detail.get("entry") or {}).get("attempt") or {}
        produced_here = (attempt.get("dag_id"), attempt.get("run_id"), attempt.get("task_id")) == (
            dag_id,
            run_id,
            task_id,
        )
        detail["task"] = {
            "dag_id": dag_id,
            "run_id": run_id,
            "task_id": task_id,
            "map_index": index,
            "payload": payload,
            # reused: this task found the job done and did not start Spark
            "reused": bool(payload.get("skipped")) if payload else None,
            "produced_entry": produced_here if detail.get("entry") else None,
            "running": bool(running),
        }
        return detail

    @app.get("/api/leases")
    def leases(user: GetUserDep) -> dict[str, Any]:
        """Leases held now (who computes what), with the running attempt's intent."""
        b = backend.get()
        access = Access(user)
        out = [held_lease_json(h) for h in held_leases(b.jobs) if access.allowed("GET", lease_dag(h.holder))]
        return {"namespace": b.store.namespace, "leases": out}

    # -- actions -----------------------------------------------------------------------------
    # Each action also goes to Airflow's audit log (the Log table, "Browse > Audit Log") as
    # Airflow's own routes do: who, which job (the path), the body, whether it was allowed or not.
    @app.post("/api/results/{job_id:path}/forget", dependencies=[Depends(action_logging(event="jrs_forget"))])
    def forget(user: GetUserDep, job_id: str, body: ConfirmBody) -> dict[str, Any]:
        """Forget the result on purpose: the next run of the job computes it again.

        A compare-and-set on the entry read here, and on the one the page showed when the body
        names its ``created_at``: a result written since the person looked is not forgotten."""
        _confirmed(job_id, body)
        b = backend.get()
        entry = b.store.get_entry(job_id)
        Access(user).require("PUT", job_dag(b.store, entry))
        if entry is None:
            raise NoSuchJobResultError(
                f"job {job_id!r} has no result in namespace {b.store.namespace!r}; nothing to forget.",
                job_id=job_id,
                namespace=b.store.namespace,
            )
        shown = body.get("created_at")
        if shown is not None and shown != (entry.created_at.isoformat() if entry.created_at else None):
            raise JobResultEntryChangedError(
                f"job {job_id!r} has a newer result than the one shown; nothing was forgotten. Reload and look again.",
                job_id=job_id,
                namespace=b.store.namespace,
            )
        b.store.forget_result(job_id, expected=entry, actor=actor(user))
        log.warning("Job results: %s forgot job %r", who(user), job_id)
        return {"job_id": job_id, "done": "forgotten", "message": "forgotten (kept in history); the job runs again"}

    @app.post("/api/results/{job_id:path}/recompute", dependencies=[Depends(action_logging(event="jrs_recompute"))])
    def recompute(user: GetUserDep, job_id: str, body: ConfirmBody, request: Request) -> dict[str, Any]:
        """Compute the job again now: forget its result and clear its task instance through
        Airflow's API with the user's token (:mod:`airflow_jrs.plugins.recompute`)."""
        from airflow_jrs.plugins.recompute import recompute_job

        _confirmed(job_id, body)
        b = backend.get()
        Access(user).require("PUT", job_dag(b.store, b.store.get_entry(job_id)))
        done = recompute_job(b.jobs, job_id, body, request, actor(user))
        log.warning("Job results: %s recomputes job %r: %s", who(user), job_id, done["message"])
        return done

    @app.post("/api/results/{job_id:path}/mark-clean", dependencies=[Depends(action_logging(event="jrs_mark_clean"))])
    def mark_clean(user: GetUserDep, job_id: str, body: ConfirmBody) -> dict[str, Any]:
        """Mark a dirty result clean without its cleanup (when its staging data is already gone)."""
        _confirmed(job_id, body)
        b = backend.get()
        Access(user).require("PUT", job_dag(b.store, b.store.get_entry(job_id)))
        changed = b.store.mark_result_as_clean(job_id)
        log.warning("Job results: %s marked job %r clean", who(user), job_id)
        return {"job_id": job_id, "done": "clean", "changed": changed}

    @app.post(
        "/api/results/{job_id:path}/release-quarantine",
        dependencies=[Depends(action_logging(event="jrs_release_quarantine"))],
    )
    def release_quarantine(user: GetUserDep, job_id: str, body: ConfirmBody) -> dict[str, Any]:
        """Drop a quarantined (corrupt) entry after inspection; returns its bytes."""
        _confirmed(job_id, body)
        Access(user).require("PUT", None)  # a corrupt entry names no DAG: only who may edit all
        raw = backend.get().store.release_quarantine(job_id, actor=actor(user))
        log.warning("Job results: %s released job %r from quarantine", who(user), job_id)
        return {"job_id": job_id, "done": "released", "bytes": raw.decode("utf-8", errors="replace")[:4000]}

    @app.post("/api/results/{job_id:path}/stop", dependencies=[Depends(action_logging(event="jrs_stop"))])
    def stop(user: GetUserDep, job_id: str, body: ConfirmBody) -> dict[str, Any]:
        """Ask a running streaming job to stop at its next batch boundary (STOPPED)."""
        return _stream_request(backend.get(), Access(user), user, job_id, body, "stop")

    @app.post("/api/results/{job_id:path}/cancel", dependencies=[Depends(action_logging(event="jrs_cancel"))])
    def cancel(user: GetUserDep, job_id: str, body: ConfirmBody) -> dict[str, Any]:
        """Ask a running streaming job to cancel at once (CANCELED)."""
        return _stream_request(backend.get(), Access(user), user, job_id, body, "cancel")

    return app


def job_detail(b: Connected, access: Access, job_id: str) -> dict[str, Any]:
    """One job (:func:`~airflow_jrs.views.job.inspect_job`), if the user may read its DAG, and
    whether the user may act on it."""
    view = inspect_job(b.jobs, job_id)
    access.require("GET", view.dag_id)
    return {**job_json(view, spark_ui()), "can_edit": access.allowed("PUT", view.dag_id)}


def _stream_request(b: Connected, access: Access, user: Any, job_id: str, body: Any, kind: str) -> dict[str, Any]:
    from airflow_jrs.protocol.stream_requests import request_stream

    _confirmed(job_id, body)
    store = b.store
    holder = b.jobs.lease(job_id).peek()
    try:
        entry = store.get_entry(job_id)
    except JobResultEntryError:
        entry = None
    access.require("PUT", lease_dag(holder) or job_dag(store, entry))
    doc = request_stream(b.jobs, job_id, kind, by=f"Job results page ({who(user)})")
    log.warning("Job results: %s requested %s of job %r", who(user), kind, job_id)
    return {"job_id": job_id, "done": kind, "fence": doc.get("fence")}
