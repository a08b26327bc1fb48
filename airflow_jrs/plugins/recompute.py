"""How the page reaches Airflow's REST API as the signed-in user: their token, and the URL.

Recompute (one job or a date range) and the missing-only backfill call Airflow's own REST API
(:mod:`airflow_jrs.actions`) with the user's own token: Airflow authorizes each call, writes its
audit log, queues the runs. The URL is the deployment's own (:func:`airflow_root`), never one
the request names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from fastapi import HTTPException, Request

if TYPE_CHECKING:
    pass


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
