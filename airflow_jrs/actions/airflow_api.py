"""Airflow's REST API v2, the few calls the actions need: a DAG's runs, clears, backfills.

Recomputing a job is "forget its result, then clear its task instance" (:mod:`airflow_jrs.actions.recompute`,
for ``airflow-jrs recompute`` and the Job results page alike). The clear goes through Airflow's public API, as the
UI's own Clear does, so Airflow authorizes it, writes its audit log and queues the run again;
nothing here touches Airflow's database. A missing-only backfill (:mod:`airflow_jrs.actions.backfill`)
creates an Airflow backfill (``POST /api/v2/backfills``) or runs with their logical dates
(``POST .../dagRuns``) the same way. Plain ``urllib`` (no Airflow
import): the CLI, and the test bench's REST client, run on any machine that reaches the API server.

Authentication is any API client's: a JWT, given (``AIRFLOW_JRS_API_TOKEN``, or the user's own
token the UI sent to the plugin), or fetched from ``POST /auth/token`` with a user name and
password (``AIRFLOW_JRS_API_USERNAME`` / ``AIRFLOW_JRS_API_PASSWORD``; the simple and FAB auth
managers both serve it). ``AIRFLOW_JRS_API_TIMEOUT`` sets how long a call waits for its answer.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from airflow_jrs.exceptions import JrsError

#: Environment variables the CLI reads (flags win over them).
URL_ENV = "AIRFLOW_JRS_API_URL"
TOKEN_ENV = "AIRFLOW_JRS_API_TOKEN"
USERNAME_ENV = "AIRFLOW_JRS_API_USERNAME"
PASSWORD_ENV = "AIRFLOW_JRS_API_PASSWORD"
#: Seconds a call waits for the API server's answer (default 30). Longer for an API server whose
#: database can hold a request for as long (SQLite waits up to 30 s for its lock): a client that
#: gives up with it never hears whether the call was done.
TIMEOUT_ENV = "AIRFLOW_JRS_API_TIMEOUT"
DEFAULT_TIMEOUT = 30.0
DEFAULT_URL = "http://localhost:8080"
#: How often a backfill creation answered 503 (metadata DB locked, rolled back) is asked again.
LOCKED_TRIES = 8
#: Rows asked per page of a list call (``[api] maximum_page_limit`` is 100 by default).
PAGE = 100


class AirflowApiError(JrsError):
    """A call to Airflow's REST API failed; the message names the URL, the answer and what to do."""

    def __init__(
        self, message: str, *, status: int | None = None, unreachable: bool = False, timed_out: bool = False
    ) -> None:
        super().__init__(message)
        self.status = status
        self.unreachable = unreachable
        #: The server took longer than the client's timeout: it may still have done what was asked.
        self.timed_out = timed_out


def _hint(status: int, path: str) -> str:
    backfill = path.startswith("/api/v2/backfills")
    action = "create backfills" if backfill else "trigger runs" if path.endswith("/dagRuns") else "clear task instances"
    if path.startswith("/jrs/"):  # the airflow-jrs plugin's own API, on the same server
        action = "read the DAGs"
        if status == 404:
            return "the API server has no airflow-jrs plugin route here: install or upgrade airflow-jrs there"
        if status == 403:
            return "ask for read access to the DAG"
    if status == 401:
        return (
            f"the API refused the credentials: set {TOKEN_ENV}, or {USERNAME_ENV} and {PASSWORD_ENV}, "
            f"to a user that may {action}"
        )
    if status == 403:
        return f"this user may not {action} of the DAG; ask for edit access to it"
    if status == 404:
        return "no such DAG, run or backfill in Airflow (deleted, not parsed yet, or another deployment?)"
    if status == 409 and backfill:
        return "a backfill of this DAG is still active (Airflow allows one per DAG): wait for it, or cancel it"
    return "see the API server's log"


def backfill_body(
    dag_id: str,
    from_date: datetime,
    to_date: datetime,
    *,
    reprocess_behavior: str = "none",
    max_active_runs: int | None = None,
) -> dict[str, Any]:
    """The body of ``POST /api/v2/backfills`` (and of its ``/dry_run``, without ``max_active_runs``).

    Dates are sent as aware ISO-8601 UTC (a naive one means UTC, as in Airflow's CLI).
    ``reprocess_behavior`` is Airflow's: ``none``, ``failed`` or ``completed``."""
    body: dict[str, Any] = {
        "dag_id": dag_id,
        "from_date": iso_utc(from_date),
        "to_date": iso_utc(to_date),
        "reprocess_behavior": reprocess_behavior,
    }
    if max_active_runs is not None:
        body["max_active_runs"] = max_active_runs
    return body


