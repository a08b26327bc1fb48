"""The Job results page's Recompute button: what ``airflow-jrs recompute JOB_ID`` does, for one job.

Forget the job's result (a compare-and-set on the entry the page showed; the history names the
user), then clear the task instance that computed it through Airflow's own REST API, with the
user's own token: Airflow authorizes the clear, writes its audit log, queues the run again, and
the task computes the job anew. Forget first: a clear before it would let the task reuse the old
result. No conf is involved, so nothing lingers on the run: a later backfill of the date reuses
the new result (:mod:`airflow_jrs.domain.recompute` on requests in a run's conf).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from fastapi import HTTPException, Request

from airflow_jrs.actions.airflow_api import AirflowApi, AirflowApiError
from airflow_jrs.domain.model import HistoryReason
from airflow_jrs.exceptions import JobResultEntryChangedError, NoSuchJobResultError
from airflow_jrs.store import Actor

if TYPE_CHECKING:
    from airflow_jrs.protocol.jobs import JobNamespace


def user_token(request: Request) -> str:
    """The token this request was authenticated with: the bearer header, else the UI's cookie."""
    from airflow.api_fastapi.auth.managers.base_auth_manager import COOKIE_NAME_JWT_TOKEN

    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    token = request.cookies.get(COOKIE_NAME_JWT_TOKEN)
    if not token:
        raise HTTPException(401, "no token to clear the task instance with; sign in to Airflow again")
    return token


def airflow_root(request: Request) -> str:
    """Airflow's API server, from configuration or this server's own socket: never from the request.

    The clear is sent with the user's own token, so the URL it goes to must be one the deployment
    chose. ``request.base_url`` is built from the client's ``Host`` header: a request with
    ``Host: attacker:80`` would have sent the user's bearer token there, and trusted its answer
    (docs/threat-model.md, "The recompute button calls only its own server"). So: ``[api] base_url``
    when it is an absolute URL (what Airflow itself uses for links behind a proxy); else the
    address the client's connection reached on this server (the socket's local address, which
    no header changes), with the scheme from ``[api] ssl_cert`` and the path of a relative
    ``base_url``."""
    from airflow.configuration import conf

    configured = (conf.get("api", "base_url", fallback="") or "").strip()
    parts = urlsplit(configured)
    if parts.scheme in ("http", "https") and parts.netloc:
        return configured.rstrip("/")
    server = request.scope.get("server")
    if not server or server[1] is None:
        raise HTTPException(
            500, "nothing was changed: this API server does not know its own address (a Unix socket?); "
            "set [api] base_url to the URL Airflow's API is reached at",
        )  # fmt: skip
    host, port = server
    host = f"[{host}]" if ":" in host else host
    scheme = "https" if conf.get("api", "ssl_cert", fallback="") else "http"
    return f"{scheme}://{host}:{port}{parts.path.rstrip('/')}"


def recompute_job(
    jobs: JobNamespace, job_id: str, body: dict[str, Any], request: Request, actor: Actor
) -> dict[str, Any]:
    """Forget ``job_id``'s result and clear the task instance that computed it (the caller has
    checked the confirmation and that the user may edit the job's DAG)."""
    store = jobs.results
    entry = store.get_entry(job_id)
    if entry is None:
        raise NoSuchJobResultError(
            f"job {job_id!r} has no result in namespace {store.namespace!r}, so no task instance to clear; its "
            "next run computes it (or use airflow-jrs recompute --dag-id ... with its dates)",
            job_id=job_id,
            namespace=store.namespace,
        )
    shown = body.get("created_at")
    if shown is not None and shown != (entry.created_at.isoformat() if entry.created_at else None):
        raise JobResultEntryChangedError(
            f"job {job_id!r} has a newer result than the one shown; nothing was changed. Reload and look again.",
            job_id=job_id,
            namespace=store.namespace,
        )
    holder = jobs.lease(job_id).peek()
    if holder is not None:
        raise HTTPException(409, f"job {job_id} is running now (lease token {holder.token}): its result will be new")
    attempt = store.full_entry(entry).result.attempt  # a clean reference: from its document
    api = AirflowApi(airflow_root(request), token=user_token(request))
    if attempt is not None:
        try:  # reachable and allowed: fail before anything is forgotten
            api.check_dag(attempt.dag_id)
        except AirflowApiError as exc:
            raise HTTPException(502, f"nothing was changed: {exc}") from None
    store.forget_result(job_id, expected=entry, reason=HistoryReason.RECOMPUTED, actor=actor)
    if attempt is None:
        return {"job_id": job_id, "done": "forgotten", "message": "forgotten (kept in history); its result named "
                "no task instance to clear: the next run of the job computes it"}  # fmt: skip
    where = f"{attempt.dag_id}.{attempt.task_id} in run {attempt.run_id}"
    task: Any = attempt.task_id if attempt.map_index == -1 else [attempt.task_id, attempt.map_index]
    try:
        api.clear(attempt.dag_id, attempt.run_id, [task])
    except AirflowApiError as exc:
        if exc.status == 404:
            return {"job_id": job_id, "done": "forgotten", "message": f"forgotten (kept in history); run "
                    f"{attempt.run_id} is gone from Airflow: the next run of the date computes the job"}  # fmt: skip
        raise HTTPException(
            502, f"forgot the result (kept in history), but could not clear {where}: {exc}. Clear it in the UI."
        ) from None
    return {
        "job_id": job_id,
        "done": "recomputing",
        "dag_id": attempt.dag_id,
        "run_id": attempt.run_id,
        "task_id": attempt.task_id,
        "message": f"forgotten (kept in history) and cleared {where}: it computes the job again now",
    }
