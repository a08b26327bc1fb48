"""The job result store (FLIP-194 for Airflow + Spark): its contracts, and the Redis backend.

The contracts name no backend, one place per noun: :mod:`.namespace` (the one services object
every caller gets: :class:`~airflow_jrs.store.namespace.JobNamespace`), :mod:`.results` (entries:
the state machine, their encoding, result documents), :mod:`.leases` (one holder per job, and the
fence it writes with), :mod:`.intents` (the reference to a running job's spec),
:mod:`.heartbeats` (whether that submission still runs), :mod:`.stop_requests`,
:mod:`.recompute_requests`, :mod:`.recoveries` (the recovery log) and :mod:`.server_facts`. The
Redis backend implements them all in :mod:`.redis`, the only package that talks to Redis.
This module re-exports the public names; the key layout (``redis.keys.KeySpace``) is no public
name: only the store builds keys (docs/architecture.md, "Layers").
"""

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
from airflow_jrs.store.namespace import JobNamespace
from airflow_jrs.store.redis.namespace import RedisJobNamespace
from airflow_jrs.store.redis.results import RedisJobResultStore
from airflow_jrs.store.redis.results_aio import AsyncRedisJobResultStore
from airflow_jrs.store.results.base import JobResultStore
from airflow_jrs.store.results.serde import SCHEMA_VERSION

__all__ = [
    "SCHEMA_VERSION",
    "Actor",
    "AsyncRedisJobResultStore",
    "Attempt",
    "EntryState",
    "HistoryNote",
    "HistoryReason",
    "JobNamespace",
    "JobResult",
    "JobResultEntry",
    "JobResultStore",
    "JobStatus",
    "RedisJobNamespace",
    "RedisJobResultStore",
    "result_from_dict",
    "result_to_dict",
    "validate_job_id",
    "validate_namespace",
]
