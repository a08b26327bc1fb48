"""What tests, benchmarks and scripts set up again and again, written once.

* :func:`connection_env`, :func:`spark_env` (:func:`pyspark_env`), :func:`jrs_env` (both, and
  the flights DAG's paths): the environment that points a process (or this one, through
  ``monkeypatch.setenv``) at a store namespace and a local Spark;
* :class:`SparkLaunches`: counts Spark applications by their event logs, the effect the tests
  assert on ("Spark did not run" is a count, not a mock that was not called);
* :data:`TINY_APP`: the tests' small PySpark application;
* :func:`free_port`; :func:`wait_until`, a test's poll for an effect nothing announces.

Standard library only: scripts import it before anything else, and no Airflow import happens
here (Airflow reads its configuration at import: the environment must be set first).
"""

from __future__ import annotations

import io
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

#: The repository: the root of every ``PYTHONPATH`` handed to a child process.
ROOT = Path(__file__).resolve().parents[1]
#: The tests' PySpark application: small output and a commit marker; ``--sleep``, ``--fail`` shape a run.
TINY_APP = str(ROOT / "tests" / "spark" / "apps" / "tiny_app.py")

T = TypeVar("T")


def wait_until(condition: Callable[[], T], what: str, *, timeout: float = 180.0, poll: float = 0.05) -> T:
    """``condition()``'s first truthy value, polled every ``poll`` seconds; ``TimeoutError`` naming
    ``what`` after ``timeout`` (a limit for a broken run, not a measure: a passing test ends early)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(poll)


def free_port() -> int:
    """A TCP port free on loopback now; someone else may take it before the caller binds it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def connection_env(redis_url: str, namespace: str, *, data_dir: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """The ``jrs_default`` connection: the store at ``redis_url``, in ``namespace``.

    With ``data_dir``, also the ``[jrs]`` output and spec roots: ``<data_dir>/output`` and
    ``<data_dir>/specs``.
    """
    sep = "&" if "?" in redis_url else "?"  # a Sentinel URL has a query already
    env = {"AIRFLOW_CONN_JRS_DEFAULT": f"{redis_url}{sep}namespace={namespace}"}
    if data_dir is not None:
        env["AIRFLOW__JRS__OUTPUT_ROOT"] = str(Path(data_dir) / "output")
        env["AIRFLOW__JRS__SPEC_ROOT"] = str(Path(data_dir) / "specs")
    return env


def spark_env(master: str = "local[1]") -> dict[str, str]:
    """The ``spark_local`` connection on ``master``, and what its spark-submit children need."""
    return {"AIRFLOW_CONN_SPARK_LOCAL": json.dumps({"conn_type": "spark", "host": master}), **pyspark_env()}


def pyspark_env() -> dict[str, str]:
    """What a spark-submit child needs to run the repository's applications with this venv.

    The venv's ``bin`` comes first on ``PATH`` (its ``spark-submit``), ``PYSPARK_PYTHON`` is this
    interpreter (the workers import ``airflow_jrs.spark``), and the repository is on
    ``PYTHONPATH`` before whatever was there.
    """
    venv_bin = str(Path(sys.executable).parent)
    return {
        "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }


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
    tests count launches with it (:class:`SparkLaunches`). ``data_dir`` holds outputs, specs and
    the flights landing data.
    """
    env = {
        **connection_env(redis_url, namespace, data_dir=data_dir),
        **spark_env(spark_master),
        "JRS_FLIGHTS_LANDING": str(Path(data_dir) / "landing"),
    }
    if event_log_dir is not None:
        launches = SparkLaunches(event_log_dir)
        env["JRS_SPARK_EVENT_LOG_DIR"] = launches.uri
        if not os.environ.get("SPARK_CONF_DIR"):  # a user's own Spark configuration wins
            env["SPARK_CONF_DIR"] = str(launches.defaults_dir())
    return env


class SparkLaunches:
    """Spark applications started with event logs in ``event_dir``: Spark writes one file each.

    Hand :meth:`conf` to an operator (or ``uri`` to a DAG through ``JRS_SPARK_EVENT_LOG_DIR``),
    then compare :meth:`count` before and after.
    """

    def __init__(self, event_dir: str | os.PathLike[str]) -> None:
        self.dir = Path(event_dir)
        self.dir.mkdir(parents=True, exist_ok=True)

    @property
    def uri(self) -> str:
        return self.dir.resolve().as_uri()

    def conf(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` Spark conf with event logs on, written here."""
        return {**(base or {}), "spark.eventLog.enabled": "true", "spark.eventLog.dir": self.uri}

    def count(self) -> int:
        return len(list(self.dir.iterdir()))

    def properties(self) -> list[dict[str, str]]:
        """The Spark Properties each application received, read from its own event log (plain
        or zstd, rolling or not): what Spark got, not what an operator meant to give it."""
        found = []
        for log in sorted(p for p in self.dir.rglob("*") if p.is_file() and not p.name.startswith((".", "appstatus"))):
            raw = log.read_bytes()
            if log.suffix == ".zstd":
                import zstandard

                raw = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw), read_across_frames=True).read()
            for line in raw.decode().splitlines():
                event = json.loads(line)
                if event.get("Event") == "SparkListenerEnvironmentUpdate":
                    found.append(dict(event["Spark Properties"]))
        return found

    def defaults_dir(self) -> Path:
        """A ``SPARK_CONF_DIR`` beside the event folder whose ``spark-defaults.conf`` turns event
        logs on: every ``spark-submit`` started with it writes one here, whatever conf the DAG
        passes (a DAG's own ``spark.eventLog.*`` still wins)."""
        folder = self.dir.parent / f"{self.dir.name}-spark-conf"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "spark-defaults.conf").write_text(
            "# written by jrs_testbench (SparkLaunches): event logs of every application\n"
            f"spark.eventLog.enabled true\nspark.eventLog.dir {self.uri}\n"
        )
        return folder
