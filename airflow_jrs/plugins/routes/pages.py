"""The static files, behind authentication like everything else.

The pages are React apps inside Airflow's own UI (:mod:`airflow_jrs.plugins`): the host imports
their bundle from here. ``/static/{path}`` serves any file under ``plugins/static/`` (subfolders
too: the bundle is ``static/ui/main.js``), never one outside it, with its type from its suffix
(``.js`` as ``text/javascript``, which module scripts need).
"""

from __future__ import annotations

import mimetypes
from pathlib import Path
from urllib.parse import quote

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse, RedirectResponse

STATIC = Path(__file__).parent.parent / "static"
#: Types by suffix where the platform's table may lack or differ from what a browser needs.
TYPES = {
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".css": "text/css",
    ".json": "application/json",
    ".map": "application/json",
    ".svg": "image/svg+xml",
    ".html": "text/html",
    ".woff2": "font/woff2",
}

router = APIRouter()

#: Where the Job results app lives in Airflow's UI, relative to this app's root (``/jrs/``).
JOB_RESULTS_PAGE = "../plugin/job-results"


@router.get("/", include_in_schema=False)
def old_page(job_id: str | None = None) -> RedirectResponse:
    """The page before the React app was ``jrs/?job_id=<id>``: tasks that ended before the
    upgrade keep that link in their XCom (the *Job result* extra link), so it still leads to the
    job, now on the React app's page."""
    query = f"?job={quote(job_id, safe='')}" if job_id else ""
    return RedirectResponse(f"{JOB_RESULTS_PAGE}{query}", status_code=307)


@router.get("/static/{path:path}", include_in_schema=False)
def asset(path: str) -> FileResponse:
    root = STATIC.resolve()
    found = (root / path).resolve()
    if not found.is_relative_to(root) or not found.is_file() or any(p.startswith(".") for p in Path(path).parts):
        raise HTTPException(404, "no such asset")
    suffix = found.suffix.lower()
    media = TYPES.get(suffix) or mimetypes.guess_type(found.name)[0] or "application/octet-stream"
    return FileResponse(found, media_type=media)
