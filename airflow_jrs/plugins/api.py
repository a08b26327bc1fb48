"""The Job results app: a JSON API over the job result store, and the React bundle that uses it.

Security, in the order a request meets it:

* Airflow mounts plugin apps *without* its own authentication, so the whole app depends on
  Airflow's ``requires_authenticated`` (the ``_token`` cookie the UI holds, or a bearer token,
  checked by Airflow's auth manager): no token, no byte, the bundle included.
* Each job is authorized against the DAG of the attempt that wrote its result (``GET`` to read,
  ``PUT`` to act, as Airflow's own DAG routes do); a job without a known DAG needs access to
  all DAGs. Listings leave out what the user may not read.
* Actions take a JSON body naming the job again (``{"confirm": job_id}``): a JSON body cannot
  come from a cross-site form, and a stray click on the wrong row cannot act.
* Answers carry job data only: never the connection, and error texts have the connection's
  password masked should a driver ever print it.

Who may see what, and the masking, live in :mod:`airflow_jrs.plugins.security`; what a job
is and how it reads as JSON, in :mod:`airflow_jrs.views` (the CLI shows the same views); what
each write does, in :mod:`airflow_jrs.actions` (the CLI calls the same functions); which job a
task instance ran, in :mod:`airflow_jrs.plugins.task_instance`. The routes are one router per
resource (:mod:`airflow_jrs.plugins.routes`); this module builds the app around them: the
authentication, the error answers and the headers.
"""

from __future__ import annotations

from typing import Any

from airflow.api_fastapi.core_api.security import requires_authenticated
from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.responses import Response

from airflow_jrs.actions import UI, ActionError
from airflow_jrs.exceptions import (
    CorruptIntentError,
    JobResultEntryError,
    JrsError,
    NoSuchJobResultError,
    StoreUnavailableError,
)
from airflow_jrs.plugins.routes import dags, jobs, pages, results, stats
from airflow_jrs.plugins.routes.deps import HTTP_STATUS
from airflow_jrs.plugins.security import Backend

#: Pages may run their own script and talk to their own origin, nothing else; only Airflow may frame them.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "frame-ancestors 'self'; base-uri 'none'; form-action 'none'"
)


def create_app(backend: Backend | None = None) -> FastAPI:
    backend = backend or Backend()
    app = FastAPI(
        title="airflow-jrs: Job results",
        dependencies=[Depends(requires_authenticated())],
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.backend = backend

    def answer(code: int, exc: Exception) -> JSONResponse:
        text = exc.text(UI) if isinstance(exc, ActionError) else str(exc)  # the page's hint, not the CLI's
        return JSONResponse({"detail": backend.mask(text), "error": type(exc).__name__}, status_code=code)

    @app.exception_handler(JrsError)
    def _jrs_error(request: Request, exc: JrsError) -> JSONResponse:
        if isinstance(exc, StoreUnavailableError):
            backend.reset()
            code = 503
        elif isinstance(exc, ActionError):
            code = HTTP_STATUS[exc.kind]
        elif isinstance(exc, NoSuchJobResultError):
            code = 404
        elif isinstance(exc, (JobResultEntryError, CorruptIntentError)):
            code = 409
        else:
            code = 400
        return answer(code, exc)

    @app.middleware("http")
    async def _headers(request: Request, call_next: Any) -> Response:
        response: Response = await call_next(request)
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Content-Security-Policy"] = CSP
        return response

    for router in (pages.router, results.router, jobs.router, dags.router, stats.router):
        app.include_router(router)
    return app
