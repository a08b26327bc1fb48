"""A real local Airflow deployment: api-server, scheduler, dag-processor and triggerer as processes.

What ``airflow standalone`` does, but reusable from tests, benchmarks and the CLI, and with
the parts pinned that matter here: LocalExecutor with a fixed number of slots, one JWT secret
for every process (the task processes' Execution API tokens must verify on the api-server),
the Execution API URL on a free port, SimpleAuthManager with an ``admin`` user whose password
we choose (written to the password file before the api-server starts), and the project's DAG
folders as bundles. The metadata database is SQLite in the home unless ``sql_alchemy_conn``
(or ``AIRFLOW__DATABASE__SQL_ALCHEMY_CONN`` pointing at PostgreSQL or MySQL) says otherwise.

    with LocalDeployment(bundles={"dags": "dags"}, env=jrs_env(redis_url, "dev")) as airflow:
        airflow.wait_for_dag("flights_daily")
        airflow.client.unpause("flights_daily")
        run = airflow.client.trigger("flights_daily", logical_date="2013-01-01T00:00:00Z")
        airflow.client.wait_for_run("flights_daily", run["dag_run_id"])

Stopping is always complete: every component runs in its own process group; ``stop()`` first
notes every descendant (task supervisors set their own process group, spark-submit JVMs hang
below them), sends SIGTERM to the groups, waits, then SIGKILLs whatever is left. ``__exit__``
and a failed ``start()`` both stop.

No Airflow import here (the CLI imports this module; Airflow is only ever run as a process).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
COMPONENTS = ("api-server", "dag-processor", "scheduler", "triggerer")
TERMINAL_RUN_STATES = frozenset({"success", "failed"})
TERMINAL_TI_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})
#: ``[database] sql_alchemy_connect_args`` for SQLite: wait up to 30 s for a lock instead of
#: failing at once with "database is locked" (the scheduler, api-server, triggerer and task
#: processes all write; with the 5 s default a busy scheduler loop makes API calls fail).
SQLITE_CONNECT_ARGS: dict[str, Any] = {"timeout": 30}
SIMPLE_AUTH_MANAGER = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
LOCAL_BUNDLE = "airflow.dag_processing.bundles.local.LocalDagBundle"


class DeploymentError(RuntimeError):
    """The deployment did not start, a component died, or a wait timed out (the message has the logs' tail)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


def jrs_env(
    redis_url: str,
    namespace: str,
    *,
    data_dir: str | os.PathLike[str],
    spark_master: str = "local[1]",
    event_log_dir: str | os.PathLike[str] | None = None,
) -> dict[str, str]:
    """Environment that the project's DAGs need: the store connection, a Spark connection, paths.

    ``event_log_dir`` turns Spark event logs on for the flights DAG (one file per application);
    tests count launches with it. ``data_dir`` holds outputs, specs and the flights landing data.
    """
    data = Path(data_dir)
    venv_bin = str(Path(sys.executable).parent)
    env = {
        "AIRFLOW_CONN_JRS_DEFAULT": f"{redis_url}?namespace={namespace}",
        "AIRFLOW_CONN_SPARK_LOCAL": json.dumps({"conn_type": "spark", "host": spark_master}),
        "AIRFLOW__JRS__OUTPUT_ROOT": str(data / "output"),
        "AIRFLOW__JRS__SPEC_ROOT": str(data / "specs"),
        "JRS_FLIGHTS_LANDING": str(data / "landing"),
        "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    if event_log_dir is not None:
        Path(event_log_dir).mkdir(parents=True, exist_ok=True)
        env["JRS_SPARK_EVENT_LOG_DIR"] = Path(event_log_dir).resolve().as_uri()
    return env


# -- REST ------------------------------------------------------------------------------------------
def _backfill_body(
    dag_id: str, from_date: str | date | datetime, to_date: str | date | datetime, reprocess_behavior: str
) -> dict[str, Any]:
    return {
        "dag_id": dag_id,
        "from_date": iso(from_date),
        "to_date": iso(to_date),
        "reprocess_behavior": reprocess_behavior,
    }


class ApiError(DeploymentError):
    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        super().__init__(f"{method} {path} -> HTTP {status}: {body[:2000]}")
        self.status = status
        self.body = body


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
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                text = resp.read().decode()
        except urllib.error.HTTPError as exc:
            raise ApiError(method, path, exc.code, exc.read().decode(errors="replace")) from None
        return json.loads(text) if text else None

    def token(self) -> str:
        if self._token is None:
            doc = self._raw("POST", "/auth/token", {"username": self.username, "password": self.password})
            self._token = doc["access_token"]
        return self._token

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """One call; renews the token on 401 and retries while SQLite is locked (HTTP 503, rolled back)."""
        for attempt in range(1, 9):
            try:
                return self._raw(method, path, body, token=self.token())
            except ApiError as exc:
                if exc.status == 401:
                    self._token = None
                    return self._raw(method, path, body, token=self.token())
                if exc.status != 503 or "locked" not in exc.body.lower() or attempt == 8:
                    raise
                time.sleep(0.5 * attempt)
        raise AssertionError("unreachable")

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

    def dag_runs(self, dag_id: str, *, limit: int = 1000) -> list[dict[str, Any]]:
        doc = self.request("GET", f"/api/v2/dags/{_q(dag_id)}/dagRuns?limit={limit}&order_by=logical_date")
        return list(doc["dag_runs"])

    def delete_dag_run(self, dag_id: str, run_id: str) -> None:
        self.request("DELETE", f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}")

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        doc = self.request("GET", f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances?limit=1000")
        return list(doc["task_instances"])

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
        body = {**_backfill_body(dag_id, from_date, to_date, reprocess_behavior), "max_active_runs": max_active_runs}
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
        return list(self.request("GET", f"/api/v2/backfills?dag_id={_q(dag_id)}&limit=1000")["backfills"])

    def backfill(self, backfill_id: int) -> dict[str, Any]:
        return self.request("GET", f"/api/v2/backfills/{backfill_id}")  # type: ignore[no-any-return]

    def wait_for_backfill(self, backfill_id: int, *, timeout: float = 1800.0, poll: float = 1.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            doc = self.backfill(backfill_id)
            if doc.get("completed_at"):
                return doc
            if time.monotonic() > deadline:
                raise DeploymentError(f"backfill {backfill_id} not complete after {timeout:.0f}s: {doc}")
            time.sleep(poll)


def _q(part: str) -> str:
    return urllib.parse.quote(part, safe="")


# -- processes -------------------------------------------------------------------------------------
@dataclass
class _Component:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


@dataclass
class BackfillResult:
    """A finished backfill: its id, server-side wall time and the state of each run and task."""

    backfill_id: int
    dag_id: str
    wall_seconds: float
    runs: dict[str, str] = field(default_factory=dict)  # logical date -> run state
    tasks: dict[str, dict[str, str | None]] = field(default_factory=dict)  # logical date -> task -> state
    run_ids: dict[str, str] = field(default_factory=dict)  # logical date -> run id


def _parse_ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


class LocalDeployment:
    """api-server + scheduler + dag-processor + triggerer in a temporary (or given) AIRFLOW_HOME.

    :param home: AIRFLOW_HOME (default: a new temporary folder, removed on stop unless ``keep_home``)
    :param bundles: bundle name -> DAG folder (default ``{"dags-folder": <repo>/dags}``)
    :param env: extra environment for every component (connections, ``[jrs]`` config, ...)
    :param parallelism: executor slots (``[core] parallelism`` and the default pool's slots)
    :param api_port: default a free port
    :param sql_alchemy_conn: metadata DB; default: ``AIRFLOW__DATABASE__SQL_ALCHEMY_CONN`` when it
        points at a server database (PostgreSQL, MySQL), else SQLite in the home. The database
        must exist (it is migrated, never reset). ``postgresql+psycopg://`` (psycopg 3) serves
        Airflow's sync and async engines; SQLite gets WAL mode and a 30 s lock timeout, but
        Airflow 3.3.2 on SQLite can still lose a scheduler to a lock race (see
        :meth:`check_alive`): benchmarks belong on PostgreSQL.
    :param username, password: the SimpleAuthManager admin (password default: random)
    :param components: which processes to start (default all four)
    :param max_restarts: how often a dead component is restarted before waits fail
    """

    def __init__(
        self,
        home: str | os.PathLike[str] | None = None,
        *,
        bundles: Mapping[str, str | os.PathLike[str]] | None = None,
        env: Mapping[str, str] | None = None,
        parallelism: int = 2,
        api_port: int | None = None,
        sql_alchemy_conn: str | None = None,
        username: str = "admin",
        password: str | None = None,
        components: Iterable[str] = COMPONENTS,
        keep_home: bool = False,
        log_level: str = "INFO",
        max_restarts: int = 3,
    ) -> None:
        self._temp_home = home is None
        self.home = Path(home) if home is not None else Path(tempfile.mkdtemp(prefix="jrs-airflow-local-"))
        self.keep_home = keep_home
        self.bundles = {name: str(Path(p).resolve()) for name, p in (bundles or {"dags-folder": ROOT / "dags"}).items()}
        self.extra_env = dict(env or {})
        self.parallelism = parallelism
        self.api_port = api_port or free_port()
        self.sql_alchemy_conn = sql_alchemy_conn or self._default_db()
        self.username = username
        self.password = password or secrets.token_urlsafe(12)
        self.components = tuple(components)
        unknown = set(self.components) - set(COMPONENTS)
        if unknown:
            raise ValueError(f"unknown components {sorted(unknown)}; known: {list(COMPONENTS)}")
        self.log_level = log_level
        self.log_dir = self.home / "component-logs"
        self._procs: dict[str, _Component] = {}
        self.max_restarts = max_restarts
        self.restarts: dict[str, int] = {}
        self._seen: set[Any] = set()  # descendants observed so far (psutil.Process, hashable)
        self.client = AirflowClient(self.url, self.username, self.password)
        self.env = self._build_env()

    # -- configuration
    def _default_db(self) -> str:
        inherited = os.environ.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "")
        if inherited and not inherited.startswith("sqlite"):
            return inherited
        return f"sqlite:///{self.home / 'airflow.db'}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def uses_sqlite(self) -> bool:
        return self.sql_alchemy_conn.startswith("sqlite")

    def _keys(self) -> dict[str, str]:
        """Secrets shared by all components, kept in the home: a kept home restarts with the
        same Fernet key (encrypted connections and trigger kwargs stay readable)."""
        path = self.home / ".jrs-keys.json"
        try:
            keys = json.loads(path.read_text())
            if isinstance(keys, dict) and {"fernet_key", "jwt_secret", "api_secret_key"} <= set(keys):
                return {k: str(v) for k, v in keys.items()}
        except (OSError, ValueError):
            pass
        keys = {
            "fernet_key": base64.urlsafe_b64encode(os.urandom(32)).decode(),
            "jwt_secret": secrets.token_urlsafe(32),
            "api_secret_key": secrets.token_urlsafe(24),
        }
        self.home.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(keys))
        path.chmod(0o600)
        return keys

    def _build_env(self) -> dict[str, str]:
        bundles = [
            {"name": name, "classpath": LOCAL_BUNDLE, "kwargs": {"path": path}} for name, path in self.bundles.items()
        ]
        first = next(iter(self.bundles.values()))
        keys = self._keys()
        airflow_env = {
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": str(self.parallelism),
            "AIRFLOW__CORE__DEFAULT_POOL_TASK_SLOT_COUNT": str(self.parallelism),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": first,
            "AIRFLOW__CORE__FERNET_KEY": keys["fernet_key"],
            "AIRFLOW__CORE__AUTH_MANAGER": SIMPLE_AUTH_MANAGER,
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{self.username}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.home / "passwords.json"),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.sql_alchemy_conn,
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.api_port),
            "AIRFLOW__API__BASE_URL": self.url,
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API__SECRET_KEY": keys["api_secret_key"],
            "AIRFLOW__API_AUTH__JWT_SECRET": keys["jwt_secret"],
            "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(bundles),
            "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "30",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": self.log_level,
            "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
        }
        if self.uses_sqlite:
            airflow_env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS"] = f"{__name__}.SQLITE_CONNECT_ARGS"
        elif self.sql_alchemy_conn.startswith("postgresql+psycopg:") and not os.environ.get(
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC"
        ):
            # psycopg 3 is sync and async; Airflow would otherwise derive an asyncpg URL.
            airflow_env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC"] = self.sql_alchemy_conn
        env = dict(os.environ)
        env.update(airflow_env)
        for key, value in self.extra_env.items():
            if key.startswith("AIRFLOW__") and key in airflow_env and key not in ("AIRFLOW__LOGGING__LOGGING_LEVEL",):
                # Overriding what makes the deployment coherent is allowed, but say so.
                print(f"[jrs-deployment] overriding {key}", file=sys.stderr)
            env[key] = value
        return env

    # -- commands
    def airflow(self, *args: str, timeout: float = 600.0, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run an ``airflow`` CLI command against this deployment (its home, DB and config)."""
        proc = subprocess.run(
            [sys.executable, "-m", "airflow", *args],
            env=self.env,
            cwd=self.home,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise DeploymentError(
                f"`airflow {' '.join(args)}` exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            )
        return proc

    def migrate(self) -> None:
        marker = self.home / ".jrs-migrated"
        if self.uses_sqlite and marker.exists():
            return
        self.airflow("db", "migrate", timeout=900)
        if self.uses_sqlite:
            # Write-ahead logging (persistent in the file): readers no longer block the writer,
            # which is most of SQLite's "database is locked" with four processes.
            import sqlite3

            with sqlite3.connect(self.sql_alchemy_conn.split(":///", 1)[1]) as db:
                db.execute("PRAGMA journal_mode=WAL")
        marker.touch()

    def _write_password(self) -> None:
        path = self.home / "passwords.json"
        passwords: dict[str, str] = {}
        if path.exists():
            try:
                passwords = json.loads(path.read_text() or "{}")
            except ValueError:
                passwords = {}
        passwords[self.username] = self.password
        path.write_text(json.dumps(passwords) + "\n")
        path.chmod(0o600)

    def _spawn(self, name: str) -> None:
        args = [sys.executable, "-m", "airflow", name]
        if name == "api-server":
            args += ["--host", "127.0.0.1", "--port", str(self.api_port), "--workers", "1"]
        log_path = self.log_dir / f"{name}.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                args,
                env=self.env,
                cwd=self.home,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._procs[name] = _Component(name, proc, log_path)

    def start(self, timeout: float = 240.0) -> LocalDeployment:
        """Migrate, start the components, wait until the API answers and every component is healthy."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.migrate()
            self._write_password()
            for name in self.components:
                self._spawn(name)
            self.wait_healthy(timeout=timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def check_alive(self) -> None:
        """Restart a component that died (as systemd or Kubernetes would), at most ``max_restarts`` times.

        Airflow's scheduler can die on SQLite under concurrent writes (``ObjectDeletedError``
        after a rolled-back session); a supervised deployment restarts it and carries on.
        Restarts are counted in :attr:`restarts` and reported on stderr.
        """
        self._seen.update(self._descendants())  # a dead parent's orphans are still ours to stop
        for name, comp in list(self._procs.items()):
            code = comp.process.poll()
            if code is None:
                continue
            if self.restarts.get(name, 0) >= self.max_restarts:
                raise DeploymentError(f"airflow {name} exited with {code}; its log ends with:\n{comp.tail()}")
            self.restarts[name] = self.restarts.get(name, 0) + 1
            print(
                f"[jrs-deployment] airflow {name} exited with {code}; restarting it "
                f"({self.restarts[name]}/{self.max_restarts}); log: {comp.log_path}",
                file=sys.stderr,
                flush=True,
            )
            _signal_group(comp.process.pid, signal.SIGKILL)  # leftovers of its process group
            self._spawn(name)

    def wait_healthy(self, timeout: float = 240.0) -> dict[str, Any]:
        wanted = {
            "scheduler": "scheduler" in self.components,
            "triggerer": "triggerer" in self.components,
            "dag_processor": "dag-processor" in self.components,
        }
        deadline = time.monotonic() + timeout
        last: Any = None
        while True:
            self.check_alive()
            try:
                health = self.client.health()
                last = health
                ok = health["metadatabase"]["status"] == "healthy" and all(
                    (health.get(k) or {}).get("status") == "healthy" for k, want in wanted.items() if want
                )
                if ok:
                    self.client.token()
                    return health  # type: ignore[no-any-return]
            except (OSError, ApiError, KeyError, ValueError) as exc:
                last = exc
            if time.monotonic() > deadline:
                raise DeploymentError(f"Airflow not healthy after {timeout:.0f}s (last: {last}).\n{self.logs_tail()}")
            time.sleep(1.0)

    def wait_for_dag(self, dag_id: str, timeout: float = 180.0) -> dict[str, Any]:
        """Wait until the dag-processor has parsed and serialized ``dag_id``; report import errors."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            try:
                return self.client.dag(dag_id)
            except ApiError as exc:
                if exc.status != 404:
                    raise
            errors = self.client.import_errors()
            if errors:  # the file may be fixed on the next parse, but do not wait the full timeout
                deadline = min(deadline, time.monotonic() + 20.0)
            if time.monotonic() > deadline:
                raise DeploymentError(f"DAG {dag_id!r} not parsed after {timeout:.0f}s; import errors: {errors}")
            time.sleep(1.0)

    def logs_tail(self, chars: int = 2000) -> str:
        return "\n".join(f"--- {c.name} ({c.log_path}):\n{c.tail(chars)}" for c in self._procs.values())

    # -- backfills
    def backfill(
        self,
        dag_id: str,
        from_date: str | date | datetime,
        to_date: str | date | datetime,
        reprocess: str = "none",
        *,
        max_active_runs: int = 2,
        via: str = "cli",
        timeout: float = 1800.0,
    ) -> BackfillResult:
        """Create a backfill (``airflow backfill create`` or ``POST /api/v2/backfills``) and wait for it.

        ``wall_seconds`` is measured on the server's clock: from the backfill's creation to the
        end of its last run (no polling granularity, no CLI start-up).
        """
        self.wait_for_backfills(dag_id, timeout=timeout)  # Airflow allows one active backfill per DAG
        expected = self.client.backfill_dry_run(dag_id, from_date, to_date, reprocess_behavior=reprocess)
        backfill_id = self._create_backfill(dag_id, from_date, to_date, reprocess, max_active_runs, via)
        done = self._wait_for_runs(dag_id, backfill_id, expected, timeout)
        return self._backfill_result(dag_id, backfill_id, done)

    def _create_backfill(
        self,
        dag_id: str,
        from_date: str | date | datetime,
        to_date: str | date | datetime,
        reprocess: str,
        max_active_runs: int,
        via: str,
    ) -> int:
        """Create the backfill; retried while SQLite is locked by the scheduler (HTTP 503 / CLI error)."""
        if via not in ("cli", "rest"):
            raise ValueError(f"via must be 'cli' or 'rest', got {via!r}")
        for attempt in range(1, 11):
            try:
                if via == "rest":
                    doc = self.client.create_backfill(
                        dag_id, from_date, to_date, reprocess_behavior=reprocess, max_active_runs=max_active_runs
                    )
                    return int(doc["id"])
                known = {b["id"] for b in self.client.backfills(dag_id)}
                self.airflow(
                    "backfill", "create", "--dag-id", dag_id,
                    "--from-date", iso(from_date), "--to-date", iso(to_date),
                    "--reprocess-behavior", reprocess, "--max-active-runs", str(max_active_runs),
                )  # fmt: skip
                new = [b for b in self.client.backfills(dag_id) if b["id"] not in known]
                if len(new) != 1:
                    raise DeploymentError(f"expected one new backfill of {dag_id}, found {new}")
                return int(new[0]["id"])
            except DeploymentError as exc:
                locked = (isinstance(exc, ApiError) and exc.status == 503) or "database is locked" in str(exc).lower()
                if not locked or attempt == 10:
                    raise
                time.sleep(min(2.0 * attempt, 10.0))
        raise AssertionError("unreachable")

    def wait_for_backfills(self, dag_id: str, *, timeout: float = 600.0) -> None:
        """Wait until no backfill of ``dag_id`` is active (the scheduler marks them complete every 30 s)."""
        deadline = time.monotonic() + timeout
        while any(not b.get("completed_at") for b in self.client.backfills(dag_id)):
            self.check_alive()
            if time.monotonic() > deadline:
                raise DeploymentError(f"a backfill of {dag_id} is still active after {timeout:.0f}s")
            time.sleep(1.0)

    def _wait_for_runs(self, dag_id: str, backfill_id: int, expected: Sequence[str], timeout: float) -> dict[str, Any]:
        """Done when every expected date has a finished run that ended after the backfill started.

        Faster than waiting for ``completed_at``, which the scheduler sets on a 30 s timer.
        """
        wanted = {_parse_ts(d) for d in expected}
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            doc = self.client.backfill(backfill_id)
            if doc.get("completed_at"):
                return doc
            created = _parse_ts(doc["created_at"])
            finished = {
                _parse_ts(run["logical_date"])
                for run in self.client.dag_runs(dag_id)
                if run.get("logical_date")
                and run["state"] in TERMINAL_RUN_STATES
                and run.get("end_date")
                and _parse_ts(run["end_date"]) >= created
            }
            if wanted and wanted <= finished:
                return doc
            if time.monotonic() > deadline:
                raise DeploymentError(
                    f"backfill {backfill_id} of {dag_id} not finished after {timeout:.0f}s: "
                    f"{len(wanted & finished)}/{len(wanted)} runs done"
                )
            time.sleep(1.0)

    def _backfill_result(self, dag_id: str, backfill_id: int, doc: Mapping[str, Any]) -> BackfillResult:
        start = _parse_ts(doc["created_at"])
        lo, hi = _parse_ts(doc["from_date"]), _parse_ts(doc["to_date"])
        result = BackfillResult(backfill_id, dag_id, 0.0)
        end = start
        latest: dict[str, dict[str, Any]] = {}
        for run in self.client.dag_runs(dag_id):
            if not run.get("logical_date") or not run.get("end_date"):
                continue
            when = _parse_ts(run["logical_date"])
            # Runs of the range that ended after the backfill was created: its new runs and the
            # existing runs it reprocessed (those keep their run ids, e.g. manual__...).
            if lo <= when <= hi and _parse_ts(run["end_date"]) >= start:
                key = when.date().isoformat() if when.time() == datetime.min.time() else when.isoformat()
                if key not in latest or run["end_date"] > latest[key]["end_date"]:
                    latest[key] = run
        for key, run in sorted(latest.items()):
            result.runs[key] = run["state"]
            result.run_ids[key] = run["dag_run_id"]
            result.tasks[key] = self.client.task_states(dag_id, run["dag_run_id"])
            end = max(end, _parse_ts(run["end_date"]))
        result.wall_seconds = (end - start).total_seconds()
        return result

    # -- stop
    def _descendants(self) -> list[Any]:
        try:
            import psutil
        except ImportError:  # pragma: no cover - psutil comes with Airflow
            return []
        found = []
        for comp in self._procs.values():
            try:
                found.extend(psutil.Process(comp.process.pid).children(recursive=True))
            except psutil.Error:
                continue
        return found

    def stop(self, grace: float = 20.0) -> None:
        """Stop every component and everything they started (SIGTERM, then SIGKILL after ``grace``)."""
        try:
            import psutil
        except ImportError:  # pragma: no cover
            psutil = None  # type: ignore[assignment]
        descendants = list({*self._seen, *self._descendants()})
        self._seen.clear()
        # The scheduler first: it stops handing out tasks; the api-server last, tasks report to it.
        order = sorted(self._procs.values(), key=lambda c: ["scheduler", "triggerer", "dag-processor"].index(c.name)
                       if c.name in ("scheduler", "triggerer", "dag-processor") else 9)  # fmt: skip
        for comp in order:
            _signal_group(comp.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for comp in order:
            try:
                comp.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for comp in order:
            _signal_group(comp.process.pid, signal.SIGKILL)
            try:
                comp.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        if psutil is not None:
            for proc in descendants:
                try:
                    if proc.is_running():
                        try:
                            os.killpg(proc.pid, signal.SIGKILL)  # a task's own group (setpgid)
                        except OSError:
                            pass
                        proc.kill()
                except psutil.Error:
                    continue
            psutil.wait_procs([p for p in descendants if _running(p)], timeout=5)
        self._procs.clear()
        if self._temp_home and not self.keep_home:
            shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> LocalDeployment:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _running(proc: Any) -> bool:
    try:
        return bool(proc.is_running())
    except Exception:
        return False


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
