"""Airflow metrics for what the guard decides, through Airflow's own metrics API.

Every metric is in :data:`METRICS`, the one table the metrics reference
(``docs/reference/metrics.md``) is generated from. They are counters, sent through the
``Stats`` object Airflow itself emits ``ti.start`` and ``triggers.succeeded`` through in that
process, so ``[metrics]`` decides everything: StatsD, DogStatsD or OpenTelemetry, host, port,
prefix, allow and block lists, which tags survive. Which object that is differs per minor
(:func:`airflow_stats`); a unit test (``test_metrics_airflow``) pins it against the task
runner's and the triggerer's own imports on each of them.

Where they are emitted: where the guard decides, i.e. where Airflow runs task code.

* the worker: the attempt's decisions (:mod:`airflow_jrs.domain.signals`, heard through the
  :class:`~airflow_jrs.store.namespace.JobNamespace` that :meth:`airflow_jrs.hooks.JrsHook.jobs`
  builds with :data:`TASK_METRICS`), and the store errors and quarantined reads that end a
  task's store call (:func:`airflow_jrs.hooks.store_failures.airflow_failures`);
* the triggerer: a skip decided there (``start_in_triggerer``) and what its reads meet
  (:mod:`airflow_jrs.triggers`, with :data:`TRIGGERER_METRICS`).

Never in the API server or the CLI: they make no decision, and neither reaches this module
(the unit test ``test_metrics`` checks the importers).

Tags: ``dag_id`` and ``task_id``, the keys Airflow's own task metrics use
(``RuntimeTaskInstance.stats_tags``). Plain StatsD drops tags, so what must survive it (the
decision, the error's kind) is in the metric's name; DogStatsD (``statsd_datadog_enabled``),
InfluxDB-style StatsD and OpenTelemetry keep them.

A metrics backend must never fail or delay a task: a StatsD client sends one UDP datagram per
metric and never waits for an answer (a server that is down loses the datagram; plain StatsD
does not even know). What does go wrong on the way is said once per process in the log, and the
task goes on: anything that raises (a broken ``stat_name_handler``, an exporter that cannot
start), and what a client logs while sending one of these metrics (DogStatsD warns of every
packet its agent refuses: :class:`_OursOnce` turns that into the one line).
Importing this module imports no Airflow (the docs build imports it for the reference).
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from typing import Any

from airflow_jrs.domain import signals
from airflow_jrs.domain.signals import run_seconds
from airflow_jrs.exceptions import CorruptJobResultError, JobResultQuarantinedError, StoreUnavailableError
from airflow_jrs.store import JobResult
from airflow_jrs.store.redis.diagnosis import KINDS
from airflow_jrs.store.redis.durability import NOT_DURABLE

__all__ = [
    "METRICS",
    "STORE_ERROR_KINDS",
    "TASK_METRICS",
    "TRIGGERER_METRICS",
    "AirflowMetrics",
    "Metric",
    "airflow_stats",
]

log = logging.getLogger(__name__)

#: Where a metric is emitted: the process kinds :func:`airflow_stats` knows.
WORKER, TRIGGERER = "worker", "triggerer"
#: The tags of every metric, named as Airflow names them on its own task metrics.
TAGS = ("dag_id", "task_id")
#: What a store error's ``kind`` can be: the diagnosis of a Redis failure, or a write that
#: ``durability`` could not confirm.
STORE_ERROR_KINDS = (*KINDS, NOT_DURABLE)
#: The entry-level errors that mean a read met quarantine: a corrupt entry (moved there by this
#: read) or one already there.
QUARANTINE_ERRORS: tuple[type[Exception], ...] = (CorruptJobResultError, JobResultQuarantinedError)


@dataclass(frozen=True)
class Metric:
    """One metric: its name (before ``[metrics] statsd_prefix``), where it is emitted, what it counts."""

    name: str
    where: tuple[str, ...]
    meaning: str
    #: what one emission adds: 1, or a number of seconds
    unit: str = "1 per event"


def _decision(decision: str) -> str:
    return f"jrs.decision.{decision}"


#: What a ``{kind}`` in a name stands for (the reference lists the values).
STORE_ERROR = "jrs.store_error.{kind}"
TOOK_OVER = "jrs.lease.took_over"
QUARANTINED_READ = "jrs.read.quarantined"
SAVED_SECONDS = "jrs.skip.saved_seconds"

#: Every metric airflow-jrs emits. The reference page is generated from this table.
METRICS: tuple[Metric, ...] = (
    Metric(_decision(signals.SKIPPED), (WORKER, TRIGGERER),
           "A task reused the job's SUCCEEDED result (same fingerprint): Spark was not started."),
    Metric(_decision(signals.LAUNCHED), (WORKER,),
           "An attempt launched the job's application, under its lease and after recording its intent "
           "(a resubmission is launched too)."),
    Metric(_decision(signals.ADOPTED), (WORKER,),
           "An attempt published the finished output of a predecessor that died before recording it, "
           "without running Spark again."),
    Metric(_decision(signals.RESUBMITTED), (WORKER,),
           "A dead predecessor left no complete output: the attempt submits the job again."),
    Metric(_decision(signals.WAITED), (WORKER,),
           "An attempt waited for a dead predecessor's application to end (`predecessor=\"wait\"`)."),
    Metric(_decision(signals.STOPPED_PREDECESSOR), (WORKER,),
           "An attempt stopped a dead predecessor's application (`predecessor=\"stop\"`)."),
    Metric(TOOK_OVER, (WORKER,),
           "An attempt took over the job's lease from a holder that is provably dead, or from an earlier "
           "try of the same task instance, instead of waiting for its TTL."),
    Metric(QUARANTINED_READ, (WORKER, TRIGGERER),
           "A read met a quarantined entry: a corrupt one it moved to quarantine, or one already there. The job "
           "is blocked until someone inspects it (`airflow-jrs quarantined`, `airflow-jrs release-quarantine`)."),
    Metric(STORE_ERROR, (WORKER, TRIGGERER),
           "The store could not be read or written, by the diagnosed kind of failure (see below). Counted "
           "where a task's store call fails (the task then fails closed, or Airflow retries it) and where a "
           "trigger loses its connection."),
    Metric(SAVED_SECONDS, (WORKER, TRIGGERER),
           "The Spark time a skip avoided: the reused result's run time (`end_time - start_time`), rounded to "
           "whole seconds. Not sent when the result has no start time (an adopted result).",
           unit="seconds"),
)  # fmt: skip
BY_NAME: Mapping[str, Metric] = {m.name: m for m in METRICS}


# -- Airflow's Stats -------------------------------------------------------------------------
@cache
def airflow_stats(where: str) -> Any:
    """The ``Stats`` Airflow itself emits through in a ``where`` process, on this minor.

    * 3.2 and later: the Task SDK's ``airflow.sdk.observability.stats`` in a task (the task
      runner initializes it from ``[metrics]``), airflow-core's ``airflow.observability.stats``
      in the triggerer (the triggerer initializes that one; its trigger runner is a fork);
    * 3.1: ``airflow.stats`` in both (it configures itself from ``[metrics]`` on first use).

    Each has ``incr(stat, count, rate, *, tags)``. A process that initialized none of them (a
    ``dag.test()``, which runs tasks without the task runner's start-up) sends nothing, as
    Airflow's own task metrics do there.
    """
    if where not in (WORKER, TRIGGERER):
        raise ValueError(f"where must be {WORKER!r} or {TRIGGERER!r}, got {where!r}")
    module = "airflow.sdk.observability.stats" if where == WORKER else "airflow.observability.stats"
    try:
        return importlib.import_module(module).Stats
    except ImportError:  # Airflow 3.1
        return importlib.import_module("airflow.stats").Stats


_said: int | None = None  # the pid that already said the backend failed


def _say_once(what: str) -> None:
    global _said
    if _said == os.getpid():
        return
    _said = os.getpid()
    log.warning(
        "airflow-jrs could not send a metric through Airflow's metrics ([metrics]): %s. The task goes on; "
        "this process does not say it again.", what,
    )  # fmt: skip


#: The loggers of the StatsD clients Airflow sends through that log each failed send themselves:
#: DogStatsD warns of every packet its agent refuses (a connected UDP socket hears "connection
#: refused" while the agent is down), which would be a line in the task log per metric.
CLIENT_LOGGERS = ("datadog.dogstatsd",)
#: Set while this module sends: what a client logs then is this module's to say (once).
_sending: ContextVar[bool] = ContextVar("airflow_jrs_metrics_sending", default=False)


class _OursOnce(logging.Filter):
    """On a client's logger: a warning logged while this module sends becomes :func:`_say_once`'s
    one line; everything else (Airflow's own metrics, debug lines) passes unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _sending.get() or record.levelno < logging.WARNING:
            return True
        _say_once(f"{record.name}: {record.getMessage()}")
        return False


_FILTER = _OursOnce()


def _hear_clients() -> None:
    """Put :data:`_FILTER` on the clients' loggers (once; a filter is kept by identity)."""
    for name in CLIENT_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


def _tags(dag_id: str | None, task_id: str | None) -> dict[str, str]:
    return {k: str(v) for k, v in (("dag_id", dag_id), ("task_id", task_id)) if v}


class AirflowMetrics:
    """A :class:`~airflow_jrs.domain.signals.Signals` sink that counts through Airflow's ``Stats``
    in a ``where`` process (:data:`WORKER` or :data:`TRIGGERER`); never raises."""

    def __init__(self, where: str) -> None:
        if where not in (WORKER, TRIGGERER):
            raise ValueError(f"where must be {WORKER!r} or {TRIGGERER!r}, got {where!r}")
        self.where = where

    def __repr__(self) -> str:
        return f"AirflowMetrics({self.where!r})"

    def count(self, name: str, *, dag_id: str | None, task_id: str | None, count: int = 1) -> None:
        """Add ``count`` to metric ``name`` (a name of :data:`METRICS`, ``{kind}`` filled in)."""
        _hear_clients()
        sending = _sending.set(True)
        try:
            airflow_stats(self.where).incr(name, count=count, tags=_tags(dag_id, task_id))
        except Exception as exc:
            _say_once(f"{type(exc).__name__}: {exc}")
        finally:
            _sending.reset(sending)

    # -- what the protocol tells (domain/signals.py) -----------------------------------------
    def decided(
        self, decision: str, *, dag_id: str | None, task_id: str | None, reused: JobResult | None = None
    ) -> None:
        if decision not in signals.DECISIONS:
            return
        self.count(_decision(decision), dag_id=dag_id, task_id=task_id)
        if decision == signals.SKIPPED and reused is not None:
            seconds = run_seconds(reused)
            if seconds is not None:
                self.count(SAVED_SECONDS, dag_id=dag_id, task_id=task_id, count=round(seconds))

    def took_over(self, *, dag_id: str | None, task_id: str | None) -> None:
        self.count(TOOK_OVER, dag_id=dag_id, task_id=task_id)

    # -- what the adapters meet ----------------------------------------------------------------
    def failed(self, exc: BaseException, *, dag_id: str | None, task_id: str | None) -> None:
        """Count ``exc`` if it is a store error (by kind) or a read that met quarantine; anything
        else is not the store's failure and counts nothing."""
        if isinstance(exc, StoreUnavailableError):
            kind = exc.kind if exc.kind in STORE_ERROR_KINDS else "other"
            self.count(STORE_ERROR.format(kind=kind), dag_id=dag_id, task_id=task_id)
        elif isinstance(exc, QUARANTINE_ERRORS):
            self.count(QUARANTINED_READ, dag_id=dag_id, task_id=task_id)


#: The sink of task code on a worker (the hook hands it to the protocol).
TASK_METRICS = AirflowMetrics(WORKER)
#: The sink of the triggers.
TRIGGERER_METRICS = AirflowMetrics(TRIGGERER)


def task_of(ti: Any) -> tuple[str | None, str | None]:
    """``(dag_id, task_id)`` of a task instance, or ``(None, None)`` without one (a trigger that
    Airflow did not hand its task instance)."""
    return getattr(ti, "dag_id", None), getattr(ti, "task_id", None)


def current_task() -> tuple[str | None, str | None]:
    """``(dag_id, task_id)`` of the task running in this process (Airflow's current context), or
    ``(None, None)`` outside one: for the code that fails a task's store call, which is not handed
    the task."""
    try:
        from airflow.providers.common.compat.sdk import get_current_context

        return task_of(get_current_context()["ti"])
    except Exception:
        return None, None
