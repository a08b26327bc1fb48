"""Entries as plain versioned JSON: pure tests of model and serde (no Redis)."""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import UTC, datetime, timedelta, timezone

import pytest

from airflow_jrs.domain.model import Attempt, EntryState, JobResult, JobStatus
from airflow_jrs.domain.result_json import result_from_dict, result_to_dict
from airflow_jrs.store.redis import result_scripts as scripts
from airflow_jrs.store.results.serde import (
    CLEAN_PREFIX,
    DIRTY_PREFIX,
    DIRTY_VERSION_PREFIX,
    SCHEMA_VERSION,
    EntryDecodeError,
    decode_entry,
    encode_entry,
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
    assert encode_entry(minimal, EntryState.DIRTY, CREATED).startswith('{"s":"d",')
    assert encode_entry(full_result(), EntryState.DIRTY, CREATED).startswith(DIRTY_PREFIX + ",")
    assert encode_entry(full_result(), EntryState.CLEAN, CREATED).startswith(CLEAN_PREFIX + ",")


def test_clean_and_dirty_prefixes_have_equal_length_and_only_serde_knows_them() -> None:
    assert len(DIRTY_PREFIX) == len(CLEAN_PREFIX) == 8
    # the scripts flip and compare prefixes they receive as ARGV: no literal or offset of the
    # encoding lives in Lua, so serde stays the only place that knows it
    for script in (scripts.MARK_RESULT_AS_CLEAN, scripts.PURGE_CLEAN_ENTRY):
        assert '"state"' not in script and '"s"' not in script and "16" not in script and "17" not in script
    assert "ARGV[8] - the clean state prefix" in scripts.MARK_RESULT_AS_CLEAN
    assert "ARGV[9] - the dirty entry's bytes as the caller read them" in scripts.MARK_RESULT_AS_CLEAN
    # the purge compares the bytes its caller read (and judged clean), not a prefix
    assert "ARGV[2] - the raw bytes the caller read" in scripts.PURGE_CLEAN_ENTRY
    # the dirty prefix reaches the script as an argument, with the schema version in it
    assert DIRTY_VERSION_PREFIX == f'{DIRTY_PREFIX},"v":{SCHEMA_VERSION},'
    assert encode_entry(full_result(), EntryState.DIRTY, CREATED).startswith(DIRTY_VERSION_PREFIX)


def test_flipping_the_prefix_of_a_dirty_entry_yields_the_same_entry_clean() -> None:
    dirty = encode_entry(full_result(), EntryState.DIRTY, CREATED)
    flipped = CLEAN_PREFIX + dirty[len(DIRTY_PREFIX) :]
    assert len(flipped) == len(dirty)
    assert flipped == encode_entry(full_result(), EntryState.CLEAN, CREATED)
    entry = decode_entry(flipped.encode(), "dag.task.2013-01-01")
    assert entry.is_clean and entry.result == full_result()


def test_entry_round_trips_through_bytes_and_text() -> None:
    raw = encode_entry(full_result(), EntryState.DIRTY, CREATED)
    for form in (raw, raw.encode("utf-8")):
        entry = decode_entry(form, "dag.task.2013-01-01")
        assert entry.result == full_result()
        assert entry.state is EntryState.DIRTY and entry.is_dirty and not entry.is_clean
        assert entry.created_at == CREATED and entry.created_at.tzinfo is not None
        assert entry.job_id == "dag.task.2013-01-01"
    assert json.loads(raw)["v"] == SCHEMA_VERSION == 5


def test_result_dict_round_trip_keeps_timezones() -> None:
    back = result_from_dict(json.loads(json.dumps(result_to_dict(full_result()))))
    assert back == full_result()
    assert back.start_time is not None and back.start_time.utcoffset() == timedelta(hours=-5)


def test_empty_fields_are_omitted() -> None:
    minimal = JobResult(job_id="x", status=JobStatus.FAILED)
    assert result_to_dict(minimal) == {"job_id": "x", "status": "FAILED"}
    raw = encode_entry(minimal, EntryState.DIRTY, CREATED)
    assert "null" not in raw and '"o"' not in raw and '"m"' not in raw
    created_us = (CREATED - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    assert json.loads(raw) == {"s": "d", "v": SCHEMA_VERSION, "c": created_us, "st": "FAILED"}
    assert decode_entry(raw, "x").result == minimal


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
        (b'{"s":"d","F":"x"}', "missing or invalid schema version"),
        (b'{"s":"d","v":true}', "invalid schema version"),
        (b'{"s":"d","v":"2"}', "invalid schema version"),
        (b'{"s":"d","v":2.0}', "invalid schema version"),
        (b'{"s":"d","v":0}', "was never written by a released"),
        (b'{"s":"d","v":-1}', "was never written by a released"),
        (b'{"state":"dirty","v":1,"result":{"job_id":"x","status":"SUCCEEDED"}}', "was never written by a released"),
        (b"\xff\xfe", "not UTF-8 JSON"),
        (b'{"s":"d","v":2', "not UTF-8 JSON"),
        (b'{"v":2}', "invalid entry content"),
        (b'{"s":"gone","v":2}', "invalid entry content"),
        (b'{"s":"d","v":2,"st":"DONE"}', "invalid entry content"),
        (b'{"s":"d","v":2,"c":"yesterday"}', "invalid entry content"),
        (b'{"s":"d","v":2,"at":{"who":1}}', "invalid entry content"),
        (b'{"s":"d","v":2,"n":"7"}', "invalid entry content"),
    ],
)
def test_decode_rejects_what_is_not_a_valid_entry(raw: bytes, says: str) -> None:
    with pytest.raises(EntryDecodeError, match=says) as info:
        decode_entry(raw, "x")
    assert info.value.version is None  # not "newer": the caller quarantines it


