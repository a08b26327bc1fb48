"""Airflow's REST API v2, the few calls a recompute needs: find a DAG's runs, clear task instances.

Recomputing a job is "forget its result, then clear its task instance" (:mod:`airflow_jrs.cli.recompute`,
the Job results page's Recompute button). The clear goes through Airflow's public API, as the
UI's own Clear does, so Airflow authorizes it, writes its audit log and queues the run again;
nothing here touches Airflow's database. Plain ``urllib`` (no Airflow import): the CLI runs
on any machine that reaches the API server.

Authentication is any API client's: a JWT, given (``AIRFLOW_JRS_API_TOKEN``, or the user's own
token the UI sent to the plugin), or fetched from ``POST /auth/token`` with a user name and
password (``AIRFLOW_JRS_API_USERNAME`` / ``AIRFLOW_JRS_API_PASSWORD``; the simple and FAB auth
managers both serve it).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from airflow_jrs.exceptions import JrsError

#: Environment variables the CLI reads (flags win over them).
URL_ENV = "AIRFLOW_JRS_API_URL"
TOKEN_ENV = "AIRFLOW_JRS_API_TOKEN"
USERNAME_ENV = "AIRFLOW_JRS_API_USERNAME"
PASSWORD_ENV = "AIRFLOW_JRS_API_PASSWORD"
DEFAULT_URL = "http://localhost:8080"


class AirflowApiError(JrsError):
    """A call to Airflow's REST API failed; the message names the URL, the answer and what to do."""

    def __init__(self, message: str, *, status: int | None = None, unreachable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.unreachable = unreachable


def _hint(status: int) -> str:
    if status == 401:
        return (
            f"the API refused the credentials: set {TOKEN_ENV}, or {USERNAME_ENV} and {PASSWORD_ENV}, "
            "to a user that may clear task instances"
        )
    if status == 403:
        return "this user may not clear task instances of the DAG; ask for edit access to it"
    if status == 404:
        return "no such DAG or run in Airflow (deleted, or another deployment?)"
    return "see the API server's log"


class AirflowApi:
    """A few REST API v2 calls with one bearer token."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        username: str | None = None,
        password: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self.username = username
        self.password = password
        self.timeout = timeout

    @classmethod
    def from_environment(cls, base_url: str | None = None) -> AirflowApi:
        """The API the CLI talks to: ``base_url`` > ``$AIRFLOW_JRS_API_URL`` > ``[api] base_url`` >
        ``http://localhost:8080``; credentials from the environment (see the module docstring)."""
        url = base_url or os.environ.get(URL_ENV) or _configured_base_url() or DEFAULT_URL
        return cls(
            url,
            token=os.environ.get(TOKEN_ENV) or None,
            username=os.environ.get(USERNAME_ENV) or None,
            password=os.environ.get(PASSWORD_ENV) or None,
        )

    @property
    def has_credentials(self) -> bool:
        return bool(self._token or (self.username and self.password))

    # -- plumbing
    def _call(self, method: str, path: str, body: Any = None, *, auth: bool = True) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if auth:
            req.add_header("Authorization", f"Bearer {self.token()}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                text = resp.read().decode()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            raise AirflowApiError(
                f"{method} {self.base_url}{path} answered HTTP {exc.code}: {detail}; {_hint(exc.code)}", status=exc.code
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise AirflowApiError(
                f"cannot reach Airflow's API at {self.base_url} ({reason}); is the api-server running? "
                f"Give its URL with --airflow-url or {URL_ENV}",
                unreachable=True,
            ) from None
        return json.loads(text) if text else None

    def token(self) -> str:
        if self._token is None:
            if not (self.username and self.password):
                raise AirflowApiError(
                    f"no credentials for Airflow's API at {self.base_url}: set {TOKEN_ENV}, or {USERNAME_ENV} "
                    f"and {PASSWORD_ENV}"
                )
            doc = self._call("POST", "/auth/token", {"username": self.username, "password": self.password}, auth=False)
            self._token = str(doc["access_token"])
        return self._token

    # -- calls
    def check_dag(self, dag_id: str) -> None:
        """Can this client reach the API, authenticate and read the DAG? Raises what it cannot:
        called before anything is forgotten, so a failure changes nothing."""
        self._call("GET", f"/api/v2/dags/{_q(dag_id)}")

    def dag_runs(self, dag_id: str, start: datetime, end: datetime) -> list[dict[str, Any]]:
        """The DAG's runs with a logical date in ``[start, end]``."""
        query = urllib.parse.urlencode(
            {"logical_date_gte": start.isoformat(), "logical_date_lte": end.isoformat(), "limit": 1000}
        )
        doc = self._call("GET", f"/api/v2/dags/{_q(dag_id)}/dagRuns?{query}")
        return list(doc.get("dag_runs", []))

    def clear(self, dag_id: str, run_id: str, task_ids: Sequence[str]) -> list[dict[str, Any]]:
        """Clear the tasks (and what runs after them: the cleanup) in one run, as the UI's Clear
        does; the run is queued again. Returns the cleared task instances."""
        body = {
            "dry_run": False,
            "dag_run_id": run_id,
            "task_ids": list(task_ids),
            "only_failed": False,
            "include_downstream": True,
            "reset_dag_runs": True,
        }
        doc = self._call("POST", f"/api/v2/dags/{_q(dag_id)}/clearTaskInstances", body)
        return list(doc.get("task_instances", []))


def _q(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def _configured_base_url() -> str | None:
    try:
        from airflow.configuration import conf

        return conf.get("api", "base_url", fallback=None) or None
    except Exception:  # no Airflow configuration on this machine: the next default applies
        return None
