"""A real Airflow deployment on CeleryExecutor: :class:`.LocalDeployment`'s components, plus
Celery workers that each run on a "host" of their own.

What changes from :class:`~jrs_testbench.deployment.LocalDeployment` (whose code this reuses):

* **CeleryExecutor**; the broker is a redis-server of its own (not the store's), the metadata
  database *and* Celery's result backend a fresh PostgreSQL database (``jrs_celery_<hex>``,
  created on start, dropped on stop, also when start fails);
* **workers** (``airflow celery worker``, concurrency 1 each by default), each in its own UTS
  and PID namespace (``unshare --uts --pid --fork --mount-proc``) with its own hostname, as
  two machines sharing the filesystem and the network: neither sees the other's processes,
  and a task instance's ``hostname`` tells which worker ran it;
* each worker is one process group *and* one PID namespace: :meth:`kill_worker` SIGKILLs the
  group, the namespace's PID 1 dies with it, and the kernel kills everything inside (task
  supervisors, task processes, spark-submit and its JVM), as when a machine is lost. Workers
  are not restarted by :meth:`check_alive` (a test that kills one wants it to stay dead);
  :meth:`start_worker` brings one back;
* **fast failover** (``fast_failover=True``): Airflow only learns that a Celery worker died
  from the missing task heartbeats ("zombie" task instances). Defaults take 5 minutes
  (``[scheduler] task_instance_heartbeat_timeout = 300``); here the timeout is
  ``heartbeat_timeout`` seconds (default 20), checked every 2 s, with task heartbeats every
  2 s. Under a loaded machine a timeout too close to the heartbeat interval would declare a
  live task dead: 20 s leaves room.

    with CeleryDeployment(env=jrs_env(...), workers=("worker-a", "worker-b")) as airflow:
        airflow.wait_for_dag("flights_daily")
        ...
        airflow.kill_worker("worker-a")       # SIGKILL: the "machine" is gone

Needs root (``unshare``) and a PostgreSQL server where ``postgres_url``'s user may create
databases (default ``postgresql+psycopg://postgres@127.0.0.1:5432``, trust auth).
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable
from typing import Any

from jrs_testbench.deployment.local import LocalDeployment, _Component
from jrs_testbench.deployment.processes import signal_group
from jrs_testbench.deployment.rest import DeploymentError
from jrs_testbench.redis_server import EmbeddedRedis

CELERY_EXECUTOR = "CeleryExecutor"
DEFAULT_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432"
#: The PostgreSQL server's maintenance database: databases are created and dropped from there.
MAINTENANCE_DB = "postgres"


def failover_env(heartbeat_timeout: int = 20) -> dict[str, str]:
    """Settings that let Airflow notice a dead worker's task in seconds rather than minutes.

    * ``[scheduler] task_instance_heartbeat_timeout``: a running task instance without a
      heartbeat for this long is failed by the scheduler (then retried if it has retries left);
    * ``[scheduler] task_instance_heartbeat_timeout_detection_interval``: how often it looks;
    * ``[workers] min_heartbeat_interval``: how often the task supervisor beats (default 5 s).

    The Celery side needs nothing: a dead worker's message stays unacknowledged
    (``task_acks_late``) until the broker's visibility timeout (a day), long after the retry
    ran; Airflow's retry is a new message, taken by a live worker.
    """
    return {
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(heartbeat_timeout),
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "2",
        "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "2",
    }


def celery_env(*, broker_url: str, result_backend: str, concurrency: int) -> dict[str, str]:
    """CeleryExecutor with its broker and result backend."""
    return {
        "AIRFLOW__CORE__EXECUTOR": CELERY_EXECUTOR,
        "AIRFLOW__CELERY__BROKER_URL": broker_url,
        "AIRFLOW__CELERY__RESULT_BACKEND": result_backend,
        "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(concurrency),
        "AIRFLOW__CELERY__WORKER_PREFETCH_MULTIPLIER": "1",
        # Airflow's own default, set to silence its warning: a message of a task that runs longer
        # is redelivered by the broker (a second copy of the task).
        "AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__VISIBILITY_TIMEOUT": "86400",
    }


class PostgresDatabase:
    """A database of its own on a PostgreSQL server: created on :meth:`create`, dropped (with
    whatever connections are left) on :meth:`drop`; a context manager too.

    :param server_url: SQLAlchemy URL of the server, without a database name
    :param name: default ``<prefix><random hex>``
    """

    def __init__(self, server_url: str = DEFAULT_POSTGRES, name: str | None = None, *, prefix: str = "jrs_") -> None:
        self.server_url = server_url.rstrip("/")
        self.name = name or f"{prefix}{uuid.uuid4().hex[:10]}"
        self.created = False

    @property
    def url(self) -> str:
        return f"{self.server_url}/{self.name}"

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(f"{_psycopg_url(self.server_url)}/{MAINTENANCE_DB}", autocommit=True) as db:
            db.execute(sql)

    def create(self) -> PostgresDatabase:
        self._admin(f'CREATE DATABASE "{self.name}"')
        self.created = True
        return self

    def drop(self) -> None:
        if self.created:
            self._admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
            self.created = False

    def __enter__(self) -> PostgresDatabase:
        return self.create()

    def __exit__(self, *exc: object) -> None:
        self.drop()


def _psycopg_url(sqlalchemy_url: str) -> str:
    """``postgresql+psycopg://u@h:p/db`` -> ``postgresql://u@h:p/db`` (libpq's form)."""
    scheme, rest = sqlalchemy_url.split("://", 1)
    return f"{scheme.split('+', 1)[0]}://{rest}"


