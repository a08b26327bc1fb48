"""Entry format version 5: a local-mode application id as milliseconds after the start.

What the operator really writes (a staging folder ``fence-<token>-<nonce>``, an application id
``local-<ms>`` a few seconds after the start) took 266 B as version 4 (a 320-B allocation):
version 5 must fit 252 B (the 256-B class), read back exactly, and leave every other id as it
was. The version-4 bytes of the same result are pinned: stores written before hold them.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from airflow_jrs.domain.model import Attempt, EntryState, JobResult, JobStatus
from airflow_jrs.store.results import compact
from airflow_jrs.store.results.serde import SCHEMA_VERSION, EntryDecodeError, decode_entry, encode_entry

JOB = "flights_daily.ingest.submit.2013-01-01-12345"
CREATED = datetime(2026, 11, 22, 8, 54, 38, 165357, tzinfo=UTC)
START = CREATED - timedelta(microseconds=37312286)
FP = "185b0d1eefb3adf26225a62c9da76e0c7422ef5bfbdee6514a8c2ffe22669892"
FOLDER = "fence-12346-67cd3e22e7efb940"


def realistic(**changes: object) -> JobResult:
    """Shaped like store_bench's ``make_result(12345)`` (nonce, application id offset): what is measured."""
    result = JobResult(
        job_id=JOB,
        status=JobStatus.SUCCEEDED,
        application_id="local-1795337644908",  # the start's millisecond + 4,004
        outputs={"flights": f"/data/jrs/output/prod/{JOB}/{FOLDER}/flights"},
        metrics={"rows": 842},
        fingerprint=FP,
        start_time=START,
        end_time=CREATED - timedelta(microseconds=4321),
        attempt=Attempt("flights_daily", "ingest.submit", "scheduled__2016-10-27T00:00:00+00:00", 1),
        fence=12346,
    )
    return dataclasses.replace(result, **changes)  # type: ignore[arg-type]


#: The realistic entry as version 4 wrote it (airflow-jrs before version 5), byte for byte.
V4_CLEAN = (
    '{"s":"c","v":4,"c":1795337678165357,"a":"local-1795337644908",'
    '"O":{"flights":"/data/jrs/output/prod/{j}/fence-{n}-67cd3e22e7efb940/flights"},"m":{"rows":842},'
    '"F":"GFsNHu-zrfJiJaYsnaduDHQi71v73uZRSowv_iJmmJI","b":[37312286,4321],'
    '"at":[13,13,[0,1477526400]],"n":12346}'
)
#: The same entry as version 5 writes it.
V5_CLEAN = (
    '{"s":"c","v":5,"c":1795337678165357,"A":4055,'
    '"O":{"flights":"/data/jrs/output/prod/{j}/fence-{n}-67cd3e22e7efb940/flights"},"m":{"rows":842},'
    '"F":"GFsNHu-zrfJiJaYsnaduDHQi71v73uZRSowv_iJmmJI","b":[37312286,4321],'
    '"at":[13,13,[0,1477526400]],"n":12346}'
)


def test_version_5_is_written() -> None:
    assert SCHEMA_VERSION == 5
    assert encode_entry(realistic(), EntryState.CLEAN, CREATED) == V5_CLEAN


def test_the_realistic_entry_fits_the_256_byte_allocation_class() -> None:
    """252 B of JSON + the 4-B sds header; version 4 wrote 266 B of it (a 320-B allocation)."""
    assert len(V4_CLEAN) == 266 and len(V5_CLEAN) == 249
    for fence in (1, 999_999, 9_999_999):
        outputs = {"flights": f"/data/jrs/output/prod/{JOB}/fence-{fence}-67cd3e22e7efb940/flights"}
        assert len(encode_entry(realistic(fence=fence, outputs=outputs), EntryState.CLEAN, CREATED)) <= 252


def test_the_version_4_entry_reads_as_the_same_result() -> None:
    entry = decode_entry(V4_CLEAN, JOB)
    assert entry.result == realistic() and entry.is_clean and entry.created_at == CREATED
    assert decode_entry(V5_CLEAN, JOB).result == realistic()


def test_a_version_4_entry_is_read_by_version_4_rules() -> None:
    """Version 4 never wrote ``A``: there it is an unknown member, as any other."""
    raw = V4_CLEAN.replace('"a":"local-1795337644908"', '"A":4055')
    assert decode_entry(raw, JOB).result == realistic(application_id=None)


MS = (START - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


@pytest.mark.parametrize(
    ("application_id", "start", "written"),
    [
        (f"local-{MS + 4055}", START, 4055),
        (f"local-{MS}", START, 0),
        (f"local-{MS - 31_536_000_000}", START, -31_536_000_000),  # long before the start: still shorter
        ("local-0", START, -MS),
        (f"local-0{MS}", START, None),  # a leading zero would not read back
        ("local-", START, None),
        ("local-١٢٣", START, None),  # digits, but not ASCII ones
        (f"local-{MS}", START.astimezone(timezone(timedelta(hours=-5))), None),  # no UTC start
        (f"local-{MS}", None, None),
        ("application_1763794800000_0042", START, None),  # YARN's: verbatim
        ("spark-6f2c0b7a9d3e4f1a", START, None),  # Kubernetes'
        (None, START, None),
    ],
)
def test_the_application_id_is_short_only_when_it_reads_back(
    application_id: str | None, start: datetime | None, written: int | None
) -> None:
    result = realistic(application_id=application_id, start_time=start)
    doc = json.loads(encode_entry(result, EntryState.DIRTY, CREATED))
    assert doc.get("A") == written and ("a" in doc) == (written is None and application_id is not None)
    assert compact.compact_application_id(application_id, start) == written
    read = decode_entry(json.dumps(doc), JOB).result
    assert read == result and read.application_id == application_id


@pytest.mark.parametrize(
    "replacement",
    [
        '"A":"4055"',
        '"A":true',
        '"A":4055.5',
        '"A":null',
        '"A":4055,"a":"local-1795337644908"',  # one or the other
    ],
)
def test_a_broken_compact_application_id_is_corrupt(replacement: str) -> None:
    with pytest.raises(EntryDecodeError, match="invalid entry content"):
        decode_entry(V5_CLEAN.replace('"A":4055', replacement), JOB)


def test_a_compact_application_id_without_a_utc_start_is_corrupt() -> None:
    for raw in (
        V5_CLEAN.replace('"b":[37312286,4321]', '"b1":4321'),
        V5_CLEAN.replace('"b":[37312286,4321]', '"t0":"2026-11-22T03:54:00.853071-05:00","b1":4321'),
    ):
        with pytest.raises(EntryDecodeError, match="invalid entry content"):
            decode_entry(raw, JOB)


def test_a_newer_version_is_left_for_the_airflow_jrs_that_wrote_it() -> None:
    """What a version-4 reader does with version 5 (refuses it, leaves it), and this one with 6."""
    with pytest.raises(EntryDecodeError, match="newer") as info:
        decode_entry(V5_CLEAN.replace('"v":5', '"v":6'), JOB)
    assert info.value.version == 6
