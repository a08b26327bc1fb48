"""Versioned JSON in and out: the only place that encodes or decodes an entry.

An entry is one JSON object whose first member is the state, so that the Lua script that
marks an entry clean can flip the dirty prefix to the clean one without decoding (both are
equally long; the entry stays valid JSON and keeps its length). Version 5, written today::

    {"s":"d","v":5,"c":1795483251916961,"A":2345,"O":{"flights":"/out/{j}/fence-{n}-5e1f0c2b9a7d4e61"},
     "b":[37089953,4321],"at":[13,13,[0,1477526400]],"n":1,...}

Version 5 is version 4 with a local-mode application id as ``A``, its milliseconds after the
start (:mod:`.compact`): with its staging folder's owner nonce a realistic entry needs it to
fit the 256-B allocation class. A version-4 reader would not see the id, hence a version; a
version-4 entry (written before) is still read, by version 4's rules.

Version 4 is version 2 with what the entry repeats written once (:mod:`.compact`: a realistic
entry fits the 256-B allocation class instead of 320): start and end as one ``b`` pair, the
attempt's DAG and task ids as lengths of the job id's prefix, a generated run id as its type and
time, the try number left out when 1, ``fence-{n}`` for the attempt's staging folder in ``O``.
Every other member means what it means in version 2, and a version-2 entry (written before)
is still read, by version 2's rules.

Version 2 keeps a million entries small (docs/benchmarks.md: a realistic entry must fit the
320-B allocation class, version 1 took 768 B): short member names; the creation time
in UTC as integer microseconds since the epoch, and start and end as microseconds before it
(``b0``/``b1``: a duration needs 8 digits, not 16); other offsets stay ISO text (``t0``/``t1``)
so they round-trip; the status left out when it is SUCCEEDED; a SHA-256 hex fingerprint as
unpadded base64url (``F``: 43 characters, not 64); the attempt as an array; empty members left
out; and the job id written nowhere: it is in the entry's key, so the reader passes it in.
Where outputs or the checkpoint location contain the job id, it is written as ``{j}`` under
``O``/``K`` (only when no value holds ``{j}`` itself; then they stay verbatim under ``o``/``k``).

A *history item* (``jrs:{ns}:history:<job id>``) is the entry's bytes as they were, with one
member appended by the script that moved it: ``"h":{"v":1,"r":"forgotten","t":<microseconds>,
"by":{"via":"cli","user":"alice","host":"h1"}}`` (who, when, why: :func:`history_note`,
:func:`decode_history_item`). Appended rather than wrapped, so an item still starts with its
state prefix and a reader that does not know ``h`` (an older airflow-jrs) still reads the entry.

Versions 2, 4 and 5 are the JSON versions read (:data:`READ_VERSIONS`): stores written before
version 4 hold version-2 entries (before version 5, version-4 ones), and their jobs must not
run again; the version-1 drafts never left development. Version 3 is not JSON: a clean
*reference* that a store with ``[jrs] result_documents`` writes in place of a committed entry
(:mod:`.reference`); all are read here, so every reader accepts any. Nothing here ever
unpickles: unknown data raises :class:`EntryDecodeError`, and the caller quarantines it (an
older or malformed version) or leaves it for the newer airflow-jrs that wrote it (a newer
version: a version-4 reader leaves a version-5 entry alone, it does not quarantine it).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_jrs.domain.model import Actor, Attempt, EntryState, HistoryNote, JobResult, JobResultEntry, JobStatus
from airflow_jrs.exceptions import JrsError
from airflow_jrs.store.results import compact, reference

SCHEMA_VERSION = 5
#: The JSON versions this reader decodes (3 is the reference, not JSON): a lower or missing one
#: is corrupt (quarantined), a higher one a newer airflow-jrs's (left where it is).
READ_VERSIONS = (2, 4, SCHEMA_VERSION)
#: :data:`READ_VERSIONS` as the create script receives it (it compares an entry it may replace).
READ_VERSIONS_ARG = ",".join(map(str, READ_VERSIONS))
DIRTY_PREFIX = '{"s":"d"'
CLEAN_PREFIX = '{"s":"c"'
#: What every dirty entry of this schema version starts with: the clean script flips only these.
DIRTY_VERSION_PREFIX = f'{DIRTY_PREFIX},"v":{SCHEMA_VERSION},'
# The clean script swaps one prefix for the other in place: they must be equally long.
assert len(DIRTY_PREFIX) == len(CLEAN_PREFIX)
#: Stands for the job id inside outputs and the checkpoint location.
JOB_ID_MARK = "{j}"
_STATE_CODE = {EntryState.DIRTY: "d", EntryState.CLEAN: "c"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


def compact_fingerprint(fingerprint: str | None) -> str:
    """The ``F`` member of a SHA-256 hex fingerprint; ``""`` for any other (kept verbatim as ``f``).
    The create script compares this form with a stored ``F`` without decoding base64 in Lua."""
    if fingerprint is None or not _SHA256_HEX.fullmatch(fingerprint):
        return ""
    return base64.urlsafe_b64encode(bytes.fromhex(fingerprint)).rstrip(b"=").decode()


def _fingerprint_from_compact(value: object) -> str:
    if not isinstance(value, str) or len(value) != 43:
        raise ValueError(f"'F' must be 43 characters of base64url, got {value!r}")
    try:
        return base64.urlsafe_b64decode(value + "=").hex()
    except (binascii.Error, ValueError):
        raise ValueError(f"'F' is not base64url: {value!r}") from None


class EntryDecodeError(JrsError):
    """Stored bytes are not an entry this version understands (``version`` set when newer)."""

    def __init__(self, reason: str, version: object = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.version = version


def _time(value: datetime | None) -> int | str | None:
    """UTC as integer microseconds (16 digits instead of 32); any other offset, or a naive
    time, as ISO text, so that it reads back exactly as it was."""
    if value is None:
        return None
    if value.tzinfo is not None and value.utcoffset() == timedelta(0):
        return (value - _EPOCH) // _MICRO
    return value.isoformat()


def _read_time(raw: object) -> datetime | None:
    if raw is None:
        return None
    if isinstance(raw, int) and not isinstance(raw, bool):
        return _EPOCH + raw * _MICRO
    if isinstance(raw, str):
        return datetime.fromisoformat(raw)
    raise TypeError(f"a time must be an integer or ISO text, got {raw!r}")


def _templated(values: dict[str, str], job_id: str) -> tuple[bool, dict[str, str]]:
    """``values`` with the job id written as :data:`JOB_ID_MARK`, when that can be undone."""
    texts = [v for v in values.values() if isinstance(v, str)]
    if not any(job_id in v for v in texts) or any(JOB_ID_MARK in v for v in texts):
        return False, values
    return True, {k: v.replace(job_id, JOB_ID_MARK) if isinstance(v, str) else v for k, v in values.items()}


def encode_entry(result: JobResult, state: EntryState, created_at: datetime) -> str:
    """Encode an entry; the state is always the first member (see module docstring)."""
    job_id = result.job_id
    created = _time(created_at)
    doc: dict[str, Any] = {"s": _STATE_CODE[state], "v": SCHEMA_VERSION, "c": created}
    if not result.status.is_success:
        doc["st"] = result.status.value
    app = compact.compact_application_id(result.application_id, result.start_time)
    doc["A" if app is not None else "a"] = result.application_id if app is None else app
    if result.outputs:
        outputs = compact.templated(dict(result.outputs), job_id, result.fence, JOB_ID_MARK)
        doc["O" if outputs is not None else "o"] = dict(result.outputs) if outputs is None else outputs
    doc["m"] = dict(result.metrics) or None
    if result.checkpoint_location is not None:
        templated, chk = _templated({"k": result.checkpoint_location}, job_id)
        doc["K" if templated else "k"] = chk["k"]
    short_fp = compact_fingerprint(result.fingerprint)
    doc["F" if short_fp else "f"] = short_fp or result.fingerprint
    times = [_time(result.start_time), _time(result.end_time)]
    if isinstance(created, int) and all(isinstance(t, int) for t in times):
        doc["b"] = [created - t for t in times]  # type: ignore[operator]  # microseconds before the creation
    else:
        for name, t in zip(("0", "1"), times, strict=True):
            if isinstance(created, int) and isinstance(t, int):
                doc[f"b{name}"] = created - t
            else:
                doc[f"t{name}"] = t
    if result.attempt is not None:
        doc["at"] = compact.compact_attempt(result.attempt, job_id)
    doc["n"] = result.fence
    doc["e"] = result.error
    doc = {k: v for k, v in doc.items() if v is not None}
    try:
        return json.dumps(doc, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(
            f"the result of job {result.job_id!r} cannot be stored: {exc}. Outputs and metrics must be "
            "plain JSON (strings, finite numbers, booleans, null, lists, objects with string keys)."
        ) from None


def _untemplated(values: Any, job_id: str) -> dict[str, str]:
    if not isinstance(values, dict):
        raise TypeError(f"outputs must be a JSON object, got {type(values).__name__}")
    return {k: v.replace(JOB_ID_MARK, job_id) if isinstance(v, str) else v for k, v in values.items()}


def _optional_str(doc: dict[str, Any], name: str) -> str | None:
    value = doc.get(name)
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name!r} must be a string, got {type(value).__name__}")
    return value


def _decode(doc: dict[str, Any], job_id: str, version: int) -> JobResultEntry:
    state = {"d": EntryState.DIRTY, "c": EntryState.CLEAN}[doc["s"]]
    fence = doc.get("n")
    if fence is not None and (not isinstance(fence, int) or isinstance(fence, bool)):
        raise TypeError(f"fence must be an integer, got {fence!r}")
    if "O" in doc and version >= 4:  # fence-{n} too; version 2 wrote it verbatim
        outputs = compact.untemplated(doc["O"], job_id, fence, JOB_ID_MARK)
    elif "O" in doc:
        outputs = _untemplated(doc["O"], job_id)
    else:
        outputs = dict(doc.get("o") or {})
    checkpoint = _optional_str(doc, "K")
    checkpoint = checkpoint.replace(JOB_ID_MARK, job_id) if checkpoint is not None else _optional_str(doc, "k")
    attempt = compact.attempt_of(doc.get("at"), job_id, version)
    metrics = doc.get("m") or {}
    if not isinstance(metrics, dict):
        raise TypeError(f"metrics must be a JSON object, got {type(metrics).__name__}")
    created_at = _read_time(doc.get("c"))
    pair = doc.get("b") if version >= 4 else None
    if pair is not None:
        if not (isinstance(pair, list) and len(pair) == 2) or any(f"b{n}" in doc or f"t{n}" in doc for n in "01"):
            raise TypeError(f"'b' must be [start, end] in microseconds before 'c', alone, got {pair!r}")
        doc = {**doc, "b0": pair[0], "b1": pair[1]}
    times = []
    for name in ("0", "1"):
        before = doc.get(f"b{name}")
        if before is None:
            times.append(_read_time(doc.get(f"t{name}")))
        elif isinstance(before, int) and not isinstance(before, bool) and isinstance(doc.get("c"), int):
            times.append(_EPOCH + (doc["c"] - before) * _MICRO)
        else:
            raise TypeError(f"'b{name}' must be an integer beside an integer 'c', got {before!r}")
    result = JobResult(
        job_id=job_id,
        status=JobStatus(doc.get("st", JobStatus.SUCCEEDED.value)),
        application_id=compact.application_id_in(doc, times[0], version) or _optional_str(doc, "a"),
        outputs=outputs,
        metrics=dict(metrics),
        checkpoint_location=checkpoint,
        fingerprint=_fingerprint_from_compact(doc["F"]) if "F" in doc else _optional_str(doc, "f"),
        start_time=times[0],
        end_time=times[1],
        attempt=attempt,
        fence=fence,
        error=_optional_str(doc, "e"),
    )
    return JobResultEntry(result=result, state=state, created_at=created_at)


def decode_entry(raw: bytes | str, job_id: str) -> JobResultEntry:
    """Decode and validate an entry, or raise :class:`EntryDecodeError` saying what is wrong.

    ``job_id`` is the job whose key held ``raw``: an entry does not repeat it in the value.
    The entry keeps ``raw`` as its ``stored`` bytes (what a compare-and-set compares). A
    reference (version 3) reads as a *summary* entry (:attr:`JobResultEntry.summary`)."""
    stored = raw.encode() if isinstance(raw, str) else bytes(raw)
    if reference.is_reference(stored):
        return replace(_decode_reference(stored, job_id), stored=stored)
    return replace(_decode_doc(_load(raw), job_id), stored=stored)


def _decode_reference(raw: bytes, job_id: str) -> JobResultEntry:
    try:
        return reference.decode_reference(raw.decode("ascii"), job_id)
    except (UnicodeDecodeError, ValueError) as exc:
        raise EntryDecodeError(f"invalid reference (version {reference.REFERENCE_VERSION}): {exc}") from None


def _load(raw: bytes | str) -> Any:
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        return json.loads(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise EntryDecodeError(f"not UTF-8 JSON ({exc})") from None
    except RecursionError:  # nested deeper than the parser goes: not an entry of ours
        raise EntryDecodeError("JSON nested too deeply") from None


def _decode_doc(doc: Any, job_id: str) -> JobResultEntry:
    if not isinstance(doc, dict):
        raise EntryDecodeError(f"expected a JSON object, got {type(doc).__name__}")
    version = doc.get("v")
    if not isinstance(version, int) or isinstance(version, bool):
        raise EntryDecodeError(f"missing or invalid schema version 'v': {version!r}")
    if version > SCHEMA_VERSION:
        raise EntryDecodeError(
            f"schema version {version} is newer than this airflow-jrs understands ({SCHEMA_VERSION})",
            version=version,
        )
    if version not in READ_VERSIONS:
        raise EntryDecodeError(f"schema version {version} was never written by a released airflow-jrs")
    try:
        return _decode(doc, job_id, version)
    except (KeyError, TypeError, ValueError) as exc:
        raise EntryDecodeError(f"invalid entry content: {exc!r}") from None


# -- history notes ---------------------------------------------------------------------------
#: Version of the ``h`` member that a history item carries (see :func:`history_note`).
HISTORY_NOTE_VERSION = 1


def history_note(reason: str, actor: Actor | None, moved_at: datetime) -> str:
    """The text a script appends, as the last member, to an entry it moves to history.

    A history item is the entry as it was, plus ``"h":{"v":1,"r":reason,"t":time,"by":actor}``
    (time as ``c``'s integer microseconds). Appended, not wrapped, so the item still starts with
    the entry's state prefix (the clean script's retried delete-on-commit reads it by prefix)
    and an older airflow-jrs, which ignores members it does not know, still reads the entry.
    The scripts append it only to bytes that look like a JSON object; other bytes (a released
    quarantine) go to history as they were."""
    note: dict[str, Any] = {"v": HISTORY_NOTE_VERSION, "r": str(reason), "t": _time(moved_at)}
    if actor is not None:
        by: dict[str, Any] = {"via": actor.via, "user": actor.user, "host": actor.host}
        if actor.attempt is not None:
            a = actor.attempt
            by["at"] = [a.dag_id, a.task_id, a.run_id, a.try_number] + ([a.map_index] if a.map_index != -1 else [])
        note["by"] = {k: v for k, v in by.items() if v is not None}
    return ',"h":' + json.dumps(note, separators=(",", ":"))


def _read_actor(by: Any) -> Actor:
    if not isinstance(by, dict):
        raise TypeError(f"'by' must be a JSON object, got {type(by).__name__}")
    at = by.get("at")
    if at is not None and not (isinstance(at, list) and 4 <= len(at) <= 5):
        raise TypeError(f"'by.at' must be [dag_id, task_id, run_id, try_number(, map_index)], got {at!r}")
    via = by.get("via")
    if not isinstance(via, str):
        raise TypeError(f"'by.via' must be a string, got {via!r}")
    return Actor(
        via=via, user=_optional_str(by, "user"), host=_optional_str(by, "host"), attempt=Attempt(*at) if at else None
    )


def _read_note(note: Any) -> HistoryNote | None:
    if not isinstance(note, dict):
        raise TypeError(f"history note 'h' must be a JSON object, got {type(note).__name__}")
    version = note.get("v")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"history note version 'h.v' is invalid: {version!r}")
    if version > HISTORY_NOTE_VERSION:
        return None  # a newer airflow-jrs wrote it: the entry still reads, its note does not
    reason = note.get("r")
    if not isinstance(reason, str) or not reason:
        raise TypeError(f"history note reason 'h.r' must be a non-empty string, got {reason!r}")
    by = note.get("by")
    return HistoryNote(
        reason=reason, moved_at=_read_time(note.get("t")), actor=_read_actor(by) if by is not None else None
    )


def decode_history_item(raw: bytes | str, job_id: str) -> JobResultEntry:
    """An item of a job's history: the entry (as :func:`decode_entry` reads it) with ``moved``
    set from its note; ``moved`` is ``None`` for items moved before notes existed. Raises
    :class:`EntryDecodeError` when the entry or its note is invalid. A reference's note follows
    it after a newline (:data:`.reference.NOTE_SEPARATOR`)."""
    stored = raw.encode() if isinstance(raw, str) else bytes(raw)
    if reference.is_reference(stored):
        ref, _, noted = stored.partition(reference.NOTE_SEPARATOR.encode())
        entry = _decode_reference(ref, job_id)
        doc = _load(noted) if noted else {}
    else:
        doc = _load(raw)
        entry = _decode_doc(doc, job_id)
    note = None
    if isinstance(doc, dict) and "h" in doc:
        try:
            note = _read_note(doc["h"])
        except (TypeError, ValueError) as exc:
            raise EntryDecodeError(f"invalid history note: {exc}") from None
    return replace(entry, stored=stored, moved=note)


def encode_document(entry: JobResultEntry) -> bytes:
    """A clean entry's result document: its full JSON (schema 5; older documents hold 2 or 4), clean (what the reference
    replaces in Redis; :func:`decode_document` reads it back)."""
    return encode_entry(entry.result, EntryState.CLEAN, entry.created_at or _EPOCH).encode()


def decode_document(raw: bytes, summary: JobResultEntry) -> JobResultEntry:
    """The full entry a reference stands for, from its document; raises :class:`EntryDecodeError`
    when the document is not that entry's (another fence, another creation time)."""
    entry = decode_entry(raw, summary.job_id)
    if entry.summary or not entry.is_clean:
        raise EntryDecodeError("a result document holds a clean JSON entry")
    if entry.result.fence != summary.result.fence or entry.created_at != summary.created_at:
        raise EntryDecodeError(
            f"the document is the result of fence {entry.result.fence} created {entry.created_at}, "
            f"the reference names fence {summary.result.fence} created {summary.created_at}"
        )
    if summary.result.fingerprint and not (entry.result.fingerprint or "").startswith(summary.result.fingerprint):
        raise EntryDecodeError("the document's fingerprint is not the one its reference names")
    return replace(entry, stored=summary.stored, moved=summary.moved)


def event_message(event: str, job_id: str, **extra: Any) -> str:
    """The notification a write publishes on the namespace's events channel, in its script."""
    return json.dumps({"event": event, "job_id": job_id, "ts": time.time(), **extra})


def event_job_id(data: Any) -> str | None:
    """The job a notification names; ``None`` when it cannot be read (readers then re-read all)."""
    try:
        job_id = json.loads(data).get("job_id")
    except (TypeError, ValueError, AttributeError):
        return None
    return job_id if isinstance(job_id, str) else None
