"""The Connect kind of trial: each try runs through the product's own
:class:`~airflow_jrs.launch.connect_launcher.ConnectLauncher` against one real Spark Connect
server that every trial of the run shares.

What a Connect try is (``python -m jrs_testbench.trials.connect_launcher '<json spec>'``): the very
:func:`.task.run_task` of the stand-in trials (the product's ``JobAttempt``, the same history log),
with :class:`ConnectTrialLauncher` in place of the stand-in launcher. Its application is a small
Spark Connect query: ``spark.range`` of ``chunks * rows`` rows in ONE partition through a Python
UDF that paces the rows (and fails at a planned chunk), written as parquet to the attempt's fenced
folder at :func:`airflow_jrs.spark.output.data_path` (the product's helper), then the launcher
writes the commit marker LAST (:func:`airflow_jrs.spark.commit.write_commit_marker`), as
``@task.jrs_pyspark`` does (its function writes the data only).

"Two applications at once" is detected on the server, inside the query: the UDF takes a
non-blocking ``flock`` on the job's lock file for each row it computes (as :mod:`.app` does for
its whole run) and logs ``overlap`` to the trial's history when another holds it. Why the UDF and
not the server's listing of tagged operations or jobs: the listing says when an operation or a
Spark job *ended for the scheduler*, and an interrupted job is marked ended while its tasks, and
the Python workers computing them, still run; the lock is held exactly while rows are computed,
by the process computing them, and the kernel drops it when that process dies (no stale lock).
Per row, not per run: Python workers are reused across tasks, so a lock kept in the worker would
outlive the query. The server's event log is used for what it is good at: waiting, after a
trial, until no operation of the job runs any more (:class:`OperationLog`).

Why each try is a fresh interpreter (fork, then ``exec``) rather than a fork of the worker: gRPC
must not be used in a process forked from one that initialised it, and starting the server
(:class:`jrs_testbench.spark_connect.SparkConnectServer`) initialises it in the caller.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_jrs.launch.connect_launcher import ConnectLauncher
from airflow_jrs.protocol.launcher import Launch
from airflow_jrs.spark.output import data_path
from airflow_jrs.store import JobResult

ROOT = str(Path(__file__).resolve().parents[2])
#: the Connect URL of the run's server, for the tries (set by the runner)
URL_ENV = "JRS_TRIALS_CONNECT_URL"
#: try faults that need the supervisor and the application process of spark-submit: not drawn
SKIPPED_FAULTS = ("kill_supervisor", "kill_app")


def row_udf(history: str, lock: str, trial: int | None, job: str, fence: int, rows: int, pace: tuple[float, float],
             fail_at: int, seed: int) -> Callable[[int], int]:  # fmt: skip
    """The UDF, a closure (cloudpickle ships it by value: the server's Python workers import
    nothing of this project)."""

    def compute(i: int) -> int:
        import fcntl
        import json
        import os
        import random
        import time

        def log(event: str, **fields: Any) -> None:
            record = {"t": time.monotonic_ns(), "pid": os.getpid(), "event": event, "trial": trial, "job": job,
                      "fence": fence, "where": "connect-server", **fields}  # fmt: skip
            fd = os.open(history, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, (json.dumps(record, separators=(",", ":")) + "\n").encode())
            finally:
                os.close(fd)

        chunk = i // rows
        if i == 0:
            log("work_start")
        if chunk == fail_at and i % rows == 0:
            log("app_failed", chunk=chunk)
            raise RuntimeError(f"the trial's planned application failure at chunk {chunk}")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                log("overlap")
                raise RuntimeError("another application of the job computes") from None
            time.sleep(random.Random(seed * 7919 + chunk).uniform(*pace) / rows)
        finally:
            os.close(fd)
        return i

    return compute


def _arg(args: list[str], name: str, default: str) -> str:
    return args[args.index(name) + 1] if name in args else default


class ConnectTrialLauncher(ConnectLauncher):
    """The product's Connect launcher with a trial's query; built with the stand-in launcher's
    arguments (:func:`.task.run_task` builds it under that name, see :func:`main`)."""

    def __init__(self, connection: dict[str, Any], ttl: float, *, history: str, lock: str, app_args: list[str],
                 stderr: int | None = None, before_write: Callable[[], None] | None = None) -> None:  # fmt: skip
        url = os.environ[URL_ENV]
        super().__init__(self._query, lambda: (url, {}), callable_name="trials.connect_query",
                         log=logging.getLogger("jrs_testbench.trials.connect"))  # fmt: skip
        self.history, self.lock, self.before_write = history, lock, before_write
        lo, hi = (float(x) for x in _arg(app_args, "--pace", "0.01,0.05").split(","))
        self.chunks, self.rows = int(_arg(app_args, "--chunks", "3")), int(_arg(app_args, "--rows", "4"))
        self.pace, self.fail_at = (lo, hi), int(_arg(app_args, "--fail-at", "-1"))
        self.seed, self.trial = int(_arg(app_args, "--seed", "0")), int(_arg(app_args, "--trial", "-1"))

    def _query(self, spark: Any, jrs: Any) -> dict[str, int]:
        # pyspark.sql.connect.functions and a DataType, not a DDL string: pyspark dispatches on
        # SPARK_CONNECT_MODE_ENABLED, which the product's launcher deliberately leaves unset (see
        # ConnectLauncher.run), and parses a DDL string with a classic SparkContext then
        from pyspark.sql.connect.functions import col, udf
        from pyspark.sql.types import LongType

        compute = udf(row_udf(self.history, self.lock, self.trial, jrs.job_id, jrs.fence, self.rows, self.pace,
                               self.fail_at, self.seed), LongType())  # fmt: skip
        n = self.chunks * self.rows
        df = spark.range(0, n, 1, 1).select(compute(col("id")).alias("id"))
        df.write.mode("overwrite").parquet(data_path(jrs.output))
        return {"rows": n}

    def finish(self, launch: Launch, result: JobResult) -> JobResult:
        """The last call before the result write: where a trial pauses the attempt on purpose."""
        if self.before_write is not None:
            self.before_write()
        return result


def exec_task(spec: dict[str, Any]) -> int:
    """In the forked child of a try: become a fresh interpreter running :func:`main` (same pid)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)}
    os.execve(sys.executable, [sys.executable, "-m", "jrs_testbench.trials.connect_launcher", json.dumps(spec)], env)
    return 4  # pragma: no cover - execve does not return


