"""Bad input, by property (Hypothesis): every input the store meets either works, or fails with
a clear error naming it, or (stored bytes) is quarantined. Listing never crashes; a job is never
silently re-run (a read that answers "no result" for bytes that are there) or skipped (two
different inputs that become one job id); keys never leave their namespace.

Real Redis (the session's server), one fresh namespace per example. Example counts are kept
small so the file runs in well under 30 s on two cores.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
import redis
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from airflow_jrs.domain.identity import default_job_id, fingerprint
from airflow_jrs.domain.model import JOB_ID_MAX_LENGTH, NAMESPACE_MAX_LENGTH, validate_namespace
from airflow_jrs.exceptions import (
    CorruptJobResultError,
    InvalidJobIdError,
    JobResultQuarantinedError,
    UnsupportedSchemaVersionError,
)
from airflow_jrs.store import JobResult, JobStatus, RedisJobResultStore, validate_job_id
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.results.serde import encode_entry

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
JOB_CHARS = st.sampled_from("abcXYZ019._:+=@/-")
valid_job_ids = st.text(JOB_CHARS, min_size=1, max_size=JOB_ID_MAX_LENGTH)
valid_namespaces = st.text(st.sampled_from("abcXYZ019._-"), min_size=1, max_size=NAMESPACE_MAX_LENGTH)
#: Anything a user might type or a template might render, including braces, spaces, NULs, emoji.
any_text = st.text(max_size=260)


@pytest.fixture(scope="module")
def client(redis_url):
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def fresh_store(client) -> RedisJobResultStore:
    return RedisJobResultStore(client, f"p-{uuid.uuid4().hex[:12]}")


# -- job ids and namespaces --------------------------------------------------------------------
@SETTINGS
@given(st.one_of(any_text, valid_job_ids, st.integers(), st.none(), st.binary(max_size=20)))
def test_a_job_id_is_accepted_unchanged_or_refused_naming_it(value):
    try:
        assert validate_job_id(value) == value
    except InvalidJobIdError as exc:
        text = str(exc)
        assert "job id" in text
        shown = value[:40] if isinstance(value, str) else value
        assert repr(shown)[:30] in text or repr(value)[:30] in text, text


@SETTINGS
@given(st.one_of(any_text, valid_namespaces))
def test_a_namespace_is_accepted_unchanged_or_refused_naming_it(value):
    try:
        assert validate_namespace(value) == value
        KeySpace(value)
    except InvalidJobIdError as exc:
        assert "namespace" in str(exc) and repr(value)[:30] in str(exc)


def _hash_tag(key: str) -> str:
    """What Redis Cluster hashes: the part inside the first ``{...}``."""
    start = key.index("{")
    return key[start + 1 : key.index("}", start)]


@SETTINGS
@given(valid_namespaces, valid_namespaces, valid_job_ids, valid_job_ids)
def test_keys_never_leave_their_namespace_or_meet_another(ns1, ns2, job1, job2):
    k1, k2 = KeySpace(ns1), KeySpace(ns2)
    keys1 = [k1.result(job1), k1.lease(job1), k1.heartbeat(job1), k1.intent(job1), k1.history(job1),
             k1.quarantine(job1), k1.dirty, k1.index, k1.quarantined, k1.events,
             k1.reference_bucket(job1)]  # fmt: skip
    for key in keys1:
        assert key.startswith(f"jrs:{{{ns1}}}:") and _hash_tag(key) == ns1
        assert "{" not in key[len(ns1) + 6 :] and "}" not in key[len(ns1) + 6 :]
    if ns1 != ns2:
        keys2 = {k2.result(job2), k2.lease(job2), k2.heartbeat(job2), k2.intent(job2), k2.events, k2.index}
        assert not keys2 & set(keys1)
    elif job1 != job2:
        assert k1.result(job1) != k2.result(job2) and k1.lease(job1) != k2.lease(job2)


# -- templated job ids --------------------------------------------------------------------------
def _context(dag_id: str, task_id: str, key: str | None, when: datetime | None, map_index: int) -> dict:
    ti = SimpleNamespace(dag_id=dag_id, task_id=task_id, map_index=map_index)
    ctx: dict = {"ti": ti, "run_id": f"manual__{key}"}
    if key is not None:
        ctx["partition_key"] = key
    if when is not None:
        ctx["data_interval_start"] = when
    return ctx


airflow_ids = st.text(st.sampled_from("abcxyz019_-."), min_size=1, max_size=250)
dates = st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1), timezones=st.just(UTC))


@SETTINGS
@given(airflow_ids, airflow_ids, st.one_of(st.none(), any_text.filter(bool)), st.one_of(st.none(), dates),
       st.integers(min_value=-1, max_value=10_000))  # fmt: skip
def test_default_job_ids_are_always_valid(dag_id, task_id, key, when, map_index):
    job_id = default_job_id(_context(dag_id, task_id, key, when, map_index))
    assert validate_job_id(job_id) == job_id and len(job_id) <= JOB_ID_MAX_LENGTH


@SETTINGS
@given(any_text.filter(bool), any_text.filter(bool))
def test_two_partitions_never_become_one_job(key1, key2):
    """Else the second partition would be skipped: it would find the first one's result."""
    assume(key1 != key2)
    a = default_job_id(_context("dag", "task", key1, None, -1))
    b = default_job_id(_context("dag", "task", key2, None, -1))
    assert a != b, (key1, key2, a)


