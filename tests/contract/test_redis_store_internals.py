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

from airflow_jrs.exceptions import (
    CorruptJobResultError,
    JobResultQuarantinedError,
    JrsConfigError,
)
from airflow_jrs.store import JobResult, JobStatus, RedisJobResultStore
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.leases import RedisJobLease


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
    assert k.fence_counter == "jrs:{prod}:fence"
    assert k.unsuccessful == "jrs:{prod}:unsuccessful"
    assert k.intent(job) == "jrs:{prod}:intent:d.t.2013-01-01"
    assert k.events == "jrs:{prod}:events"
    # a job's reference bucket is crc32(job id) % 1024: another count or hash moves every
    # committed reference out of reach (the job would run again), so only with a migration
    assert k.reference_bucket(job) == "jrs:{prod}:refs:193"
    assert k.reference_bucket("flights_daily.ingest.submit.2013-01-01-12345") == "jrs:{prod}:refs:969"
    assert len(k.reference_buckets()) == 1024 and k.reference_buckets()[193] == "jrs:{prod}:refs:193"


def test_redis_store_writes_at_the_pinned_keys(redis_client: redis.Redis, namespace: str) -> None:
    store = RedisJobResultStore(redis_client, namespace)
    store.create_dirty_result(ok("d.t.2013-01-01"))
    assert redis_client.type(f"jrs:{{{namespace}}}:result:d.t.2013-01-01") == b"string"
    assert redis_client.smembers(f"jrs:{{{namespace}}}:dirty") == {b"d.t.2013-01-01"}
    assert redis_client.zscore(f"jrs:{{{namespace}}}:index", "d.t.2013-01-01") is not None
    store.mark_result_as_clean("d.t.2013-01-01")
    assert redis_client.smembers(f"jrs:{{{namespace}}}:dirty") == set()
    raw = redis_client.get(f"jrs:{{{namespace}}}:result:d.t.2013-01-01")
    assert raw is not None and raw.startswith(b'{"s":"c","v":5,')


def test_every_redis_key_a_job_touches_shares_the_namespace_slot(redis_client: redis.Redis, namespace: str) -> None:
    store = RedisJobResultStore(redis_client, namespace)
    job = "d.t.2013-01-01"
    lease = RedisJobLease(redis_client, namespace, job, ttl=10)
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


# -- bytes of a schema version no released airflow-jrs wrote ------------------------------------


def _v1(job_id: str, *, state: str = "dirty", status: str = "SUCCEEDED") -> bytes:
    """A development draft's entry (schema 1, never released): a version nothing reads."""
    result = {"job_id": job_id, "status": status}
    return json.dumps({"state": state, "v": 1, "result": result}, separators=(",", ":")).encode()


@pytest.mark.parametrize("state", ["dirty", "clean"])
def test_an_entry_of_an_unreleased_schema_is_quarantined_never_read_or_overwritten(
    redis_client: redis.Redis, namespace: str, state: str
) -> None:
    store = RedisJobResultStore(redis_client, namespace)
    k = KeySpace(namespace)
    raw = _v1("old", state=state)
    redis_client.set(k.result("old"), raw)
    redis_client.zadd(k.index, {"old": 1})
    with pytest.raises(CorruptJobResultError, match="schema version 1 was never written"):
        store.create_dirty_result(ok("old"), supersede=True)  # neither replaced nor skipped
    assert redis_client.get(k.quarantine("old")) == raw and redis_client.get(k.result("old")) is None
    with pytest.raises(JobResultQuarantinedError):
        store.mark_result_as_clean("old")
    assert store.get_quarantined() == ["old"] and store.list_entries() == []


def test_purge_leaves_no_key_of_the_job_and_its_next_token_stays_above_the_old_ones(
    redis_client: redis.Redis, namespace: str
) -> None:
    from datetime import timedelta

    store = RedisJobResultStore(redis_client, namespace)
    k = KeySpace(namespace)
    lease = RedisJobLease(redis_client, namespace, "j", ttl=10)
    first = lease.acquire()
    store.create_dirty_result(JobResult(job_id="j", status=JobStatus.FAILED), fence=first)
    store.create_dirty_result(ok("j"), fence=first, supersede=True)  # history
    lease.release()
    store.mark_result_as_clean("j")
    assert store.purge_clean_entries(timedelta(0)) == 1
    left = sorted(key.decode() for key in redis_client.scan_iter(match=f"jrs:{{{namespace}}}:*"))
    assert left == [k.fence_counter], left  # nothing per job, no index member, no set member
    assert redis_client.zcard(k.index) == 0
    again = RedisJobLease(redis_client, namespace, "j", ttl=10).acquire()
    assert again > first  # a purged-then-recreated job never meets an old token


def test_the_index_keeps_only_the_most_recent_creations(redis_client: redis.Redis, namespace: str) -> None:
    store = RedisJobResultStore(redis_client, namespace, index_limit=3)
    for i in range(5):
        store.create_dirty_result(ok(f"j{i}"))
    assert [e.job_id for e in store.list_entries()] == ["j4", "j3", "j2"]
    assert store.get_entry("j0") is not None  # the entry itself stays, and stays dirty
    assert sorted(r.job_id for r in store.get_dirty_results()) == [f"j{i}" for i in range(5)]


def test_an_index_past_a_lowered_limit_shrinks_in_bounded_steps(redis_client: redis.Redis, namespace: str) -> None:
    k = KeySpace(namespace)
    redis_client.zadd(k.index, {f"old{i}": i for i in range(250)})  # kept under a higher index_limit
    store = RedisJobResultStore(redis_client, namespace, index_limit=10)
    store.create_dirty_result(ok("new"))
    assert redis_client.zcard(k.index) == 251 - 100  # at most 100 per create: no long script
    store.create_dirty_result(ok("newer"))
    store.create_dirty_result(ok("newest"))
    assert redis_client.zcard(k.index) == 10
    assert [e.job_id for e in store.list_entries(limit=3)] == ["newest", "newer", "new"]


