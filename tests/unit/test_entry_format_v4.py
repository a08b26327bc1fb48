"""Entry format version 4: its shorter spellings read back exactly, and version 2 still reads.

Stores written before version 4 hold version-2 entries, and stores written before version 5
version-4 ones; those jobs must keep reading as done (invariant 1), so the bytes below are
pinned as the encoders of those versions wrote them. Version 5 (tests/unit/test_entry_format_v5.py)
keeps every spelling tested here: the round trips below go through today's encoder.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from airflow_jrs.domain.model import Attempt, EntryState, JobResult, JobStatus
from airflow_jrs.store.results import compact
from airflow_jrs.store.results.serde import READ_VERSIONS, SCHEMA_VERSION, EntryDecodeError, decode_entry, encode_entry

JOB = "flights_daily.ingest.submit.2013-01-01-12345"
CREATED = datetime(2026, 11, 22, 8, 54, 38, 165357, tzinfo=UTC)
FP = "185b0d1eefb3adf26225a62c9da76e0c7422ef5bfbdee6514a8c2ffe22669892"


def realistic(**changes: object) -> JobResult:
    """store_bench's ``make_result(12345)``: what the memory figures are measured on."""
    result = JobResult(
        job_id=JOB,
        status=JobStatus.SUCCEEDED,
        application_id="local-1763795256765",
        outputs={"flights": f"/data/jrs/output/prod/{JOB}/fence-12346/flights"},
        metrics={"rows": 842},
        fingerprint=FP,
        start_time=CREATED - timedelta(microseconds=37312286),
        end_time=CREATED - timedelta(microseconds=4321),
        attempt=Attempt("flights_daily", "ingest.submit", "scheduled__2016-10-27T00:00:00+00:00", 1),
        fence=12346,
    )
    return dataclasses.replace(result, **changes)  # type: ignore[arg-type]


#: The realistic entry as version 2 wrote it (airflow-jrs before version 4), byte for byte.
V2_CLEAN = (
    '{"s":"c","v":2,"c":1795337678165357,"a":"local-1763795256765",'
    '"O":{"flights":"/data/jrs/output/prod/{j}/fence-12346/flights"},"m":{"rows":842},'
    '"F":"GFsNHu-zrfJiJaYsnaduDHQi71v73uZRSowv_iJmmJI","b0":37312286,"b1":4321,'
    '"at":["flights_daily","ingest.submit","scheduled__2016-10-27T00:00:00+00:00",1],"n":12346}'
)
#: The same entry as version 4 wrote it (airflow-jrs before version 5), byte for byte.
V4_CLEAN = (
    '{"s":"c","v":4,"c":1795337678165357,"a":"local-1763795256765",'
    '"O":{"flights":"/data/jrs/output/prod/{j}/fence-{n}/flights"},"m":{"rows":842},'
    '"F":"GFsNHu-zrfJiJaYsnaduDHQi71v73uZRSowv_iJmmJI","b":[37312286,4321],'
    '"at":[13,13,[0,1477526400]],"n":12346}'
)


def test_versions_2_and_4_are_read_beside_the_version_written() -> None:
    assert READ_VERSIONS == (2, 4, SCHEMA_VERSION) and SCHEMA_VERSION == 5


def test_a_version_4_entry_still_reads_as_the_same_result() -> None:
    """249 B: version 4 fit the 256-B allocation class only with a staging folder without its
    owner nonce (test_entry_format_v5.py); version 2 wrote 307 B (a 320-B allocation)."""
    assert len(V2_CLEAN) == 307 and len(V4_CLEAN) == 249
    for raw in (V4_CLEAN, V4_CLEAN.encode()):
        entry = decode_entry(raw, JOB)
        assert entry.result == realistic() and entry.is_clean and entry.created_at == CREATED
        assert entry.stored == V4_CLEAN.encode()
    dirty = '{"s":"d"' + V4_CLEAN[len('{"s":"c"') :]
    assert decode_entry(dirty, JOB).is_dirty and decode_entry(dirty, JOB).result == realistic()


