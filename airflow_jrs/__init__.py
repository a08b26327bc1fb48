"""airflow-jrs: Spark jobs from Airflow, computed once (a job result store after Flink's FLIP-194).

The public surface is re-exported here; everything else is internal. Only the errors are
imported eagerly (standard library only); the store and the lease (``redis``) and the
Airflow-facing classes (operators, sensors, hooks) are imported on first use (PEP 562), so
``import airflow_jrs`` stays cheap and a PySpark driver imports neither Redis nor Airflow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_jrs.exceptions import (
    CleanupError,
    CorruptJobResultError,
    InvalidJobIdError,
    JobKilledError,
    JobResultEntryAlreadyExistsError,
    JobResultEntryChangedError,
    JobResultEntryError,
    JobResultQuarantinedError,
    JrsConfigError,
    JrsError,
    LeaseError,
    LeaseHeldError,
    LeaseLostError,
    NoSuchJobResultError,
    StoreUnavailableError,
    UnsupportedSchemaVersionError,
)

if TYPE_CHECKING:
    from airflow_jrs.hooks.jrs import JrsHook
    from airflow_jrs.operators.cleanup import JrsCleanupOperator
    from airflow_jrs.operators.factory import jrs_spark_job
    from airflow_jrs.operators.spark import JrsSparkSubmitOperator
    from airflow_jrs.sensors.job_result import JobResultSensor
    from airflow_jrs.store import (
        Attempt,
        EntryState,
        JobResult,
        JobResultEntry,
        JobResultStore,
        JobStatus,
        RedisJobResultStore,
    )
    from airflow_jrs.store.leases.lease import JobLease
    from airflow_jrs.triggers.job_result import JobResultTrigger

__version__ = "0.1.0"

#: Imported on first use: the store and the lease import ``redis``, the rest Airflow too. So
#: ``import airflow_jrs.spark`` inside a PySpark driver imports neither (the errors below are
#: standard library only).
_LAZY = {
    "Attempt": "airflow_jrs.store",
    "EntryState": "airflow_jrs.store",
    "JobResult": "airflow_jrs.store",
    "JobResultEntry": "airflow_jrs.store",
    "JobResultStore": "airflow_jrs.store",
    "JobStatus": "airflow_jrs.store",
    "RedisJobResultStore": "airflow_jrs.store",
    "JobLease": "airflow_jrs.store.leases.lease",
    "JrsHook": "airflow_jrs.hooks.jrs",
    "JrsSparkSubmitOperator": "airflow_jrs.operators.spark",
    "JrsCleanupOperator": "airflow_jrs.operators.cleanup",
    "jrs_spark_job": "airflow_jrs.operators.factory",
    "JobResultSensor": "airflow_jrs.sensors.job_result",
    "JobResultTrigger": "airflow_jrs.triggers.job_result",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'airflow_jrs' has no attribute {name!r}")


__all__ = [
    "Attempt",
    "CleanupError",
    "CorruptJobResultError",
    "EntryState",
    "InvalidJobIdError",
    "JobKilledError",
    "JobLease",
    "JobResult",
    "JobResultEntry",
    "JobResultEntryAlreadyExistsError",
    "JobResultEntryChangedError",
    "JobResultEntryError",
    "JobResultQuarantinedError",
    "JobResultSensor",
    "JobResultStore",
    "JobResultTrigger",
    "JobStatus",
    "JrsCleanupOperator",
    "JrsConfigError",
    "JrsError",
    "JrsHook",
    "JrsSparkSubmitOperator",
    "LeaseError",
    "LeaseHeldError",
    "LeaseLostError",
    "NoSuchJobResultError",
    "RedisJobResultStore",
    "StoreUnavailableError",
    "UnsupportedSchemaVersionError",
    "__version__",
    "jrs_spark_job",
]