@pytest.mark.parametrize("outputs", ['["x"]', "null", "7", '"x"'])
def test_decode_rejects_outputs_that_are_not_an_object(outputs: str) -> None:
    with pytest.raises(EntryDecodeError, match="invalid entry content"):
        decode_entry('{"s":"d","v":2,"O":' + outputs + "}", "x")


def test_decode_of_a_newer_version_says_which_version() -> None:
    raw = json.dumps({"s": "d", "v": SCHEMA_VERSION + 1, "whatever": "future"})
    with pytest.raises(EntryDecodeError, match="newer") as info:
        decode_entry(raw, "x")
    assert info.value.version == SCHEMA_VERSION + 1


def test_decode_never_unpickles() -> None:
    import pickle

    with pytest.raises(EntryDecodeError):
        decode_entry(pickle.dumps({"s": "d", "v": SCHEMA_VERSION}), "x")


def test_job_result_is_immutable_and_with_fence_copies() -> None:
    result = JobResult(job_id="x", status=JobStatus.SUCCEEDED)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.fence = 3  # type: ignore[misc]
    fenced = result.with_fence(3)
    assert fenced.fence == 3 and result.fence is None and fenced.job_id == "x"


def test_only_succeeded_is_a_success() -> None:
    assert [s for s in JobStatus if s.is_success] == [JobStatus.SUCCEEDED]


# -- the encoding ------------------------------------------------------------------------------


def test_an_entry_does_not_repeat_the_job_id_and_is_read_with_it() -> None:
    result = dataclasses.replace(
        full_result(),
        outputs={"flights": "/out/dag.task.2013-01-01/fence-9/flights", "plain": "/x"},
        checkpoint_location="/chk/dag.task.2013-01-01",
    )
    raw = encode_entry(result, EntryState.DIRTY, CREATED)
    assert "dag.task.2013-01-01" not in raw and '"O"' in raw and '"K"' in raw
    assert decode_entry(raw, "dag.task.2013-01-01").result == result


@pytest.mark.parametrize(
    "value",
    [
        "/out/{j}/x",
        "{j}",
        "{dag.task.2013-01-01}",
        "x{{j}dag.task.2013-01-01",
        "dag.task.2013-01-01{j",
        "{jdag.task.2013-01-01}",
    ],
)
def test_job_id_mark_never_changes_an_output(value: str) -> None:
    result = dataclasses.replace(
        full_result(), outputs={"a": value, "b": "dag.task.2013-01-01"}, checkpoint_location=value
    )
    raw = encode_entry(result, EntryState.CLEAN, CREATED)
    assert decode_entry(raw, "dag.task.2013-01-01").result == result


def test_times_round_trip_whatever_their_offset() -> None:
    ist = timezone(timedelta(hours=5, minutes=30))
    for t in (
        CREATED,
        datetime(2013, 1, 1, 5, 30, 0, 123456, tzinfo=ist),
        datetime(1969, 12, 31, 23, 59, 59, 1, tzinfo=UTC),
    ):
        result = dataclasses.replace(full_result(), start_time=t, end_time=t)
        read = decode_entry(encode_entry(result, EntryState.DIRTY, t), "dag.task.2013-01-01")
        assert read.result == result and read.result.start_time.utcoffset() == t.utcoffset()  # type: ignore[union-attr]
        assert read.created_at == t


@pytest.mark.parametrize(
    "raw",
    [
        '{"s":"x","v":2,"st":"SUCCEEDED"}',
        '{"v":2,"st":"FAILED"}',
        '{"s":"d","v":2,"st":"DONE"}',
        '{"s":"d","v":2,"st":"FAILED","at":{"who":1}}',
        '{"s":"d","v":2,"st":"FAILED","at":["d"]}',
        '{"s":"d","v":2,"st":"FAILED","c":"yesterday"}',
        '{"s":"d","v":2,"st":"FAILED","c":1.5}',
        '{"s":"d","v":2,"st":"FAILED","O":["x"]}',
        '{"s":"d","v":2,"st":"FAILED","n":"7"}',
        '{"s":"d","v":2,"st":"FAILED","a":7}',
    ],
)
def test_decode_rejects_an_invalid_version_2_entry(raw: str) -> None:
    with pytest.raises(EntryDecodeError, match="invalid entry content") as info:
        decode_entry(raw, "x")
    assert info.value.version is None


