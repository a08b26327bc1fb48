"""The Airflow REST API v2 as the UI uses it: a token, DAGs, runs, clears, backfills.

Plain ``urllib`` so that the CLI, tests and benchmarks can drive any Airflow 3 deployment
(ours from :mod:`.local` or a real one) without importing Airflow. Where the product's own
client (:mod:`airflow_jrs.actions.airflow_api`, what ``airflow-jrs recompute`` and ``backfill`` use)
does the same thing, this one calls it, so tests exercise the product's code: the token
exchange and the backfill body. (It imports no Airflow either.)
"""

from __future__ import annotations

import random
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any

from airflow_jrs.actions.airflow_api import AirflowApi, AirflowApiError, backfill_body, call_json, every_page

TERMINAL_RUN_STATES = frozenset({"success", "failed"})


class DeploymentError(RuntimeError):
    """The deployment did not start, a component died, or a wait timed out (the message has the logs' tail)."""


def iso(value: str | date | datetime) -> str:
    """An aware ISO-8601 timestamp for the REST API (dates mean midnight UTC)."""
    if isinstance(value, str):
        if "T" not in value:
            return f"{value}T00:00:00Z"
        return value
    if not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day, tzinfo=UTC)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _instant(value: str | date | datetime) -> datetime:
    return datetime.fromisoformat(iso(value).replace("Z", "+00:00"))


def _backfill_body(
    dag_id: str,
    from_date: str | date | datetime,
    to_date: str | date | datetime,
    reprocess_behavior: str,
    max_active_runs: int | None = None,
) -> dict[str, Any]:
    return backfill_body(
        dag_id,
        _instant(from_date),
        _instant(to_date),
        reprocess_behavior=reprocess_behavior,
        max_active_runs=max_active_runs,
    )


#: How long one API call is retried while SQLite answers "database is locked".
LOCKED_RETRY_SECONDS = 180.0


class ApiError(DeploymentError):
    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        super().__init__(f"{method} {path} -> HTTP {status}: {body[:2000]}")
        self.status = status
        self.body = body


def sqlite_locked(exc: BaseException) -> bool:
    """Whether an API call failed on SQLite's lock: rolled back, so the same call may be made again."""
    if isinstance(exc, ApiError):
        return exc.status in (500, 503) and "database is locked" in exc.body.lower()
    return "database is locked" in str(exc).lower()


