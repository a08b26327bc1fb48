"""Entries as plain versioned JSON: pure tests of model and serde (no Redis)."""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import UTC, datetime, timedelta, timezone

import pytest

from airflow_jrs.store import scripts
from airflow_jrs.store.model import Attempt, EntryState, JobResult, JobStatus
from airflow_jrs.store.serde import (
    CLEAN_PREFIX,
    DIRTY_PREFIX,
    DIRTY_VERSION_PREFIX,
    SCHEMA_VERSION,
    EntryDecodeError,
    decode_entry,
    encode_entry,
    result_from_dict,
    result_to_dict,
)

CREATED = datetime(2013, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def full_result() -> JobResult:
    return JobResult(
        job_id="dag.task.2013-01-01",
        status=JobStatus.SUCCEEDED,
        application_id="local-1700000000000",
        outputs={"flights": "/data/flights/2013-01-01"},
        metrics={"rows": 842, "ratio": 0.5, "by_carrier": {"UA": 3}},
        checkpoint_location="/chk",
        fingerprint="sha256:abc",
        start_time=datetime(2013, 1, 1, 23, 0, tzinfo=timezone(timedelta(hours=-5))),
        end_time=datetime(2013, 1, 2, 4, 1, tzinfo=UTC),
        attempt=Attempt(dag_id="dag", task_id="task", run_id="manual__x", try_number=2, map_index=4),
        fence=9,
        error="late rows",
    )


def test_encode_puts_the_state_first() -> None:
    minimal = JobResult(job_id="x", status=JobStatus.SUCCEEDED)
    assert encode_entry(minimal, EntryState.DIRTY, CREATED).startswith('{"state":"dirty",')
    assert encode_entry(full_result(), EntryState.DIRTY, CREATED).startswith(DIRTY_PREFIX + ",")
    assert encode_entry(full_result(), EntryState.CLEAN, CREATED).startswith(CLEAN_PREFIX + ",")


def test_clean_and_dirty_prefixes_have_equal_length_and_only_serde_knows_them() -> None:
    assert len(DIRTY_PREFIX) == len(CLEAN_PREFIX) == 16
    # the scripts flip and compare prefixes they receive as ARGV: no literal or offset of the
    # encoding lives in Lua, so serde stays the only place that knows it
    for script in (scripts.MARK_RESULT_AS_CLEAN, scripts.PURGE_CLEAN_ENTRY):
        assert '"state"' not in script and "16" not in script and "17" not in script
    assert "ARGV[8] - the clean state prefix" in scripts.MARK_RESULT_AS_CLEAN
    assert "ARGV[2] - the clean state prefix" in scripts.PURGE_CLEAN_ENTRY
    # the dirty prefix reaches the script as an argument, with the schema version in it
    assert DIRTY_VERSION_PREFIX == f'{DIRTY_PREFIX},"v":{SCHEMA_VERSION},'
    assert encode_entry(full_result(), EntryState.DIRTY, CREATED).startswith(DIRTY_VERSION_PREFIX)


def test_flipping_the_prefix_of_a_dirty_entry_yields_the_same_entry_clean() -> None:
    dirty = encode_entry(full_result(), EntryState.DIRTY, CREATED)
    flipped = CLEAN_PREFIX + dirty[len(DIRTY_PREFIX) :]
    assert len(flipped) == len(dirty)
    assert flipped == encode_entry(full_result(), EntryState.CLEAN, CREATED)
    entry = decode_entry(flipped.encode())
    assert entry.is_clean and entry.result == full_result()


def test_entry_round_trips_through_bytes_and_text() -> None:
    raw = encode_entry(full_result(), EntryState.DIRTY, CREATED)
    for form in (raw, raw.encode("utf-8")):
        entry = decode_entry(form)
        assert entry.result == full_result()
        assert entry.state is EntryState.DIRTY and entry.is_dirty and not entry.is_clean
        assert entry.created_at == CREATED and entry.created_at.tzinfo is not None
        assert entry.job_id == "dag.task.2013-01-01"
    assert json.loads(raw)["v"] == SCHEMA_VERSION == 1


def test_result_dict_round_trip_keeps_timezones() -> None:
    back = result_from_dict(json.loads(json.dumps(result_to_dict(full_result()))))
    assert back == full_result()
    assert back.start_time is not None and back.start_time.utcoffset() == timedelta(hours=-5)


def test_empty_fields_are_omitted() -> None:
    minimal = JobResult(job_id="x", status=JobStatus.FAILED)
    assert result_to_dict(minimal) == {"job_id": "x", "status": "FAILED"}
    raw = encode_entry(minimal, EntryState.DIRTY, CREATED)
    assert "null" not in raw and "outputs" not in raw and "metrics" not in raw
    assert json.loads(raw) == {
        "state": "dirty",
        "v": 1,
        "created_at": CREATED.isoformat(),
        "result": {"job_id": "x", "status": "FAILED"},
    }
    assert decode_entry(raw).result == minimal


def test_encode_is_compact_json() -> None:
    raw = encode_entry(full_result(), EntryState.DIRTY, CREATED)
    assert ", " not in raw.replace("late rows", "") and '": ' not in raw


def test_encode_refuses_non_finite_metrics() -> None:
    with pytest.raises(ValueError):
        encode_entry(JobResult(job_id="x", status="SUCCEEDED", metrics={"r": math.nan}), EntryState.DIRTY, CREATED)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"[]", "expected a JSON object, got list"),
        (b'"dirty"', "expected a JSON object, got str"),
        (b"1", "expected a JSON object, got int"),
        (b"null", "expected a JSON object, got NoneType"),
        (b'{"state":"dirty","result":{"job_id":"x","status":"SUCCEEDED"}}', "missing or invalid schema version"),
        (b'{"state":"dirty","v":true,"result":{"job_id":"x","status":"SUCCEEDED"}}', "invalid schema version"),
        (b'{"state":"dirty","v":"1","result":{"job_id":"x","status":"SUCCEEDED"}}', "invalid schema version"),
        (b'{"state":"dirty","v":1.0,"result":{"job_id":"x","status":"SUCCEEDED"}}', "invalid schema version"),
        (b'{"state":"dirty","v":0,"result":{"job_id":"x","status":"SUCCEEDED"}}', "does not exist"),
        (b'{"state":"dirty","v":-1,"result":{"job_id":"x","status":"SUCCEEDED"}}', "does not exist"),
        (b"\xff\xfe", "not UTF-8 JSON"),
        (b'{"state":"dirty","v":1', "not UTF-8 JSON"),
        (b'{"state":"dirty","v":1}', "invalid entry content"),
        (b'{"state":"gone","v":1,"result":{"job_id":"x","status":"SUCCEEDED"}}', "invalid entry content"),
        (b'{"state":"dirty","v":1,"result":{"job_id":"x","status":"DONE"}}', "invalid entry content"),
        (b'{"state":"dirty","v":1,"result":{"job_id":"a b","status":"SUCCEEDED"}}', "invalid entry content"),
        (b'{"state":"dirty","v":1,"created_at":"yesterday","result":{"job_id":"x","status":"FAILED"}}', "invalid"),
        (b'{"state":"dirty","v":1,"result":{"job_id":"x","status":"FAILED","attempt":{"who":1}}}', "invalid"),
    ],
)
def test_decode_rejects_what_is_not_a_valid_entry(raw: bytes, says: str) -> None:
    with pytest.raises(EntryDecodeError, match=says) as info:
        decode_entry(raw)
    assert info.value.version is None  # not "newer": the caller quarantines it


