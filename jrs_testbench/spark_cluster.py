"""A real Spark standalone cluster (Spark's own cluster manager) from the installed pyspark.

A master and ``workers`` workers started through ``spark-class``, bound to 127.0.0.1, one core
and a little memory each, web UIs and the master's REST submission server on free ports.
Every process runs in its own process group and is always stopped (``stop``, ``__exit__``).

    with SparkStandaloneCluster(tmp / "spark") as spark:
        spark.master_url      # spark://127.0.0.1:<port>, for the Spark connection's host
        spark.webui_url       # http://127.0.0.1:<port>, the master's UI and its /json/ status
        spark.connection()    # an AIRFLOW_CONN_* JSON for the Spark provider

Command line (a cluster to play with until Ctrl-C): ``python -m jrs_testbench.spark_cluster``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from jrs_testbench.helpers import free_port


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


class SparkStandaloneCluster:
    def __init__(
        self, work_dir: str | os.PathLike[str], *, workers: int = 2, worker_cores: int = 1, worker_memory: str = "1g"
    ) -> None:
        self.work_dir = Path(work_dir)
        self.workers = workers
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.master_port = free_port()
        self.webui_port = free_port()
        self.rest_port = free_port()
        self._procs: list[subprocess.Popen[bytes]] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def webui_url(self) -> str:
        return f"http://127.0.0.1:{self.webui_port}"

    def connection(self, **extra: Any) -> str:
        """The Spark connection (client deploy mode) as an ``AIRFLOW_CONN_*`` JSON value."""
        return json.dumps(
            {
                "conn_type": "spark",
                "host": self.master_url,
                "extra": {"deploy-mode": "client", "master_webui_url": self.webui_url, **extra},
            }
        )

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(self.work_dir / "logs"),
            "SPARK_NO_DAEMONIZE": "1",
            "PYSPARK_PYTHON": sys.executable,
        }

    def _spawn(self, name: str, cls: str, *args: str, opts: str = "") -> None:
        log = open(self.work_dir / f"{name}.log", "ab")
        env = self._env()
        if opts:
            env["SPARK_DAEMON_JAVA_OPTS"] = opts
        self._procs.append(
            subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), cls, *args],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )

    def status(self) -> dict[str, Any]:
        """The master's JSON status (``/json/``): workers, active and completed applications."""
        with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=5) as resp:
            return dict(json.loads(resp.read()))

    def start(self, timeout: float = 120.0) -> SparkStandaloneCluster:
        (self.work_dir / "logs").mkdir(parents=True, exist_ok=True)
        try:
            self._spawn(
                "master",
                "org.apache.spark.deploy.master.Master",
                "--host", "127.0.0.1", "--port", str(self.master_port), "--webui-port", str(self.webui_port),
                opts=f"-Dspark.master.rest.enabled=true -Dspark.master.rest.port={self.rest_port}",
            )  # fmt: skip
            self._wait(lambda s: True, timeout, "the master's web UI")
            for i in range(self.workers):
                work = self.work_dir / f"worker-{i}"
                work.mkdir(exist_ok=True)
                self._spawn(
                    f"worker-{i}",
                    "org.apache.spark.deploy.worker.Worker",
                    self.master_url,
                    "--host", "127.0.0.1", "--cores", str(self.worker_cores), "--memory", self.worker_memory,
                    "--webui-port", str(free_port()), "--work-dir", str(work),
                )  # fmt: skip
            alive = lambda s: sum(w.get("state") == "ALIVE" for w in s.get("workers", [])) >= self.workers  # noqa: E731
            self._wait(alive, timeout, f"{self.workers} ALIVE workers")
        except BaseException:
            self.stop()
            raise
        return self

    def _wait(self, ready: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            dead = [p for p in self._procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"a Spark cluster process exited ({dead[0].args[1]}); logs in {self.work_dir}")
            try:
                if ready(self.status()):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"Spark standalone cluster: no {what} after {timeout}s; logs in {self.work_dir}")
            time.sleep(0.3)

    def active_applications(self) -> list[dict[str, Any]]:
        return list(self.status().get("activeapps", []))

    def stop(self) -> None:
        for proc in reversed(self._procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for proc in self._procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self._procs.clear()

    def __enter__(self) -> SparkStandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    import tempfile

    with SparkStandaloneCluster(tempfile.mkdtemp(prefix="jrs-spark-")) as cluster:
        print(
            f"master {cluster.master_url}, UI {cluster.webui_url}; AIRFLOW_CONN_SPARK_DEFAULT='{cluster.connection()}'"
        )
        print("Ctrl-C stops it.", flush=True)
        try:
            while True:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
