"""When the store cannot be reached or refuses: bounded waits, then one clear line, fail closed.

Two halves, one rule (docs/architecture.md invariant 7, docs/operations-store-errors.md):

* :func:`~airflow_jrs.store.redis.clients.apply_client_policy` bounds every wait on Redis: a connect
  timeout, a read timeout and a few retries with exponential backoff (``[jrs] connect_timeout``,
  ``read_timeout``, ``retries``, ``retry_backoff``, ``retry_backoff_max``). A retry only happens after a failed
  or timed-out command, so the happy path costs no extra round trip.
* :func:`airflow_failures` turns what still fails into what Airflow understands, in the
  operators and the sensor (the store itself stays Airflow-free): one line naming the
  connection id, the host, what failed and what to do (never the password), and

  - a :class:`StoreUnavailableError` that waiting may fix (refused, timeout, DNS, LOADING,
    READONLY, OOM) stays a retryable task failure: Airflow's retries take over;
  - what no retry can fix (wrong password or ACL refusal, an invalid job id, a quarantined or
    corrupt entry, a newer schema version, a configuration error) raises
    ``AirflowFailException`` from the original: the task fails without burning its retries.

A write whose reply is lost (a timeout after Redis ran it) is retried like any command: every
write is a compare-and-set script, so a repeat cannot write twice; at worst it reports
"already exists" or "lease held" and the next attempt reads what is really there.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from airflow.providers.common.compat.sdk import AirflowFailException

from airflow_jrs.exceptions import (
    CorruptCommitMarkerError,
    CorruptIntentError,
    CorruptJobResultError,
    InvalidJobIdError,
    JobResultQuarantinedError,
    JrsConfigError,
    StoreUnavailableError,
    UnsupportedSchemaVersionError,
)
from airflow_jrs.observability.metrics import QUARANTINE_ERRORS, TASK_METRICS, current_task
from airflow_jrs.store.redis.diagnosis import unavailable_line


class StoreConnection(Protocol):
    """What a failure line needs of the store's connection (a :class:`~airflow_jrs.hooks.JrsHook`):
    its id, where it points, and its password, to mask. A protocol, so this module imports no hook."""

    jrs_conn_id: str

    def server(self) -> str: ...

    def get_connection(self, conn_id: str) -> Any: ...


__all__ = ["NEEDS_A_PERSON", "StoreConnection", "airflow_failures", "explain"]

#: Errors that need a person: failing the task at once beats waiting for its retries.
NEEDS_A_PERSON: tuple[type[Exception], ...] = (
    InvalidJobIdError,
    JrsConfigError,
    JobResultQuarantinedError,
    CorruptJobResultError,
    UnsupportedSchemaVersionError,
    CorruptIntentError,
    CorruptCommitMarkerError,
)


def explain(exc: StoreUnavailableError, *, conn_id: str, server: str, password: str | None = None) -> str:
    """One line: the connection id and host, what failed, what is wrong and what to do."""
    return unavailable_line(exc, conn=f"connection {conn_id!r}", server=server, password=password)


def _password(hook: StoreConnection) -> str | None:
    try:
        return hook.get_connection(hook.jrs_conn_id).password or None
    except Exception:
        return None


def _count(exc: Exception) -> None:
    """A store error (by kind) or a read that met quarantine, in Airflow's metrics; nothing else."""
    if isinstance(exc, (StoreUnavailableError, *QUARANTINE_ERRORS)):
        dag_id, task_id = current_task()
        TASK_METRICS.failed(exc, dag_id=dag_id, task_id=task_id)


@contextmanager
def airflow_failures(hook: StoreConnection) -> Iterator[None]:
    """Map store failures inside the block to Airflow outcomes (see the module docstring); each
    store error (by kind) and each read that met quarantine is counted in Airflow's metrics
    (:mod:`airflow_jrs.observability.metrics`), tagged with the running task."""
    try:
        yield
    except StoreUnavailableError as exc:
        _count(exc)
        line = explain(exc, conn_id=hook.jrs_conn_id, server=hook.server(), password=_password(hook))
        if exc.retryable:
            raise StoreUnavailableError(
                line,
                namespace=exc.namespace,
                job_id=exc.job_id,
                retryable=True,
                what=exc.what,
                kind=exc.kind,
            ) from exc.__cause__
        raise AirflowFailException(f"{line} Not retried: retrying cannot fix this.") from exc
    except NEEDS_A_PERSON as exc:
        _count(exc)
        raise AirflowFailException(" ".join(str(exc).split())) from exc