@pytest.mark.parametrize("result", ['["x"]', "null", "7", '"x"'])
def test_decode_rejects_a_result_that_is_not_an_object(result: str) -> None:
    with pytest.raises(EntryDecodeError, match="invalid entry content"):
        decode_entry('{"state":"dirty","v":1,"result":' + result + "}")


def test_decode_of_a_newer_version_says_which_version() -> None:
    raw = json.dumps({"state": "dirty", "v": SCHEMA_VERSION + 1, "whatever": "future"})
    with pytest.raises(EntryDecodeError, match="newer") as info:
        decode_entry(raw)
    assert info.value.version == SCHEMA_VERSION + 1


def test_decode_never_unpickles() -> None:
    import pickle

    with pytest.raises(EntryDecodeError):
        decode_entry(pickle.dumps({"state": "dirty", "v": 1}))


def test_job_result_is_immutable_and_with_fence_copies() -> None:
    result = JobResult(job_id="x", status=JobStatus.SUCCEEDED)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.fence = 3  # type: ignore[misc]
    fenced = result.with_fence(3)
    assert fenced.fence == 3 and result.fence is None and fenced.job_id == "x"


def test_only_succeeded_is_a_success() -> None:
    assert [s for s in JobStatus if s.is_success] == [JobStatus.SUCCEEDED]
