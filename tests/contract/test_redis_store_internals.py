"""What only the Redis backend has: literal key names, hash-tag slots, the index.

Not part of the generic contract (``test_store_contract.py`` runs that against every backend);
these tests talk to Redis directly, as Flink keeps ``FileSystemJobResultStoreFileOperationsTest``
apart from its contract suite.
"""

from __future__ import annotations

import json
import time

import pytest
import redis
from harness import GARBAGE, entry_doc, ok
from redis.crc import key_slot

from airflow_jrs.exceptions import CorruptJobResultError
from airflow_jrs.lease import JobLease
from airflow_jrs.store import JobResult, JobStatus, KeySpace, RedisJobResultStore


def test_redis_key_names_are_pinned() -> None:
    k = KeySpace("prod")
    job = "d.t.2013-01-01"
    assert k.result(job) == "jrs:{prod}:result:d.t.2013-01-01"
    assert k.dirty == "jrs:{prod}:dirty"
    assert k.index == "jrs:{prod}:index"
    assert k.history(job) == "jrs:{prod}:history:d.t.2013-01-01"
    assert k.quarantine(job) == "jrs:{prod}:quarantine:d.t.2013-01-01"
    assert k.quarantined == "jrs:{prod}:quarantined"
    assert k.lease(job) == "jrs:{prod}:lease:d.t.2013-01-01"
    assert k.fence(job) == "jrs:{prod}:fence:d.t.2013-01-01"
    assert k.intent(job) == "jrs:{prod}:intent:d.t.2013-01-01"
    assert k.events == "jrs:{prod}:events"


def test_redis_store_writes_at_the_pinned_keys(redis_client: redis.Redis, namespace: str) -> None:
    store = RedisJobResultStore(redis_client, namespace)
    store.create_dirty_result(ok("d.t.2013-01-01"))
    assert redis_client.type(f"jrs:{{{namespace}}}:result:d.t.2013-01-01") == b"string"
    assert redis_client.smembers(f"jrs:{{{namespace}}}:dirty") == {b"d.t.2013-01-01"}
    assert redis_client.zscore(f"jrs:{{{namespace}}}:index", "d.t.2013-01-01") is not None
    store.mark_result_as_clean("d.t.2013-01-01")
    assert redis_client.smembers(f"jrs:{{{namespace}}}:dirty") == set()
    raw = redis_client.get(f"jrs:{{{namespace}}}:result:d.t.2013-01-01")
    assert raw is not None and raw.startswith(b'{"state":"clean","v":1,')


def test_every_redis_key_a_job_touches_shares_the_namespace_slot(redis_client: redis.Redis, namespace: str) -> None:
    store = RedisJobResultStore(redis_client, namespace)
    job = "d.t.2013-01-01"
    lease = JobLease(redis_client, namespace, job, ttl=10)
    token = lease.acquire()
    redis_client.set(KeySpace(namespace).intent(job), b"{}")
    store.create_dirty_result(JobResult(job_id=job, status=JobStatus.FAILED), fence=token)
    store.create_dirty_result(ok(job), fence=token, supersede=True)  # history
    store.create_dirty_result(ok("other"))
    redis_client.set(KeySpace(namespace).result("other"), GARBAGE)
    with pytest.raises(CorruptJobResultError):
        store.get_entry("other")  # quarantine + quarantined set
    redis_client.set(KeySpace(namespace).intent(job), b"{}")

    touched = sorted(k.decode() for k in redis_client.scan_iter(match=f"*{namespace}*", count=1000))
    assert {k.rsplit(":", 1)[0] if k.count(":") > 2 else k for k in touched} >= {
        f"jrs:{{{namespace}}}:result",
        f"jrs:{{{namespace}}}:history",
        f"jrs:{{{namespace}}}:quarantine",
        f"jrs:{{{namespace}}}:lease",
        f"jrs:{{{namespace}}}:fence",
        f"jrs:{{{namespace}}}:intent",
        f"jrs:{{{namespace}}}:dirty",
        f"jrs:{{{namespace}}}:index",
        f"jrs:{{{namespace}}}:quarantined",
    }
    slot = key_slot(namespace.encode())
    assert all(k.startswith(f"jrs:{{{namespace}}}:") for k in touched), touched
    assert {key_slot(k.encode()) for k in touched} == {slot}
    assert key_slot(KeySpace(namespace).events.encode()) == slot


def test_list_entries_drops_expired_clean_entries_from_the_index(redis_client: redis.Redis, namespace: str) -> None:
    store = RedisJobResultStore(redis_client, namespace, clean_ttl=0.05)
    store.create_dirty_result(ok("gone"))
    store.mark_result_as_clean("gone")
    time.sleep(0.2)
    assert store.list_entries() == []
    assert redis_client.zscore(KeySpace(namespace).index, "gone") is None


def test_list_entries_keeps_an_entry_of_a_future_schema_version_in_the_index(
    redis_client: redis.Redis, namespace: str
) -> None:
    store = RedisJobResultStore(redis_client, namespace)
    store.create_dirty_result(ok("newer"))
    redis_client.set(KeySpace(namespace).result("newer"), json.dumps(entry_doc("newer", v=99)))
    assert store.list_entries() == []
    assert redis_client.zscore(KeySpace(namespace).index, "newer") is not None