@SETTINGS
@given(st.lists(any_text, max_size=6), st.lists(any_text, max_size=6), st.one_of(st.none(), any_text))
def test_different_application_arguments_never_share_a_fingerprint(args1, args2, version):
    assume(args1 != args2)
    fp = [fingerprint(application_bytes=b"app", application="a.py", application_args=a, job_version=version)
          for a in (args1, args2)]  # fmt: skip
    assert fp[0] != fp[1]


# -- outputs and metrics --------------------------------------------------------------------------
json_leaves = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True), any_text
)
json_values = st.recursive(
    json_leaves, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(any_text, inner, max_size=3), max_leaves=8
)


@SETTINGS
@given(st.dictionaries(any_text, any_text, max_size=4), st.dictionaries(any_text, json_values, max_size=4))
def test_outputs_and_metrics_round_trip_or_are_refused_naming_the_job(client, outputs, metrics):
    store = fresh_store(client)
    result = JobResult(job_id="j", status=JobStatus.SUCCEEDED, outputs=outputs, metrics=metrics)
    try:
        store.create_dirty_result(result)
    except ValueError as exc:
        assert "'j'" in str(exc) and "JSON" in str(exc)
        assert store.get_entry("j") is None  # nothing half-written
        return
    assert store.get_entry("j").result == result


def test_huge_values_round_trip(client):
    store = fresh_store(client)
    big = {f"part-{i}": "s3://bucket/" + "x" * 100_000 for i in range(5)}
    result = JobResult(job_id="huge", status=JobStatus.SUCCEEDED, outputs=big, metrics={"rows": 10**18})
    store.create_dirty_result(result)
    assert store.get_entry("huge").result == result


# -- stored payloads --------------------------------------------------------------------------------
def _valid_entry(job_id: str) -> bytes:
    result = JobResult(job_id=job_id, status=JobStatus.SUCCEEDED, outputs={"o": "/x"})
    from airflow_jrs.store import EntryState

    return encode_entry(result, EntryState.DIRTY, datetime(2013, 1, 1, tzinfo=UTC)).encode()


def _v1_entry(job_id: str) -> bytes:
    """The same entry as the version before schema 2 wrote it (still read)."""
    result = {"job_id": job_id, "status": "SUCCEEDED", "outputs": {"o": "/x"}}
    doc = {"state": "dirty", "v": 1, "created_at": "2013-01-01T00:00:00+00:00", "result": result}
    return json.dumps(doc, separators=(",", ":")).encode()


