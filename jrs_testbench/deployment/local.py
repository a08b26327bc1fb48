"""A real local Airflow deployment: api-server, scheduler, dag-processor and triggerer as processes.

What ``airflow standalone`` does, but reusable from tests, benchmarks and the CLI, and with
the parts pinned that matter here: LocalExecutor with a fixed number of slots, one JWT secret
for every process (the task processes' Execution API tokens must verify on the api-server),
the Execution API URL on a free port, SimpleAuthManager with an ``admin`` user whose password
we choose (written to the password file before the api-server starts), and the project's DAG
folders as bundles. The metadata database is SQLite in the home unless ``sql_alchemy_conn``
(or ``AIRFLOW__DATABASE__SQL_ALCHEMY_CONN`` pointing at PostgreSQL or MySQL) says otherwise.

    with LocalDeployment(bundles={"dags": "dags"}, env=jrs_env(redis_url, "dev", data_dir="data")) as airflow:
        airflow.wait_for_dag("flights_daily")
        airflow.client.unpause("flights_daily")
        run = airflow.client.trigger("flights_daily", logical_date="2013-01-01T00:00:00Z")
        airflow.client.wait_for_run("flights_daily", run["dag_run_id"])

Stopping is always complete: every component runs in its own process group; ``stop()`` first
notes every descendant (task supervisors set their own process group, spark-submit JVMs hang
below them), sends SIGTERM to the groups, waits, then SIGKILLs whatever is left. ``__exit__``
and a failed ``start()`` both stop.

No Airflow import here (the CLI imports this module; Airflow is only ever run as a process).
The REST client is :mod:`.rest`, the shared environment :mod:`.environment`, backfills
:mod:`.backfills`; ``jrs_env`` is :func:`jrs_testbench.helpers.jrs_env`.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jrs_testbench.deployment.backfills import Backfills
from jrs_testbench.deployment.environment import component_env
from jrs_testbench.deployment.processes import port_holder, running, signal_group
from jrs_testbench.deployment.rest import AirflowClient, ApiError, DeploymentError
from jrs_testbench.helpers import ROOT, free_port

COMPONENTS = ("api-server", "dag-processor", "scheduler", "triggerer")
#: The log servers a component starts beside itself, by the environment variable of their port.
LOG_SERVER_PORTS = {
    "worker": "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT",
    "trigger": "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT",
}


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


class LocalDeployment:
    """api-server + scheduler + dag-processor + triggerer in a temporary (or given) AIRFLOW_HOME.

    :param home: AIRFLOW_HOME (default: a new temporary folder, removed on stop unless ``keep_home``)
    :param bundles: bundle name -> DAG folder (default ``{"dags-folder": <repo>/dags}``)
    :param env: extra environment for every component (connections, ``[jrs]`` config, ...)
    :param parallelism: executor slots (``[core] parallelism`` and the default pool's slots)
    :param api_port: default a free port
    :param base_path: a sub-path Airflow is served under (``/airflow``: ``[api] base_url`` is
        ``http://127.0.0.1:<port>/airflow``), as behind a proxy that forwards one path to it
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
        base_path: str = "",
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
        if base_path and (not base_path.startswith("/") or base_path.endswith("/")):
            raise ValueError(f"base_path {base_path!r} must start with '/' and not end with one (e.g. '/airflow')")
        self.base_path = base_path
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
        # The log servers' ports: the caller's, else free ones (never Airflow's shared defaults).
        self.log_server_ports = {
            kind: int(self.extra_env.get(var) or os.environ.get(var) or free_port())
            for kind, var in LOG_SERVER_PORTS.items()
        }
        self.env = component_env(
            home=self.home,
            bundles=self.bundles,
            url=self.url,
            api_port=self.api_port,
            sql_alchemy_conn=self.sql_alchemy_conn,
            parallelism=self.parallelism,
            username=self.username,
            log_level=self.log_level,
            extra_env=self.extra_env,
            log_server_ports=self.log_server_ports,
        )
        self.backfills = Backfills(self.client, self.airflow, self.check_alive)

    # -- configuration

    def _default_db(self) -> str:
        inherited = os.environ.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "")
        if inherited and not inherited.startswith("sqlite"):
            return inherited
        return f"sqlite:///{self.home / 'airflow.db'}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}{self.base_path}"

    @property
    def uses_sqlite(self) -> bool:
        return self.sql_alchemy_conn.startswith("sqlite")

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

    def check_ports(self) -> None:
        """Every port the components will listen on is free and wanted once; else one error that
        names the port, who wants it and the process holding it. A component that cannot bind
        only says so in its log, and would be restarted in vain."""
        wanted: list[tuple[int, str]] = []
        if "api-server" in self.components:
            wanted.append((self.api_port, "the API server (--port, api_port)"))
        if "scheduler" in self.components:
            wanted.append(
                (self.log_server_ports["worker"], "the scheduler's log server ([logging] worker_log_server_port)")
            )
        if "triggerer" in self.components:
            wanted.append(
                (self.log_server_ports["trigger"], "the triggerer's log server ([logging] trigger_log_server_port)")
            )
        by_port: dict[int, str] = {}
        for port, who in wanted:
            if port in by_port:
                raise DeploymentError(
                    f"port {port} is wanted twice: by {by_port[port]} and by {who}; choose another --port"
                )
            by_port[port] = who
        for port, who in wanted:
            holder = port_holder(port)
            if holder is not None:
                raise DeploymentError(
                    f"port {port}, wanted by {who}, is taken by {holder}: stop that process or choose another --port"
                )

    def start(self, timeout: float = 240.0) -> LocalDeployment:
        """Migrate, start the components, wait until the API answers and every component is healthy."""
        self.check_ports()
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
            signal_group(comp.process.pid, signal.SIGKILL)  # leftovers of its process group
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
            signal_group(comp.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for comp in order:
            try:
                comp.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for comp in order:
            signal_group(comp.process.pid, signal.SIGKILL)
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
            psutil.wait_procs([p for p in descendants if running(p)], timeout=5)
        self._procs.clear()
        if self._temp_home and not self.keep_home:
            shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> LocalDeployment:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