def test_the_realistic_entry_of_the_memory_benchmark_stays_small() -> None:
    """docs/benchmarks.md: up to 252 B of JSON (+ a 4-B sds header) fit the 256-B allocation
    class, which keeps a finished job under 500 B at 20,000 jobs, index included (version 2
    needed the 320-B class, version 1 768 B)."""
    job = "flights_daily.ingest.submit.2013-01-01-123456"
    result = JobResult(
        job_id=job,
        status=JobStatus.SUCCEEDED,
        application_id="local-1763799367872",
        outputs={"flights": f"/data/jrs/output/prod/{job}/fence-1000000/flights"},
        metrics={"rows": 842},
        fingerprint="2aad2c537da05fac073530db99fdaf7dc5c335dea63c10b0f11b576b33824194",
        start_time=datetime(2026, 11, 24, 1, 20, 14, 827008, tzinfo=UTC),
        end_time=datetime(2026, 11, 24, 1, 20, 51, 912640, tzinfo=UTC),
        attempt=Attempt("flights_daily", "ingest.submit", "scheduled__2021-03-26T00:00:00+00:00", 1),
        fence=1_000_000,
    )
    created = datetime(2026, 11, 24, 1, 20, 51, 916961, tzinfo=UTC)
    assert len(encode_entry(result, EntryState.CLEAN, created)) <= 252


@pytest.mark.parametrize(
    "fingerprint",
    [None, "sha256:abc", "2aad2c537da05fac073530db99fdaf7dc5c335dea63c10b0f11b576b33824194", "2AAD" * 16, "ab" * 31],
)
def test_fingerprints_round_trip_in_whichever_form_they_are_stored(fingerprint: str | None) -> None:
    result = dataclasses.replace(full_result(), fingerprint=fingerprint)
    raw = encode_entry(result, EntryState.DIRTY, CREATED)
    assert ('"F"' in raw) == (fingerprint is not None and len(fingerprint) == 64 and fingerprint.islower())
    assert decode_entry(raw, "dag.task.2013-01-01").result == result


# -- history notes: who moved an entry, when and why ---------------------------------------------


def _noted(raw: str, note: str) -> str:
    """What the scripts' ``noted`` prelude does to an entry it moves to history."""
    return raw[:-1] + note + "}"


def test_a_history_item_reads_back_with_who_when_and_why_and_keeps_its_state_prefix():
    from airflow_jrs.store import Actor, Attempt, EntryState, HistoryReason, JobResult, JobStatus
    from airflow_jrs.store.results.serde import (
        CLEAN_PREFIX,
        decode_entry,
        decode_history_item,
        encode_entry,
        history_note,
    )

    created = datetime(2024, 1, 2, tzinfo=UTC)
    moved_at = datetime(2024, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
    result = JobResult(job_id="d.t.1", status=JobStatus.SUCCEEDED, application_id="app-1")
    raw = encode_entry(result, EntryState.CLEAN, created)
    actor = Actor(via="task", host="w1", attempt=Attempt("d", "t", "manual__1", 2, 3))
    item = _noted(raw, history_note(HistoryReason.RECOMPUTED, actor, moved_at))
    assert item.startswith(CLEAN_PREFIX)  # the clean script's retried delete-on-commit reads it by prefix
    read = decode_history_item(item, "d.t.1")
    assert read.result == result and read.state is EntryState.CLEAN
    assert read.moved is not None and read.moved.reason == "recomputed" and read.moved.moved_at == moved_at
    assert read.moved.actor == actor
    assert read.moved.describe() == "recomputed by d.t run manual__1 try 2 map 3 on w1"
    # a reader that knows nothing of notes (older airflow-jrs, decode_entry) still reads the entry
    assert decode_entry(item, "d.t.1") == read


def test_a_history_note_of_a_newer_version_leaves_the_entry_readable_and_a_broken_one_is_an_error():
    from airflow_jrs.store import EntryState, JobResult, JobStatus
    from airflow_jrs.store.results.serde import EntryDecodeError, decode_history_item, encode_entry

    raw = encode_entry(JobResult(job_id="d.t.1", status=JobStatus.FAILED), EntryState.DIRTY, datetime.now(UTC))
    newer = decode_history_item(_noted(raw, ',"h":{"v":9,"x":1}'), "d.t.1")
    assert newer.result.status is JobStatus.FAILED and newer.moved is None
    assert decode_history_item(raw, "d.t.1").moved is None  # moved before notes existed
    for bad in (',"h":[1]', ',"h":{"v":1}', ',"h":{"v":1,"r":"forgotten","by":{"via":3}}'):
        with pytest.raises(EntryDecodeError, match="history note"):
            decode_history_item(_noted(raw, bad), "d.t.1")