#: Connect operation events after which an operation does no more Spark work
OPERATION_ENDED = tuple(f"org.apache.spark.sql.connect.service.SparkListenerConnectOperation{e}"
                        for e in ("Finished", "Failed", "Canceled", "Closed"))  # fmt: skip


class OperationLog:
    """The server's open operations of one job (any fence), from its event log read incrementally:
    an operation counts from its ``OperationStarted`` (before it analysed its plan or started a
    Spark job: the UI REST API's jobs show neither) until it finished, failed, was cancelled or closed."""

    def __init__(self, events_dir: str) -> None:
        self.events_dir, self.offset, self.partial = events_dir, 0, b""
        self.open: dict[str, list[str]] = {}  # operation id -> its tags

    def running(self, namespace: str, job_id: str) -> list[str]:
        self._read()
        prefix = f"jrs-{namespace}-{job_id}-f"
        return [op for op, tags in self.open.items() if any(t.startswith(prefix) for t in tags)]

    def _read(self) -> None:
        files = [f for f in sorted(os.listdir(self.events_dir)) if not f.startswith(".")]
        if not files:
            return
        with open(os.path.join(self.events_dir, files[0]), "rb") as fh:
            fh.seek(self.offset)
            data = self.partial + fh.read()
        self.offset += len(data) - len(self.partial)
        *lines, self.partial = data.split(b"\n")
        for line in lines:
            if b"SparkListenerConnectOperation" not in line:
                continue
            event = json.loads(line)
            if event["Event"].endswith("OperationStarted"):
                self.open[event["operationId"]] = list(event.get("sparkSessionTags", []))
            elif event["Event"] in OPERATION_ENDED:
                self.open.pop(event["operationId"], None)


def main(argv: list[str] | None = None) -> int:
    from jrs_testbench.trials import task

    task.StandInLauncher = ConnectTrialLauncher  # type: ignore[misc,assignment]
    code = task.run_task(json.loads((sys.argv[1:] if argv is None else argv)[0]))
    sys.stderr.flush()
    os._exit(code)  # not pyspark's atexit hooks: the session is released already


if __name__ == "__main__":
    sys.exit(main())