def iso_utc(value: datetime) -> str:
    """``2013-01-01T00:00:00Z``: an aware timestamp the API reads the same everywhere."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def call_json(
    base_url: str, method: str, path: str, body: Any = None, *, token: str | None = None, timeout: float = 30.0
) -> Any:
    """One JSON call to the API; ``urllib``'s ``HTTPError`` and ``URLError`` propagate, for the
    caller to word (the CLI names what to do, a test keeps the status and the body)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base_url.rstrip("/") + path, data=data, method=method)
    req.add_header("Accept", "application/json")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        text = resp.read().decode()
    return json.loads(text) if text else None


def every_page(
    get: Callable[[str], Any], path: str, key: str, query: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """All rows of a list call, ``get`` answering one page. The API server caps ``limit`` at
    ``[api] maximum_page_limit`` (100 by default) whatever is asked, so a range of years must be
    read page by page."""
    rows: list[dict[str, Any]] = []
    while True:
        params = urllib.parse.urlencode({**(query or {}), "limit": PAGE, "offset": len(rows)})
        doc = get(f"{path}?{params}")
        page = list(doc.get(key, []))
        rows += page
        if not page or len(rows) >= int(doc.get("total_entries", 0)):
            return rows


def _timeout_from_environment() -> float:
    """``$AIRFLOW_JRS_API_TIMEOUT`` in seconds, or the default; a bad value is refused, never guessed."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise AirflowApiError(
            f"{TIMEOUT_ENV}={text!r} is not a number of seconds above 0; set it to how long a call to "
            f"Airflow's API may wait for its answer (for example 90), or unset it for {DEFAULT_TIMEOUT:g} s"
        )
    return value


class AirflowApi:
    """A few REST API v2 calls with one bearer token."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        username: str | None = None,
        password: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
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
            timeout=_timeout_from_environment(),
        )

    @property
    def has_credentials(self) -> bool:
        return bool(self._token or (self.username and self.password))

    # -- plumbing
    def _call(self, method: str, path: str, body: Any = None, *, auth: bool = True) -> Any:
        """One call; a ``GET`` that timed out is asked once more (it changes nothing, and an API
        server on SQLite can stall a request behind the scheduler's writes for seconds)."""
        try:
            return self._call_once(method, path, body, auth=auth)
        except AirflowApiError as exc:
            if not (exc.timed_out and method == "GET"):
                raise
            return self._call_once(method, path, body, auth=auth)

    def _call_once(self, method: str, path: str, body: Any = None, *, auth: bool = True) -> Any:
        try:
            return call_json(
                self.base_url, method, path, body, token=self.token() if auth else None, timeout=self.timeout
            )
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            raise AirflowApiError(
                f"{method} {self.base_url}{path} answered HTTP {exc.code}: {detail}; {_hint(exc.code, path)}",
                status=exc.code,
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            timed_out = isinstance(reason, TimeoutError)
            what = f"{method} {path.split('?')[0]} got no answer in {self.timeout:g} s" if timed_out else str(reason)
            raise AirflowApiError(
                f"cannot reach Airflow's API at {self.base_url} ({what}); is the api-server running? "
                f"Give its URL with --airflow-url or {URL_ENV}",
                unreachable=True,
                timed_out=timed_out,
            ) from None

    def token(self) -> str:
        """The bearer token: the one given, or one exchanged for the user name and password
        (``POST /auth/token``) on first use and kept."""
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
        """The DAG's runs with a logical date in ``[start, end]``, every page of them."""
        query = {"logical_date_gte": iso_utc(start), "logical_date_lte": iso_utc(end), "order_by": "logical_date"}
        return self.every_page(f"/api/v2/dags/{_q(dag_id)}/dagRuns", "dag_runs", query)

    def every_page(self, path: str, key: str, query: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """All rows of a list call (:func:`every_page`)."""
        return every_page(lambda page: self._call("GET", page), path, key, query)

    def forget_token(self) -> None:
        """Drop an exchanged token (expired: the next call fetches a new one); a given token stays."""
        if self.username and self.password:
            self._token = None

    def clear(
        self, dag_id: str, run_id: str, task_ids: Sequence[str], *, dry_run: bool = False
    ) -> list[dict[str, Any]]:
        """Clear the tasks (and what runs after them: the cleanup) in one run, as the UI's Clear
        does; the run is queued again. Returns the cleared task instances (with their rendered
        fields). ``dry_run`` asks Airflow which ones it would clear, by the same rule."""
        body = {
            "dry_run": dry_run,
            "dag_run_id": run_id,
            "task_ids": list(task_ids),
            "only_failed": False,
            "include_downstream": True,
            "reset_dag_runs": True,
        }
        doc = self._call("POST", f"/api/v2/dags/{_q(dag_id)}/clearTaskInstances", body)
        return list(doc.get("task_instances", []))

    def rendered_fields(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> dict[str, Any]:
        """The task instance's rendered template fields as Airflow kept them from its last try
        (``{}`` when it has none): Airflow 3.2's dry run of a clear returns them empty."""
        path = f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances/{_q(task_id)}"
        if map_index >= 0:
            path += f"/{int(map_index)}"
        try:
            doc = self._call("GET", path)
        except AirflowApiError as exc:
            if exc.status == 404:
                return {}
            raise
        fields = doc.get("rendered_fields") if isinstance(doc, dict) else None
        return dict(fields) if isinstance(fields, dict) else {}

    def xcom(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> Any:
        """The task instance's ``return_value`` XCom, ``None`` when it has none."""
        path = f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances/{_q(task_id)}/xcomEntries/return_value"
        try:
            doc = self._call("GET", f"{path}?map_index={int(map_index)}&deserialize=true&stringify=false")
        except AirflowApiError as exc:
            if exc.status == 404:
                return None
            raise
        return doc.get("value") if isinstance(doc, dict) else None

    def jrs_stats(self, *, since: datetime | None = None, dag_id: str | None = None) -> dict[str, Any]:
        """``GET /jrs/api/stats`` of the airflow-jrs plugin on the API server: the Spark time
        figures the dashboard shows (:mod:`airflow_jrs.views.stats`), for the DAGs this user may read."""
        query = {k: v for k, v in (("since", iso_utc(since) if since else None), ("dag_id", dag_id)) if v}
        suffix = f"?{urllib.parse.urlencode(query)}" if query else ""
        return dict(self._call("GET", f"/jrs/api/stats{suffix}"))

    def create_backfill(
        self, dag_id: str, from_date: datetime, to_date: datetime, *, reprocess_behavior: str, max_active_runs: int
    ) -> dict[str, Any]:
        """``POST /api/v2/backfills``: Airflow creates a run (run type ``backfill``) for every interval
        of ``[from_date, to_date]`` at once; the scheduler starts at most ``max_active_runs`` of them."""
        body = backfill_body(
            dag_id, from_date, to_date, reprocess_behavior=reprocess_behavior, max_active_runs=max_active_runs
        )
        for attempt in range(1, LOCKED_TRIES + 1):
            try:
                return dict(self._call("POST", "/api/v2/backfills", body))
            except AirflowApiError as exc:
                # 503: the metadata DB was locked (SQLite under a busy scheduler); Airflow rolled the
                # creation back, so asking again is safe.
                if exc.status != 503 or attempt == LOCKED_TRIES:
                    raise
                time.sleep(0.5 * attempt)
        raise AssertionError("unreachable")

    def backfill(self, backfill_id: int) -> dict[str, Any]:
        return dict(self._call("GET", f"/api/v2/backfills/{int(backfill_id)}"))

    def active_backfills(self, dag_id: str) -> list[dict[str, Any]]:
        """The DAG's backfills not marked complete yet (Airflow runs one per DAG at a time)."""
        rows = self.every_page("/api/v2/backfills", "backfills", {"dag_id": dag_id})
        return [b for b in rows if not b.get("completed_at")]

    def cancel_backfill(self, backfill_id: int) -> dict[str, Any]:
        """``PUT /api/v2/backfills/{id}/cancel``: fails its queued runs, pauses it and marks it complete
        at once. Only to stop a backfill: a run of a cancelled (paused) backfill that is cleared
        later stays queued forever (the scheduler skips paused backfills; a complete one cannot
        be unpaused), so it is no way to complete a finished backfill early."""
        return dict(self._call("PUT", f"/api/v2/backfills/{int(backfill_id)}/cancel"))

    def trigger_run(
        self,
        dag_id: str,
        logical_date: datetime,
        data_interval: tuple[datetime, datetime] | None,
        *,
        note: str | None = None,
    ) -> dict[str, Any]:
        """``POST /api/v2/dags/{dag_id}/dagRuns`` with a logical date (and the timetable's data
        interval, which Airflow would otherwise infer from the trigger): a queued run of type
        ``manual``. HTTP 409 when the DAG has a run at that logical date already."""
        body: dict[str, Any] = {"logical_date": iso_utc(logical_date)}
        if data_interval is not None:
            body["data_interval_start"] = iso_utc(data_interval[0])
            body["data_interval_end"] = iso_utc(data_interval[1])
        if note:
            body["note"] = note
        return dict(self._call("POST", f"/api/v2/dags/{_q(dag_id)}/dagRuns", body))

    def clear_run(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """Clear every task instance of one run and queue the run again (the UI's Clear on a run)."""
        body = {"dry_run": False, "dag_run_id": run_id, "only_failed": False, "reset_dag_runs": True}
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