class AirflowClient:
    """The REST API v2 calls the UI makes, with a SimpleAuthManager token (renewed on 401)."""

    def __init__(self, base_url: str, username: str, password: str, *, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.username = username
        self.password = password
        self.timeout = timeout
        self._token: str | None = None

    # -- plumbing
    def _raw(self, method: str, path: str, body: Any = None, *, token: str | None = None) -> Any:
        try:
            return call_json(self.base_url, method, path, body, token=token, timeout=self.timeout)
        except urllib.error.HTTPError as exc:
            raise ApiError(method, path, exc.code, exc.read().decode(errors="replace")) from None

    def token(self) -> str:
        """A token from ``POST /auth/token``, exchanged by the product's client (kept until a 401)."""
        if self._token is None:
            api = AirflowApi(self.base_url, username=self.username, password=self.password, timeout=self.timeout)
            try:
                self._token = api.token()
            except AirflowApiError as exc:
                raise ApiError("POST", "/auth/token", exc.status or 0, str(exc)) from None
        return self._token

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """One call; renews the token on 401 and retries while SQLite is locked (rolled back).

        A lock that no busy timeout waits out (WAL's read-to-write upgrade after another write)
        comes back as HTTP 500 "Database error" (3.3's handler of SQLAlchemy errors) or 503; the deployment exposes the
        error's text (``[api] expose_stacktrace``), so only "database is locked" is retried, and
        each retry is said on stderr. Retried for :data:`LOCKED_RETRY_SECONDS`: under load the
        lock came back at once on 16 calls in a row over 28 s (a gate, 3 Dec 2026), so a count
        of tries gave up while the scheduler was still busy.
        """
        deadline = time.monotonic() + LOCKED_RETRY_SECONDS
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._raw(method, path, body, token=self.token())
            except ApiError as exc:
                if exc.status == 401:
                    self._token = None
                    return self._raw(method, path, body, token=self.token())
                pause = min(0.5 * attempt, 5.0) * random.uniform(0.5, 1.5)  # apart from the scheduler's beat
                if not sqlite_locked(exc) or time.monotonic() + pause > deadline:
                    raise
                print(f"[jrs-deployment] {method} {path}: SQLite locked, retry {attempt}", file=sys.stderr)
                time.sleep(pause)

    def health(self) -> dict[str, Any]:
        return self._raw("GET", "/api/v2/monitor/health")  # type: ignore[no-any-return]

    # -- DAGs
    def dag(self, dag_id: str) -> dict[str, Any]:
        return self.request("GET", f"/api/v2/dags/{_q(dag_id)}")  # type: ignore[no-any-return]

    def import_errors(self) -> list[dict[str, Any]]:
        return list(self.request("GET", "/api/v2/importErrors")["import_errors"])

    def set_paused(self, dag_id: str, paused: bool) -> dict[str, Any]:
        return self.request("PATCH", f"/api/v2/dags/{_q(dag_id)}", {"is_paused": paused})  # type: ignore[no-any-return]

    def unpause(self, dag_id: str) -> dict[str, Any]:
        return self.set_paused(dag_id, False)

    def pause(self, dag_id: str) -> dict[str, Any]:
        return self.set_paused(dag_id, True)

    # -- runs
    def trigger(
        self,
        dag_id: str,
        logical_date: str | date | datetime | None,
        *,
        run_id: str | None = None,
        conf: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Trigger a run as the UI's "Trigger" button does (``logical_date`` may be None)."""
        body: dict[str, Any] = {"logical_date": iso(logical_date) if logical_date is not None else None}
        if run_id:
            body["dag_run_id"] = run_id
        if conf:
            body["conf"] = dict(conf)
        return self.request("POST", f"/api/v2/dags/{_q(dag_id)}/dagRuns", body)  # type: ignore[no-any-return]

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return self.request("GET", f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}")  # type: ignore[no-any-return]

    def every_page(self, path: str, key: str, query: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        """All rows of a list call (the product's :func:`~airflow_jrs.actions.airflow_api.every_page`)."""
        return every_page(lambda page: self.request("GET", page), path, key, query)

    def dag_runs(self, dag_id: str, *, limit: int | None = None) -> list[dict[str, Any]]:
        """The DAG's runs by logical date, every page (the first ``limit`` when given)."""
        runs = self.every_page(f"/api/v2/dags/{_q(dag_id)}/dagRuns", "dag_runs", {"order_by": "logical_date"})
        return runs[:limit] if limit is not None else runs

    def delete_dag_run(self, dag_id: str, run_id: str) -> None:
        self.request("DELETE", f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}")

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        return self.every_page(f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances", "task_instances")

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        return {ti["task_id"]: ti["state"] for ti in self.task_instances(dag_id, run_id)}

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> Any:
        path = f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances/{_q(task_id)}/xcomEntries/{_q(key)}"
        return self.request("GET", path + "?deserialize=true&stringify=false")["value"]

    def wait_for_run(self, dag_id: str, run_id: str, *, timeout: float = 600.0, poll: float = 1.0) -> dict[str, Any]:
        """Poll until the run is success/failed; return it (raise on timeout, with task states)."""
        deadline = time.monotonic() + timeout
        while True:
            run = self.dag_run(dag_id, run_id)
            if run["state"] in TERMINAL_RUN_STATES:
                return run
            if time.monotonic() > deadline:
                raise DeploymentError(
                    f"run {dag_id}/{run_id} still {run['state']} after {timeout:.0f}s; "
                    f"tasks: {self.task_states(dag_id, run_id)}"
                )
            time.sleep(poll)

    def clear(
        self,
        dag_id: str,
        run_id: str,
        task_ids: Sequence[str],
        *,
        include_downstream: bool = True,
        only_failed: bool = False,
    ) -> list[dict[str, Any]]:
        """Clear task instances as the UI's "Clear" does (the run goes back to queued)."""
        body = {
            "dry_run": False,
            "dag_run_id": run_id,
            "task_ids": list(task_ids),
            "only_failed": only_failed,
            "include_downstream": include_downstream,
            "reset_dag_runs": True,
        }
        doc = self.request("POST", f"/api/v2/dags/{_q(dag_id)}/clearTaskInstances", body)
        return list(doc.get("task_instances", []))

    # -- backfills
    def create_backfill(
        self,
        dag_id: str,
        from_date: str | date | datetime,
        to_date: str | date | datetime,
        *,
        reprocess_behavior: str = "none",
        max_active_runs: int = 2,
    ) -> dict[str, Any]:
        body = _backfill_body(dag_id, from_date, to_date, reprocess_behavior, max_active_runs)
        return self.request("POST", "/api/v2/backfills", body)  # type: ignore[no-any-return]

    def backfill_dry_run(
        self,
        dag_id: str,
        from_date: str | date | datetime,
        to_date: str | date | datetime,
        *,
        reprocess_behavior: str = "none",
    ) -> list[str]:
        """Logical dates a backfill would run (``POST /api/v2/backfills/dry_run``)."""
        doc = self.request(
            "POST", "/api/v2/backfills/dry_run", _backfill_body(dag_id, from_date, to_date, reprocess_behavior)
        )
        return [b["logical_date"] for b in doc["backfills"] if b.get("logical_date")]

    def backfills(self, dag_id: str) -> list[dict[str, Any]]:
        return self.every_page("/api/v2/backfills", "backfills", {"dag_id": dag_id})

    def backfill(self, backfill_id: int) -> dict[str, Any]:
        return self.request("GET", f"/api/v2/backfills/{backfill_id}")  # type: ignore[no-any-return]

    def cancel_backfill(self, backfill_id: int) -> dict[str, Any]:
        return self.request("PUT", f"/api/v2/backfills/{backfill_id}/cancel")  # type: ignore[no-any-return]


def _q(part: str) -> str:
    return urllib.parse.quote(part, safe="")