def test_a_version_2_entry_still_reads_as_the_same_result() -> None:
    for raw in (V2_CLEAN, V2_CLEAN.encode()):
        entry = decode_entry(raw, JOB)
        assert entry.result == realistic() and entry.is_clean and entry.created_at == CREATED
        assert entry.stored == V2_CLEAN.encode()  # what a compare-and-set compares: the bytes as stored
    dirty = '{"s":"d"' + V2_CLEAN[len('{"s":"c"') :]
    assert decode_entry(dirty, JOB).is_dirty and decode_entry(dirty, JOB).result == realistic()


def test_a_version_2_entry_is_read_by_version_2_rules() -> None:
    """Version 2 never wrote ``fence-{n}``, ``b`` or a compact attempt: there they are text or corrupt."""
    verbatim = V2_CLEAN.replace("fence-12346/flights", "fence-{n}/flights")
    assert decode_entry(verbatim, JOB).result.outputs == {"flights": f"/data/jrs/output/prod/{JOB}/fence-{{n}}/flights"}
    paired = V2_CLEAN.replace('"b0":37312286,"b1":4321', '"b":[37312286,4321]')
    assert decode_entry(paired, JOB).result.start_time is None  # an unknown member, as any other


@pytest.mark.parametrize("version", [1, 3])
def test_a_json_version_nothing_wrote_is_corrupt(version: int) -> None:
    with pytest.raises(EntryDecodeError, match=f"schema version {version} was never written") as info:
        decode_entry(V4_CLEAN.replace('"v":4', f'"v":{version}'), JOB)
    assert info.value.version is None  # quarantined, not left for a newer reader


ATTEMPTS = [
    Attempt("flights_daily", "ingest.submit", "scheduled__2016-10-27T00:00:00+00:00", 1),
    Attempt("flights_daily", "ingest.submit", "manual__2026-11-22T08:54:38.165357+00:00", 3, 7),
    Attempt("flights_daily", "ingest.submit", "backfill__2016-10-27T00:00:00+00:00", 1, 0),
    Attempt("flights_daily", "ingest", "asset_triggered__2016-10-27T00:00:00+00:00", 2),
    Attempt("flights_daily", "other", "my_type__2016-10-27T00:00:00+00:00", 1),
    Attempt("other_dag", "ingest.submit", "scheduled__2016-10-27T01:00:00+01:00", 1),
    Attempt("flights", "ingest.submit", "scheduled__2016-10-27", 1),
    Attempt("flights_daily", "ingest.submit", "scheduled__2016-10-27T00:00:00", 1),
    Attempt("flights_daily", "ingest.submit", "scheduled__2016-10-27T00:00:00Z", 1),
    Attempt("flights_daily", "ingest.submit", "scheduled__2016-10-27 00:00:00+00:00", 1),
    Attempt("flights_daily", "ingest.submit", "__2016-10-27T00:00:00+00:00", 1),
    Attempt("flights_daily", "ingest.submit", "run-1", 1),
    Attempt("", "", "scheduled__0001-01-01T00:00:00+00:00", 1),
    Attempt("flights_daily.ingest.submit.2013-01-01-12345", "x", "manual__1", 1),
]


@pytest.mark.parametrize("attempt", ATTEMPTS, ids=lambda a: f"{a.dag_id}|{a.task_id}|{a.run_id}")
def test_every_attempt_reads_back_exactly(attempt: Attempt) -> None:
    result = realistic(attempt=attempt)
    raw = encode_entry(result, EntryState.DIRTY, CREATED)
    assert decode_entry(raw, JOB).result.attempt == attempt


def test_the_attempt_is_written_short_only_where_the_job_id_and_run_id_say_it() -> None:
    def at(attempt: Attempt, job_id: str = JOB) -> list:
        return compact.compact_attempt(attempt, job_id)

    assert at(ATTEMPTS[0]) == [13, 13, [0, 1477526400]]
    assert at(ATTEMPTS[1]) == [13, 13, [1, 1795337678, 165357], 3, 7]
    assert at(ATTEMPTS[2]) == [13, 13, [2, 1477526400], 1, 0]
    assert at(ATTEMPTS[3]) == [13, 6, [3, 1477526400], 2]  # "ingest" is a prefix of "ingest.submit"
    assert at(ATTEMPTS[4]) == [13, "other", ["my_type", 1477526400]]
    assert at(ATTEMPTS[5]) == ["other_dag", "ingest.submit", "scheduled__2016-10-27T01:00:00+01:00"]
    assert at(ATTEMPTS[6]) == ["flights", "ingest.submit", "scheduled__2016-10-27"]  # "flights" is not followed by "."
    assert at(ATTEMPTS[0], job_id="flights_daily") == ["flights_daily", "ingest.submit", [0, 1477526400]]


