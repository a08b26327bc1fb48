"""A SparkSession in the task's own process as the protocol's launcher (``@task.jrs_pyspark``).

:class:`SessionLauncher` is what :class:`~airflow_jrs.operators.pyspark.JrsPySparkOperator`
hands to the Airflow-free protocol (:class:`airflow_jrs.protocol.JobAttempt`). Its
:meth:`~SessionLauncher.run` builds the session (``local[*]`` or a ``spark://`` master) in this
process, calls the DAG author's function with it and the attempt's :class:`JobContext`, writes
the commit marker LAST (naming the job and fence, carrying the function's return value as the
result's metrics), and stops the session. It imports no Airflow: the session's master and conf
are resolved by the operator (from the connection, like the provider's ``PySparkOperator``)
and handed in as a callable, resolved only when a launch happens, so a committed job never
looks at Spark.

Why the lease alone suffices here (no supervisor, no heartbeat), unlike spark-submit: with a
local or ``spark://`` session the driver *is* this process. pyspark starts the driver JVM as
a child whose gateway exits when its stdin (a pipe from this process) closes, so when the task
process dies, by SIGKILL or otherwise, the driver dies with it, and a standalone master ends an
application whose driver is gone (its executors with it). Nothing of an attempt outlives the
task process, so there is nothing for a supervisor to watch or a heartbeat to report: a
successor that takes over the lease of a dead holder finds no application to wait for
(:meth:`SessionLauncher.predecessors_of` still looks for another process's driver JVM of the
job on this host, by the ``spark.jrs.*`` marks on its command line, in case one lingers for a
moment). While the task process lives it renews its lease; when it
*loses* the lease (a takeover, or Redis unreachable), the renewer calls :meth:`stop`, which
cancels the session's jobs and stops the session, so the holder that lost its lease does no
more work, and the fenced result write refuses what it might still try to record. A partition
from Redis is the one case the renewer alone notices too late (it gives up after a whole TTL,
when a successor on another host may already run): a watchdog stops the session once the lease
went unrenewed for the supervisor's self-fencing share of the TTL (:meth:`_self_fence`).

The driver JVM's stderr is not the task's: :mod:`airflow_jrs.launch.driver_log` starts the JVM
and logs its lines at the level each deserves, since Airflow logs a task process's stderr as ERROR.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import psutil

from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.launch.driver_log import QUIET_CONF, launch_gateway
from airflow_jrs.launch.supervisor import SELF_FENCE_SHARE
from airflow_jrs.protocol.launcher import Launch, Launcher, Predecessor
from airflow_jrs.protocol.processes import find_job_processes, process_alive
from airflow_jrs.spark.commit import write_commit_marker
from airflow_jrs.spark.conf import job_conf

if TYPE_CHECKING:
    from airflow_jrs.store.intents import Intent

#: The largest return value (as JSON) stored as the result's metrics; larger ones are not kept.
MAX_METRICS_BYTES = 16 * 1024


@dataclass(frozen=True)
class JobContext:
    """What the function learns about its attempt (passed as its ``jrs`` argument).

    Write output under :attr:`output` (the attempt's fenced folder: no other attempt writes
    there); the commit marker is written there after the function returns."""

    job_id: str
    namespace: str
    #: the attempt's fencing token (also ``spark.jrs.fence`` in the session's conf)
    fence: int
    #: the fenced output folder of this attempt
    output: str
    #: logical output name -> its path (the operator's ``outputs`` under :attr:`output`)
    outputs: Mapping[str, str] = field(default_factory=dict)


#: (master, Spark conf) of the session to build: resolved at launch time only.
SessionSettings = Callable[[], tuple[str, dict[str, str]]]
#: The DAG author's function, bound to its arguments: called with the session and the context.
SessionCall = Callable[[Any, JobContext], Any]


def metrics_of(value: Any, log: Any) -> dict[str, Any]:
    """The result's metrics for a function's return value: a dict as is, another JSON value as
    ``{"value": ...}``, ``None`` as ``{}``. A value that is not JSON or larger than
    :data:`MAX_METRICS_BYTES` is not stored (logged): metrics live in Redis, data does not."""
    if value is None:
        return {}
    metrics = value if isinstance(value, dict) else {"value": value}
    try:
        encoded = json.dumps(metrics, sort_keys=True)
    except (TypeError, ValueError) as exc:
        log.warning(
            "The function's return value is not JSON (%s); it is not stored as the result's metrics. Return "
            "a small dict of numbers and strings to record it.",
            exc,
        )
        return {}
    if len(encoded) > MAX_METRICS_BYTES:
        log.warning(
            "The function's return value is %d bytes as JSON (limit %d); it is not stored as the result's "
            "metrics. Write large results to the output folder and return a small summary.",
            len(encoded),
            MAX_METRICS_BYTES,
        )
        return {}
    return dict(json.loads(encoded))


class SessionLauncher(Launcher):
    """One attempt's SparkSession in this process: build, call, commit marker, stop."""

    name = "pyspark session"

    def __init__(self, call: SessionCall, settings: SessionSettings, *, callable_name: str, log: Any) -> None:
        self.call, self.settings, self.callable_name, self.log = call, settings, callable_name, log
        self._lock = threading.RLock()  # stop() runs from on_kill, a signal handler on the thread that may hold it
        self._session: Any = None
        self._stopped = False
        self._resolved: tuple[str, dict[str, str]] | None = None

    def prepare(self, launch: Launch) -> dict[str, Any]:
        master, conf = self._resolved = self.settings()
        return {"launcher": "pyspark-session", "callable": self.callable_name, "master": master, "conf": conf}

    def context(self, launch: Launch) -> JobContext:
        outputs = {
            name: (f"{launch.staging}/{sub}".rstrip("/") if sub else launch.staging)
            for name, sub in launch.run.outputs.items()
        }
        return JobContext(launch.job_id, launch.namespace, int(launch.fence), launch.staging, outputs)

    def run(self, launch: Launch) -> None:
        from pyspark import SparkConf, SparkContext
        from pyspark.sql import SparkSession

        master, conf = self._resolved or self.settings()
        if SparkContext._active_spark_context is not None:
            raise JrsConfigError(
                f"job {launch.job_id}: a SparkContext already runs in this process; getOrCreate() would hand "
                "back that one, without this attempt's job and fence in its conf. Stop it before the task "
                "runs (the task creates and stops its own session)."
            )
        spark_conf = SparkConf()
        full = {
            **QUIET_CONF,  # no progress bars on stderr, which Airflow logs as ERROR (driver_log.py)
            **conf,
            "spark.master": master,
            "spark.app.name": launch.app_name,
            **job_conf(job_id=launch.job_id, namespace=launch.namespace, fence=launch.fence, output_dir=launch.staging),
        }
        for key, value in full.items():
            spark_conf.set(key, str(value))
        with self._lock:
            if self._stopped:  # killed or lost the lease before the session existed
                raise RuntimeError(f"job {launch.job_id}: stopped before the session started")
        if SparkContext._gateway is None:  # this process's first session starts the driver JVM
            SparkContext(conf=spark_conf, gateway=launch_gateway(spark_conf))
        spark = SparkSession.builder.config(conf=spark_conf).getOrCreate()
        with self._lock:
            self._session = spark
            stopped = self._stopped
        done = self._start_self_fence(launch)
        try:
            if stopped:
                raise RuntimeError(f"job {launch.job_id}: stopped while the session started")
            metrics = metrics_of(self.call(spark, self.context(launch)), self.log)
            with self._lock:
                if self._stopped:  # a function that swallowed the cancel: its output is not complete
                    raise RuntimeError(f"job {launch.job_id}: stopped before its commit marker was written")
                # LAST: the marker vouches for every byte the function wrote (spark/commit.py).
                write_commit_marker(spark, launch.staging, metrics)
        finally:
            done.set()
            with self._lock:
                self._session = None
            spark.stop()

    def _start_self_fence(self, launch: Launch) -> threading.Event:
        """Start :meth:`_self_fence`; set the event it returns once the session is gone."""
        done = threading.Event()
        threading.Thread(target=self._self_fence, args=(launch, done), name="jrs-self-fence", daemon=True).start()
        return done

    def _self_fence(self, launch: Launch, done: threading.Event) -> None:
        """Stop the session once the lease could not be renewed for most of its TTL, before the key
        can expire on the server and a successor on another host may start (the supervisor's
        self-fencing rule, :data:`airflow_jrs.launch.supervisor.SELF_FENCE_SHARE`: the driver here has
        no supervisor, and the renewer alone gives up only after a whole TTL)."""
        lease = launch.run.lease
        while not done.wait(min(lease.ttl / 6, 0.5)):
            if not lease.held_for_sure(SELF_FENCE_SHARE):
                self.log.error(
                    "Job %s: the lease was not renewed for %.0f%% of its %.0fs TTL (Redis unreachable?); stopping "
                    "the session before the lease can expire and a successor start.",
                    launch.job_id, SELF_FENCE_SHARE * 100, lease.ttl,
                )  # fmt: skip
                self.stop()
                return

    def predecessors_of(self, namespace: str, stale: Intent) -> list[Predecessor]:
        """The job's driver JVMs on this host, except this process's own: pyspark keeps its gateway
        JVM (started with the first session's ``spark.jrs.*`` conf on its command line) for the
        life of the process, so a second attempt in one process (``dag.test()``, a retry after
        ``on_kill``) would otherwise wait for itself forever."""
        own = {os.getpid(), *(child.pid for child in psutil.Process().children(recursive=True))}
        return [
            Predecessor(
                description=f"local driver pid {proc.pid}", alive=partial(process_alive, proc), stop=proc.terminate
            )
            for proc in find_job_processes(namespace, stale.job_id)
            if proc.pid not in own
        ]

    def alive(self) -> bool:
        with self._lock:
            return self._session is not None

    def stop(self) -> None:
        """Cancel the session's jobs and stop it: the function's running action fails at once and
        no further one can start. Runs from a signal handler or the lease renewer's thread, on
        py4j connections of its own (the gateway client hands each caller one). Never raises."""
        with self._lock:
            self._stopped = True
            spark = self._session
        if spark is None:
            return
        try:
            spark.sparkContext.cancelAllJobs()
        except Exception as exc:
            self.log.warning("Could not cancel the session's Spark jobs: %s", exc)
        try:
            spark.stop()
        except Exception as exc:
            self.log.warning("Could not stop the Spark session: %s", exc)
