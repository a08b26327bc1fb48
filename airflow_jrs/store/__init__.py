"""The job result store (FLIP-194 for Airflow + Spark). Depends on redis-py and the stdlib only."""

from airflow_jrs.domain.model import (
    Actor,
    Attempt,
    EntryState,
    HistoryNote,
    HistoryReason,
    JobResult,
    JobResultEntry,
    JobStatus,
    validate_job_id,
    validate_namespace,
)
from airflow_jrs.domain.result_json import result_from_dict, result_to_dict
from airflow_jrs.store.plumbing.keys import KeySpace
from airflow_jrs.store.results.aio import AsyncRedisJobResultStore
from airflow_jrs.store.results.base import JobResultStore
from airflow_jrs.store.results.redis import RedisJobResultStore
from airflow_jrs.store.results.serde import SCHEMA_VERSION

__all__ = [
    "SCHEMA_VERSION",
    "Actor",
    "AsyncRedisJobResultStore",
    "Attempt",
    "EntryState",
    "HistoryNote",
    "HistoryReason",
    "JobResult",
    "JobResultEntry",
    "JobResultStore",
    "JobStatus",
    "KeySpace",
    "RedisJobResultStore",
    "result_from_dict",
    "result_to_dict",
    "validate_job_id",
    "validate_namespace",
]
