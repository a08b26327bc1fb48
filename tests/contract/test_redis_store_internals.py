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

from airflow_jrs.exceptions import CorruptJobResultError, JobResultEntryAlreadyExistsError, JrsConfigError
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
    assert k.fence(job) == "jrs:{prod}:fence:d.t.2013-01-01"  # legacy: read, never created
    assert k.fence_counter == "jrs:{prod}:fence"
    assert k.unsuccessful == "jrs:{prod}:unsuccessful"
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
    assert raw is not None and raw.startswith(b'{"s":"c","v":2,')


def test_every_redis_key_a_job_touches_shares_the_namespace_slot(redis_client: redis.Redis, namespace: str) -> None:
    store = RedisJobResultStore(redis_client, namespace)
    job = "d.t.2013-01-01"
    lease = JobLease(redis_client, namespace, job, ttl=10)
    token = lease.acquire()
    redis_client.set(KeySpace(namespace).intent(job), b"{}")
    store.create_dirty_result(JobResult(job_id=job, status=JobStatus.FAILED), fence=token)
    store.create_dirty_result(ok(job), fence=token, supersede=True)  # history
    store.create_dirty_result(ok("other"))
    store.create_dirty_result(JobResult(job_id="gave-up", status=JobStatus.FAILED))  # unsuccessful set
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
        f"jrs:{{{namespace}}}:unsuccessful",
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


# -- a store written by the version before schema 2 (docs/store-lifecycle.md, "Upgrading") ------


def _v1(job_id: str, *, state: str = "dirty", status: str = "SUCCEEDED", fingerprint: str | None = None) -> bytes:
    """An entry exactly as the previous version wrote it: schema 1, the job id inside."""
    result: dict[str, object] = {"job_id": job_id, "status": status, "outputs": {"o": f"/out/{job_id}"}}
    if fingerprint is not None:
        result["fingerprint"] = fingerprint
    doc = {"state": state, "v": 1, "created_at": "2013-01-02T00:00:00+00:00", "result": result}
    return json.dumps(doc, separators=(",", ":")).encode()


def _write_v1(client: redis.Redis, namespace: str, job_id: str, **kwargs: object) -> None:
    """What the previous version left: the entry, its index member and (dirty) its dirty-set member."""
    k = KeySpace(namespace)
    raw = _v1(job_id, **kwargs)  # type: ignore[arg-type]
    client.set(k.result(job_id), raw)
    client.zadd(k.index, {job_id: 1})
    if raw.startswith(b'{"state":"dirty"'):
        client.sadd(k.dirty, job_id)


def test_entries_of_the_previous_schema_are_read_cleaned_and_superseded(
    redis_client: redis.Redis, namespace: str
) -> None:
    store = RedisJobResultStore(redis_client, namespace)
    k = KeySpace(namespace)
    _write_v1(redis_client, namespace, "old.clean", state="clean", fingerprint="fp")
    _write_v1(redis_client, namespace, "old.dirty")
    _write_v1(redis_client, namespace, "old.failed", status="FAILED")
    clean = store.get_entry("old.clean")
    assert clean is not None and clean.is_clean and clean.result.outputs == {"o": "/out/old.clean"}
    # a clean version-1 entry is recognised as clean by the scripts (a retried cleanup, a purge)
    assert store.mark_result_as_clean("old.clean") is False
    with pytest.raises(JobResultEntryAlreadyExistsError):  # same fingerprint: done is done
        store.create_dirty_result(ok("old.clean", fingerprint="fp"), supersede=True)
    # the listings say what they mean for old data too
    assert [r.job_id for r in store.get_dirty_results()] == ["old.dirty"]
    assert [r.job_id for r in store.get_unsuccessful_results()] == ["old.failed"]
    # cleaning a version-1 dirty entry rewrites it as version 2
    assert store.mark_result_as_clean("old.dirty") is True
    raw = redis_client.get(k.result("old.dirty"))
    assert raw is not None and raw.startswith(b'{"s":"c","v":2,') and b"old.dirty" not in raw.split(b'"O"')[0]
    entry = store.get_entry("old.dirty")
    assert entry is not None and entry.is_clean and entry.result.outputs == {"o": "/out/old.dirty"}
    # a failed version-1 entry is superseded like any other
    store.create_dirty_result(ok("old.failed"), supersede=True)
    assert [e.result.status for e in store.get_history("old.failed")] == [JobStatus.FAILED]
    assert store.get_unsuccessful_results() == []


def test_purge_leaves_no_key_of_the_job_and_its_next_token_stays_above_the_old_ones(
    redis_client: redis.Redis, namespace: str
) -> None:
    from datetime import timedelta

    store = RedisJobResultStore(redis_client, namespace)
    k = KeySpace(namespace)
    redis_client.set(k.fence("j"), 7)  # a legacy per-job counter: the job had tokens up to 7
    lease = JobLease(redis_client, namespace, "j", ttl=10)
    first = lease.acquire()
    assert first == 8
    store.create_dirty_result(JobResult(job_id="j", status=JobStatus.FAILED), fence=first)
    store.create_dirty_result(ok("j"), fence=first, supersede=True)  # history
    lease.release()
    store.mark_result_as_clean("j")
    assert store.purge_clean_entries(timedelta(0)) == 1
    left = sorted(key.decode() for key in redis_client.scan_iter(match=f"jrs:{{{namespace}}}:*"))
    assert left == [k.fence_counter], left  # nothing per job, no index member, no set member
    assert redis_client.zcard(k.index) == 0
    again = JobLease(redis_client, namespace, "j", ttl=10).acquire()
    assert again > first  # a purged-then-recreated job never meets an old token


def test_the_index_keeps_only_the_most_recent_creations(redis_client: redis.Redis, namespace: str) -> None:
    store = RedisJobResultStore(redis_client, namespace, index_limit=3)
    for i in range(5):
        store.create_dirty_result(ok(f"j{i}"))
    assert [e.job_id for e in store.list_entries()] == ["j4", "j3", "j2"]
    assert store.get_entry("j0") is not None  # the entry itself stays, and stays dirty
    assert sorted(r.job_id for r in store.get_dirty_results()) == [f"j{i}" for i in range(5)]


def test_a_long_index_of_an_older_version_shrinks_in_bounded_steps(redis_client: redis.Redis, namespace: str) -> None:
    from datetime import timedelta

    k = KeySpace(namespace)
    redis_client.zadd(k.index, {f"old{i}": i for i in range(250)})
    store = RedisJobResultStore(redis_client, namespace, index_limit=10)
    store.create_dirty_result(ok("new"))
    assert redis_client.zcard(k.index) == 251 - 100  # at most 100 per create: no long script
    store.purge_clean_entries(timedelta(days=1))  # retention trims the rest
    assert redis_client.zcard(k.index) == 10
    assert store.list_entries(limit=1)[0].job_id == "new"


def test_invalid_index_limit_is_rejected(redis_client: redis.Redis, namespace: str) -> None:
    with pytest.raises(JrsConfigError):
        RedisJobResultStore(redis_client, namespace, index_limit=0)
