"""airflow-jrs: Spark jobs from Airflow, computed once (a job result store after Flink's FLIP-194).

The public surface is re-exported here; everything else is internal. Airflow-facing classes
(operators, sensors, hooks) are imported lazily so that ``import airflow_jrs`` stays cheap and
usable inside a PySpark driver without Airflow.
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
from airflow_jrs.lease import JobLease
from airflow_jrs.store import (
    Attempt,
    EntryState,
    JobResult,
    JobResultEntry,
    JobResultStore,
    JobStatus,
    RedisJobResultStore,
)

if TYPE_CHECKING:
    from airflow_jrs.hooks.jrs import JrsHook
    from airflow_jrs.operators.cleanup import JrsCleanupOperator
    from airflow_jrs.operators.factory import jrs_spark_job
    from airflow_jrs.operators.spark import JrsSparkSubmitOperator
    from airflow_jrs.sensors.job_result import JobResultSensor
    from airflow_jrs.triggers.job_result import JobResultTrigger

__version__ = "0.1.0"

_LAZY = {
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