def _mutations(job_id: str) -> st.SearchStrategy[bytes]:
    valid, v1 = _valid_entry(job_id), _v1_entry(job_id)
    doc, doc1 = json.loads(valid), json.loads(v1)
    return st.one_of(
        st.binary(max_size=300),  # anything, non-UTF-8 included
        st.integers(0, len(valid) - 1).map(lambda n: valid[:n]),  # truncated
        json_values.map(lambda v: json.dumps(v).encode()),  # JSON of the wrong shape
        st.sampled_from(sorted(doc)).map(lambda k: json.dumps({x: y for x, y in doc.items() if x != k}).encode()),
        st.tuples(
            st.sampled_from(
                sorted({*doc, "o", "O", "k", "K", "m", "f", "F", "st", "t0", "t1", "b0", "b1", "at", "n", "e"})
            ),
            json_values,
        ).map(lambda kv: json.dumps({**doc, kv[0]: kv[1]}).encode()),  # a wrong type (version 2)
        st.sampled_from(sorted(doc1)).map(lambda k: json.dumps({x: y for x, y in doc1.items() if x != k}).encode()),
        st.sampled_from(sorted(doc1["result"])).map(
            lambda k: json.dumps({**doc1, "result": {x: y for x, y in doc1["result"].items() if x != k}}).encode()
        ),  # a missing field (version 1)
        st.tuples(st.sampled_from(["state", "v", "created_at", "result"]), json_values).map(
            lambda kv: json.dumps({**doc1, kv[0]: kv[1]}).encode()
        ),  # a wrong type (version 1)
        st.tuples(st.sampled_from(sorted(doc1["result"])), json_values).map(
            lambda kv: json.dumps({**doc1, "result": {**doc1["result"], kv[0]: kv[1]}}).encode()
        ),
        st.integers(3, 10**6).map(lambda v: json.dumps({**doc, "v": v}).encode()),  # a future schema
        st.just(b"[" * 100_000 + b"]" * 100_000),  # nested past the JSON parser's recursion limit
        st.just(v1.replace(f'"{job_id}"'.encode(), b'"another.job"')),  # another job's entry
        st.just(valid),
        st.just(v1),
    )


@SETTINGS
@given(st.data())
def test_stored_bytes_are_read_quarantined_or_refused_never_taken_for_missing(client, data):
    store = fresh_store(client)
    raw = data.draw(_mutations("j"))
    client.set(store.keys.result("j"), raw)
    client.zadd(store.keys.index, {"j": 1})
    try:
        entry = store.get_entry("j")
    except CorruptJobResultError as exc:
        assert exc.key == store.keys.quarantine("j") and "release-quarantine j" in str(exc)
        assert client.get(store.keys.quarantine("j")) == raw  # kept, byte for byte
        with pytest.raises(JobResultQuarantinedError):  # and the job stays blocked: never "missing"
            store.get_entry("j")
    except UnsupportedSchemaVersionError as exc:
        assert "Upgrade airflow-jrs" in str(exc)
        assert client.get(store.keys.result("j")) == raw  # left for the newer version
    else:
        assert entry is not None and entry.job_id == "j"
    store.list_entries(limit=10)  # never crashes
    store.get_dirty_entries()


@SETTINGS
@given(st.data())
def test_listing_many_bad_entries_never_crashes_and_keeps_the_good_ones(client, data):
    store = fresh_store(client)
    for i in range(5):
        job = f"j{i}"
        raw = data.draw(_mutations(job))
        client.set(store.keys.result(job), raw)
        client.zadd(store.keys.index, {job: i})
        client.sadd(store.keys.dirty, job)
    good = JobResult(job_id="good", status=JobStatus.SUCCEEDED)
    store.create_dirty_result(good)
    listed = store.list_entries(limit=100)
    assert "good" in [e.job_id for e in listed]
    assert all(validate_job_id(e.job_id) for e in listed)
    assert "good" in [e.job_id for e in store.get_dirty_entries()]
