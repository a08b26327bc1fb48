"""The job result store (FLIP-194 for Airflow + Spark). Depends on redis-py and the stdlib only.

One place per noun, each with its Lua beside it, so that a rule about one noun is found in one
place: :mod:`.results` (entries: the contract, the Redis store, its reads, purge and encoding),
:mod:`.leases` (one holder per job, and the fence it writes with), :mod:`.intents` (the
reference to a running job's spec), :mod:`.heartbeats` (whether that submission still runs),
:mod:`.stop_requests`, :mod:`.recompute_requests` and :mod:`.recoveries` (the recovery log).
What they share and no noun owns (clients, errors and their diagnosis, keys, the scripts'
codes and fence check) is :mod:`.plumbing`. This module re-exports the public names; the key
layout (``plumbing.keys.KeySpace``) is no public name: only the store builds keys
(docs/architecture.md, "Layers").
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
    "JobResult",
    "JobResultEntry",
    "JobResultStore",
    "JobStatus",
    "RedisJobResultStore",
    "result_from_dict",
    "result_to_dict",
    "validate_job_id",
    "validate_namespace",
]