@pytest.mark.parametrize(
    "at",
    [
        [44, 13, "r"],  # the DAG id is never the whole job id
        [0, 13, "r"],
        [13, 40, "r"],
        [13, 13, [9, 1]],  # no run type 9
        [13, 13, ["", 1]],
        [13, 13, [0, 1, 0]],  # microseconds are written only when not zero
        [13, 13, [0, 1, 1_000_000]],
        [13, 13, [0, "1"]],
        [13, 13, [0, True]],
        [13, 13],
        [13, 13, "r", 1, -1, 9],
        {"dag": 13},
    ],
)
def test_a_broken_compact_attempt_is_corrupt(at: object) -> None:
    raw = V4_CLEAN.replace('"at":[13,13,[0,1477526400]]', '"at":' + json.dumps(at, separators=(",", ":")))
    with pytest.raises(EntryDecodeError, match="invalid entry content"):
        decode_entry(raw, JOB)


@pytest.mark.parametrize(
    ("outputs", "fence", "written"),
    [
        ({"a": f"/out/{JOB}/fence-12346/x"}, 12346, {"a": "/out/{j}/fence-{n}/x"}),
        ({"a": f"/out/{JOB}/fence-12346-0123456789abcdef"}, 12346, {"a": "/out/{j}/fence-{n}-0123456789abcdef"}),
        ({"a": "/out/fence-12346", "b": 3}, 12346, {"a": "/out/fence-{n}", "b": 3}),
        ({"a": "/out/fence-123467"}, 12346, None),  # another fence's folder
        ({"a": "/out/fence-12346"}, None, None),  # no fence to stand for
        ({"a": f"/out/{JOB}/fence-{{n}}/fence-12346"}, 12346, None),  # the mark itself: verbatim
        ({"a": "/out/{j}/" + JOB}, 12346, None),
        ({"a": "/out/x"}, 12346, None),
    ],
)
def test_outputs_name_the_fence_as_fence_n_only_when_that_reads_back(
    outputs: dict, fence: int | None, written: dict | None
) -> None:
    result = realistic(outputs=outputs, fence=fence)
    doc = json.loads(encode_entry(result, EntryState.DIRTY, CREATED))
    assert doc.get("O") == written and ("o" in doc) == (written is None)
    assert decode_entry(json.dumps(doc), JOB).result == result


def test_a_fence_mark_without_a_fence_is_corrupt() -> None:
    with pytest.raises(EntryDecodeError, match="invalid entry content"):
        decode_entry(V4_CLEAN.replace(',"n":12346', ""), JOB)


@pytest.mark.parametrize(
    ("start", "end"),
    [
        (CREATED - timedelta(seconds=37), CREATED),
        (None, CREATED),
        (CREATED - timedelta(seconds=37), None),
        (datetime(2026, 11, 22, 3, 0, tzinfo=timezone(timedelta(hours=-5))), CREATED),
        (None, None),
    ],
)
def test_start_and_end_are_one_pair_when_both_are_utc(start: datetime | None, end: datetime | None) -> None:
    result = realistic(start_time=start, end_time=end)
    doc = json.loads(encode_entry(result, EntryState.DIRTY, CREATED))
    both_utc = all(t is not None and t.utcoffset() == timedelta(0) for t in (start, end))
    assert ("b" in doc) == both_utc and not ({"b0", "b1"} & doc.keys() and both_utc)
    read = decode_entry(json.dumps(doc), JOB).result
    assert read == result and (start is None or read.start_time.utcoffset() == start.utcoffset())  # type: ignore[union-attr]


@pytest.mark.parametrize("pair", ["[1]", "[1,2,3]", '"1,2"', '[1,2],"b0":1', '["1",2]'])
def test_a_broken_time_pair_is_corrupt(pair: str) -> None:
    with pytest.raises(EntryDecodeError, match="invalid entry content"):
        decode_entry(V4_CLEAN.replace('"b":[37312286,4321]', f'"b":{pair}'), JOB)