class CeleryDeployment(LocalDeployment):
    """api-server, scheduler, dag-processor, triggerer on CeleryExecutor, and Celery workers
    each on a "host" of its own (see the module docstring).

    :param workers: worker hostnames, one Celery worker each
    :param worker_concurrency: task slots per worker (``--concurrency``)
    :param postgres_url: SQLAlchemy URL of the server, without a database name
    :param database: name of the database to create (and drop); default ``jrs_celery_<random>``
        (:attr:`database` is its :class:`PostgresDatabase`)
    :param fast_failover: apply :func:`failover_env` (``heartbeat_timeout`` seconds)
    :param kwargs: passed to :class:`LocalDeployment` (``env``, ``bundles``, ``parallelism``, ...);
        ``sql_alchemy_conn`` is ours.
    """

    def __init__(
        self,
        home: str | os.PathLike[str] | None = None,
        *,
        workers: Iterable[str] = ("worker-a", "worker-b"),
        worker_concurrency: int = 1,
        postgres_url: str = DEFAULT_POSTGRES,
        database: str | None = None,
        fast_failover: bool = True,
        heartbeat_timeout: int = 20,
        **kwargs: Any,
    ) -> None:
        if "sql_alchemy_conn" in kwargs:
            raise ValueError("CeleryDeployment creates its own database: pass postgres_url, not sql_alchemy_conn")
        if not self.available():
            raise DeploymentError("CeleryDeployment needs root and unshare(1) to give workers hosts of their own")
        self.worker_names = tuple(workers)
        if not self.worker_names or len(set(self.worker_names)) != len(self.worker_names):
            raise ValueError(f"workers must be distinct hostnames, got {self.worker_names}")
        self.worker_concurrency = worker_concurrency
        self.database = PostgresDatabase(postgres_url, database, prefix="jrs_celery_")
        kwargs.setdefault("parallelism", worker_concurrency * len(self.worker_names))
        super().__init__(home, sql_alchemy_conn=self.database.url, **kwargs)
        self.broker = EmbeddedRedis(self.home / "celery-broker", appendfsync="everysec")
        self.workers: dict[str, _Component] = {}
        self._celery_overrides = dict(failover_env(heartbeat_timeout) if fast_failover else {})
        # The caller's env still wins over our failover defaults.
        self._celery_overrides.update({k: v for k, v in self.extra_env.items() if k in self._celery_overrides})
        self._apply_celery_env()

    @staticmethod
    def available() -> bool:
        """Whether workers can get hosts of their own here (root and unshare(1))."""
        return shutil.which("unshare") is not None and os.geteuid() == 0

    # -- configuration
    @property
    def result_backend(self) -> str:
        return f"db+{self.database.url}"

    def _apply_celery_env(self) -> None:
        self.env.update(self._celery_overrides)
        self.env.update(
            celery_env(
                broker_url=self.broker.url, result_backend=self.result_backend, concurrency=self.worker_concurrency
            )
        )

    def worker_env(self, hostname: str) -> dict[str, str]:
        """A worker's environment: the deployment's, plus what a host no resolver knows needs."""
        return {
            **self.env,
            # socket.getfqdn() would ask DNS about "worker-a"; the hostname itself is what we want.
            "AIRFLOW__CORE__HOSTNAME_CALLABLE": "socket.gethostname",
            # Spark must not try to resolve the namespace's hostname either.
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_HOSTNAME": "localhost",
            "JRS_WORKER_HOSTNAME": hostname,
        }

    # -- workers
    def start_worker(self, hostname: str) -> None:
        """Start (or restart) the Celery worker ``hostname`` in UTS/PID namespaces of its own.

        PID 1 of the namespace is the worker itself (``exec``): when it dies, the kernel kills
        everything else in the namespace."""
        if hostname in self.workers and self.workers[hostname].process.poll() is None:
            raise DeploymentError(f"worker {hostname} already runs")
        args = [
            sys.executable, "-m", "airflow", "celery", "worker",
            "--concurrency", str(self.worker_concurrency), "--celery-hostname", f"celery@{hostname}",
            "--pid", str(self.home / f"worker-{hostname}.pid"), "--skip-serve-logs",
            "--without-gossip", "--without-mingle",
        ]  # fmt: skip
        script = f"hostname {shlex.quote(hostname)} && exec {shlex.join(args)}"
        log_path = self.log_dir / f"worker-{hostname}.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                ["unshare", "--uts", "--pid", "--fork", "--mount-proc", "sh", "-c", script],
                env=self.worker_env(hostname),
                cwd=self.home,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.workers[hostname] = _Component(f"worker-{hostname}", proc, log_path)

    def ping_workers(self, timeout: float = 1.0) -> set[str]:
        """Hostnames of the workers that answer a Celery ``ping`` through the broker now."""
        from celery import Celery

        app = Celery(broker=self.broker.url)
        try:
            replies = app.control.ping(timeout=timeout) or []
        finally:
            app.close()
        return {name.split("@", 1)[1] for reply in replies for name in reply if "@" in name}

    def wait_workers(self, names: Iterable[str] | None = None, timeout: float = 180.0) -> None:
        """Until each worker answers a Celery ``ping`` (it consumes from the broker)."""
        pending = set(names or self.workers)
        deadline = time.monotonic() + timeout
        while pending:
            for name in pending:
                comp = self.workers[name]
                if comp.process.poll() is not None:
                    raise DeploymentError(f"Celery worker {name} exited with {comp.process.returncode}:\n{comp.tail()}")
            pending -= self.ping_workers()
            if pending and time.monotonic() > deadline:
                raise DeploymentError(
                    f"Celery workers {sorted(pending)} do not answer after {timeout:.0f}s:\n{self.logs_tail()}"
                )
            time.sleep(0.5)

    def kill_worker(self, hostname: str, sig: int = signal.SIGKILL) -> float:
        """Signal the worker's whole process group (SIGKILL: the "machine" is lost); returns the
        ``time.time()`` of the kill. With SIGKILL, waits until its PID namespace is empty."""
        comp = self.workers[hostname]
        when = time.time()
        signal_group(comp.process.pid, sig)
        if sig == signal.SIGKILL:
            try:
                comp.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        return when

    def worker_pids(self, hostname: str) -> list[int]:
        """Every process of the worker's namespace, seen from outside (the worker, its pool, tasks, JVMs)."""
        import psutil

        comp = self.workers[hostname]
        try:
            return [p.pid for p in psutil.Process(comp.process.pid).children(recursive=True)]
        except psutil.Error:
            return []

    def _stop_workers(self, grace: float = 10.0) -> None:
        for comp in self.workers.values():
            signal_group(comp.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for comp in self.workers.values():
            try:
                comp.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for comp in self.workers.values():
            signal_group(comp.process.pid, signal.SIGKILL)  # PID 1 of its namespace: all inside die
            try:
                comp.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def logs_tail(self, chars: int = 2000) -> str:
        workers = "\n".join(f"--- {c.name} ({c.log_path}):\n{c.tail(chars)}" for c in self.workers.values())
        return f"{super().logs_tail(chars)}\n{workers}"

    # -- lifecycle
    def start(self, timeout: float = 240.0) -> CeleryDeployment:
        """Create the database, start the broker and the components, then the workers."""
        try:
            self.home.mkdir(parents=True, exist_ok=True)
            self.log_dir.mkdir(parents=True, exist_ok=True)
            self.database.create()
            self.broker.start()
            self._apply_celery_env()  # the broker may have moved to another free port
            super().start(timeout=timeout)
            for name in self.worker_names:
                self.start_worker(name)
            self.wait_workers(timeout=timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, grace: float = 20.0) -> None:
        """Workers first (their tasks report to the api-server), then the components, the
        broker, the database; each step runs whatever the previous one raised."""
        try:
            self._stop_workers()
        finally:
            try:
                super().stop(grace)
            finally:
                try:
                    self.broker.stop()
                finally:
                    self.database.drop()

    def __enter__(self) -> CeleryDeployment:
        return self.start()
