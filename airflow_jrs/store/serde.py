"""Versioned JSON in and out: the only place that encodes or decodes an entry.

An entry is one JSON object whose first member is the state, so that the Lua script that
marks an entry clean can flip ``{"state":"dirty"`` to ``{"state":"clean"`` by prefix without
decoding (both words are five letters; the entry stays valid JSON and keeps its length)::

    {"state":"dirty","v":1,"created_at":"2026-11-22T07:00:00+00:00","result":{"job_id":...}}

Empty fields are left out to keep entries small. Nothing here ever unpickles: unknown data
raises :class:`EntryDecodeError` and the caller quarantines it.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from datetime import datetime
from typing import Any

from airflow_jrs.store.model import Attempt, EntryState, JobResult, JobResultEntry, JobStatus

SCHEMA_VERSION = 1
DIRTY_PREFIX = '{"state":"dirty"'
CLEAN_PREFIX = '{"state":"clean"'
#: What every dirty entry of this schema version starts with: the clean script flips only these.
DIRTY_VERSION_PREFIX = f'{DIRTY_PREFIX},"v":{SCHEMA_VERSION},'
# The clean script swaps one prefix for the other in place: they must be equally long.
assert len(DIRTY_PREFIX) == len(CLEAN_PREFIX)


class EntryDecodeError(Exception):
    """Stored bytes are not an entry this version understands (``version`` set when newer)."""

    def __init__(self, reason: str, version: object = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.version = version


def _dt(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _attempt_dict(attempt: Attempt | None) -> dict[str, Any] | None:
    if attempt is None:
        return None
    data = asdict(attempt)
    if data.get("map_index") == -1:  # the default: leave it out (entries stay under a memory size class)
        del data["map_index"]
    return data


def result_to_dict(result: JobResult) -> dict[str, Any]:
    """The JSON form of a result, without empty members (also what XCom carries)."""
    data: dict[str, Any] = {
        "job_id": result.job_id,
        "status": result.status.value,
        "application_id": result.application_id,
        "outputs": dict(result.outputs) or None,
        "metrics": dict(result.metrics) or None,
        "checkpoint_location": result.checkpoint_location,
        "fingerprint": result.fingerprint,
        "start_time": _dt(result.start_time),
        "end_time": _dt(result.end_time),
        "attempt": _attempt_dict(result.attempt),
        "fence": result.fence,
        "error": result.error,
    }
    return {k: v for k, v in data.items() if v is not None}


def result_from_dict(data: dict[str, Any]) -> JobResult:
    """Inverse of :func:`result_to_dict`; raises ``ValueError``/``TypeError``/``KeyError`` on bad data."""
    if not isinstance(data, dict):
        raise TypeError(f"result must be a JSON object, got {type(data).__name__}")
    attempt = data.get("attempt")
    if attempt is not None and not isinstance(attempt, dict):
        raise TypeError(f"attempt must be a JSON object, got {type(attempt).__name__}")

    def dt(name: str) -> datetime | None:
        raw = data.get(name)
        return datetime.fromisoformat(raw) if raw is not None else None

    return JobResult(
        job_id=data["job_id"],
        status=JobStatus(data["status"]),
        application_id=data.get("application_id"),
        outputs=dict(data.get("outputs") or {}),
        metrics=dict(data.get("metrics") or {}),
        checkpoint_location=data.get("checkpoint_location"),
        fingerprint=data.get("fingerprint"),
        start_time=dt("start_time"),
        end_time=dt("end_time"),
        attempt=Attempt(**attempt) if attempt else None,
        fence=data.get("fence"),
        error=data.get("error"),
    )


def encode_entry(result: JobResult, state: EntryState, created_at: datetime) -> str:
    """Encode an entry; ``state`` is always the first member (see module docstring)."""
    doc = {
        "state": state.value,
        "v": SCHEMA_VERSION,
        "created_at": created_at.isoformat(),
        "result": result_to_dict(result),
    }
    try:
        return json.dumps(doc, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(
            f"the result of job {result.job_id!r} cannot be stored: {exc}. Outputs and metrics must be "
            "plain JSON (strings, finite numbers, booleans, null, lists, objects with string keys)."
        ) from None


def decode_entry(raw: bytes | str) -> JobResultEntry:
    """Decode and validate an entry, or raise :class:`EntryDecodeError` saying what is wrong."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        doc = json.loads(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise EntryDecodeError(f"not UTF-8 JSON ({exc})") from None
    except RecursionError:  # nested deeper than the parser goes: not an entry of ours
        raise EntryDecodeError("JSON nested too deeply") from None
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
    if version < 1:
        raise EntryDecodeError(f"schema version {version} does not exist")
    try:
        state = EntryState(doc["state"])
        result = result_from_dict(doc["result"])
        created = doc.get("created_at")
        created_at = datetime.fromisoformat(created) if created else None
    except (KeyError, TypeError, ValueError) as exc:
        raise EntryDecodeError(f"invalid entry content: {exc!r}") from None
    return JobResultEntry(result=result, state=state, created_at=created_at)


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