def test_invalid_index_limit_is_rejected(redis_client: redis.Redis, namespace: str) -> None:
    with pytest.raises(JrsConfigError):
        RedisJobResultStore(redis_client, namespace, index_limit=0)


# -- entries written before format version 4 ---------------------------------------------------

_V2_JOB = "d.t.2013-01-01"
_V2_FP = "ab" * 32


def _v2(state: str = "d", fingerprint: str = _V2_FP) -> bytes:
    """A version-2 entry as airflow-jrs wrote it before version 4 (SUCCEEDED, fenced, attempt)."""
    import base64

    fp = base64.urlsafe_b64encode(bytes.fromhex(fingerprint)).rstrip(b"=").decode()
    return (
        f'{{"s":"{state}","v":2,"c":1357095600000000,"a":"local-1","O":{{"o":"/out/{{j}}/fence-3"}},'
        f'"F":"{fp}","b0":5000000,"b1":1000,"at":["d","t","scheduled__2013-01-01T00:00:00+00:00",1],"n":3}}'
    ).encode()


def test_a_version_2_entry_reads_as_done_and_a_create_of_the_same_code_leaves_it(
    redis_client: redis.Redis, namespace: str
) -> None:
    from airflow_jrs.domain.decision import decide
    from airflow_jrs.exceptions import JobResultEntryAlreadyExistsError

    store, k = RedisJobResultStore(redis_client, namespace), KeySpace(namespace)
    redis_client.set(k.result(_V2_JOB), _v2("c"))
    entry = store.get_entry(_V2_JOB)
    assert entry is not None and entry.is_clean and decide(entry, _V2_FP).skip
    assert entry.result.outputs == {"o": f"/out/{_V2_JOB}/fence-3"} and entry.result.attempt is not None
    assert entry.result.attempt.run_id == "scheduled__2013-01-01T00:00:00+00:00"
    with pytest.raises(JobResultEntryAlreadyExistsError):
        store.create_dirty_result(ok(_V2_JOB, fingerprint=_V2_FP), supersede=True)
    assert redis_client.get(k.result(_V2_JOB)) == _v2("c") and not redis_client.exists(k.quarantine(_V2_JOB))


def test_a_version_2_entry_of_other_code_is_superseded_into_history(redis_client: redis.Redis, namespace: str) -> None:
    store, k = RedisJobResultStore(redis_client, namespace), KeySpace(namespace)
    redis_client.set(k.result(_V2_JOB), _v2("c"))
    store.create_dirty_result(ok(_V2_JOB, fingerprint="cd" * 32), supersede=True)
    assert redis_client.get(k.result(_V2_JOB)).startswith(b'{"s":"d","v":5,')
    (old,) = store.get_history(_V2_JOB)
    assert old.result.fingerprint == _V2_FP and old.result.fence == 3


def test_a_dirty_version_2_entry_is_committed_as_the_same_result(redis_client: redis.Redis, namespace: str) -> None:
    store, k = RedisJobResultStore(redis_client, namespace), KeySpace(namespace)
    redis_client.set(k.result(_V2_JOB), _v2("d"))
    redis_client.sadd(k.dirty, _V2_JOB)
    before = store.get_entry(_V2_JOB)
    assert before is not None and before.is_dirty
    assert store.mark_result_as_clean(_V2_JOB, expected=before) is True
    after = store.get_entry(_V2_JOB)
    assert after is not None and after.is_clean and after.result == before.result
    assert after.created_at == before.created_at and not redis_client.sismember(k.dirty, _V2_JOB)


def _v4(state: str = "d") -> bytes:
    """The same result as version 4 wrote it (airflow-jrs before version 5): ``a`` verbatim."""
    import base64

    fp = base64.urlsafe_b64encode(bytes.fromhex(_V2_FP)).rstrip(b"=").decode()
    return (
        f'{{"s":"{state}","v":4,"c":1357095600000000,"a":"local-1","O":{{"o":"/out/{{j}}/fence-{{n}}"}},'
        f'"F":"{fp}","b":[5000000,1000],"at":[1,1,[0,1356998400]],"n":3}}'
    ).encode()


def test_a_version_4_entry_skips_and_a_dirty_one_commits_as_the_same_result(
    redis_client: redis.Redis, namespace: str
) -> None:
    """Stores written before version 5 hold version-4 entries: their jobs stay done, their
    cleanups still commit them (the clean script's prefix flip is version 5's, so Python does it)."""
    from airflow_jrs.domain.decision import decide
    from airflow_jrs.store.results.serde import decode_entry

    store, k = RedisJobResultStore(redis_client, namespace), KeySpace(namespace)
    redis_client.set(k.result(_V2_JOB), _v4("d"))
    redis_client.sadd(k.dirty, _V2_JOB)
    before = store.get_entry(_V2_JOB)
    assert before is not None and before.is_dirty
    assert before.result == decode_entry(_v2("d"), _V2_JOB).result  # the same result as version 2 wrote it
    assert store.mark_result_as_clean(_V2_JOB, expected=before) is True
    after = store.get_entry(_V2_JOB)
    assert after is not None and after.is_clean and after.result == before.result and decide(after, _V2_FP).skip
    assert after.created_at == before.created_at and not redis_client.sismember(k.dirty, _V2_JOB)
