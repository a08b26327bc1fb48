"""The clean reference: entry format version 3, what a clean job costs in Redis when its full
result lives in a result document (``[jrs] result_documents``, :mod:`.documents`).

The target is at most 200 B of Redis memory per finished job, the namespace's index included.
A string key's fixed part costs about 150 B whatever its value holds, so a committed reference
that does not expire is no key of its own but a field of its bucket's hash
(``KeySpace.reference_bucket``, about 98 B a job in Redis's compact encoding: 178 B a finished
job at 20,000 jobs, docs/operations/sizing.md). One that expires (``clean_ttl``) stays in the
job's key, where Redis keeps a value of up to 44 B inside the object header's own 64-B
allocation (``embstr``). Either way a committed entry becomes::

    c3;<created, µs since the epoch, base36>;<fence, base36>;<fingerprint's first 22 base64url chars>

e.g. ``c3;hogaqjkf2c;2n9c;LXEWQrcmsEQBYnyp-6wy9c`` (41 B). The creation time takes 10 base36
digits until 2085, so a reference stays within 44 B for every fence below 36^7 (78 billion);
past that it is still read and written, only no longer embedded. It holds exactly what
the skip decision reads: the state (``c``: only clean entries are references), the creation
time (the recompute rule), the fence (whose result it is; with the creation time, the name
of its document) and 132 bits of the fingerprint (a false match needs a 2^-132 coincidence).
The status is left out: only a SUCCEEDED result is ever written as a reference (an
unsuccessful one stays version 2; a cleanup of one is rare and its entry is replaced by the
next run anyway).

An entry is written as a reference only when it can be read back exactly as the decision sees
it: a UTC creation time, and a SHA-256 hex fingerprint (or none). Others stay version 2.
Scripts recognise a reference by :data:`PREFIX` (the Lua preludes are built with it,
:mod:`.scripts`). In a job's history a reference carries its note after a newline
(``<reference>\\n{"h":{...}}``): a reference holds no newline and a note is JSON on one line.
"""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime, timedelta

from airflow_jrs.domain.model import EntryState, JobResult, JobResultEntry, JobStatus

#: The format version of a reference (version 2 is the JSON entry, :mod:`.serde`).
REFERENCE_VERSION = 3
#: What every reference starts with: the clean state, then the version.
PREFIX = "c3;"
#: Base64url characters of the fingerprint a reference keeps: 132 bits, 33 hex digits.
FINGERPRINT_CHARS = 22
#: Where a history item's note starts after a reference.
NOTE_SEPARATOR = "\n"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
_BASE64URL = re.compile(f"[A-Za-z0-9_-]{{{FINGERPRINT_CHARS}}}")


def _b36(value: int) -> str:
    if value < 0:
        raise ValueError(f"a reference holds non-negative integers, got {value}")
    out = ""
    while True:
        value, digit = divmod(value, 36)
        out = _DIGITS[digit] + out
        if value == 0:
            return out


def _from_b36(text: str, name: str) -> int:
    if not text or text != text.lower() or not text.isalnum() or not text.isascii():
        raise ValueError(f"{name} must be base36 digits, got {text!r}")
    return int(text, 36)


def _fingerprint_prefix(fingerprint: str | None) -> str | None:
    """The reference's fingerprint field, or ``None`` when the fingerprint cannot be kept exactly
    as the decision compares it (anything but SHA-256 hex)."""
    if fingerprint is None:
        return ""
    if len(fingerprint) != 64:
        return None
    try:
        raw = bytes.fromhex(fingerprint)
    except ValueError:
        return None
    if raw.hex() != fingerprint:  # upper-case hex would not read back equal
        return None
    return base64.urlsafe_b64encode(raw).decode()[:FINGERPRINT_CHARS]


def encode_reference(entry: JobResultEntry) -> str | None:
    """The reference ``entry`` becomes when committed with a result document, or ``None`` when it
    must stay version 2 (not SUCCEEDED, no UTC creation time, a fingerprint that is not SHA-256)."""
    result, created = entry.result, entry.created_at
    if not result.status.is_success or created is None or created.tzinfo is None or created.utcoffset():
        return None
    fp = _fingerprint_prefix(result.fingerprint)
    if fp is None:
        return None
    fence = "" if result.fence is None else _b36(result.fence)
    return f"{PREFIX}{_b36((created - _EPOCH) // _MICRO)};{fence};{fp}"


def is_reference(raw: bytes | str) -> bool:
    return raw.startswith(PREFIX.encode()) if isinstance(raw, bytes) else raw.startswith(PREFIX)


def decode_reference(text: str, job_id: str) -> JobResultEntry:
    """The summary entry of a reference; raises ``ValueError`` when ``text`` is not one.

    Its fingerprint is the first 33 hex digits of the full one (``None`` when it had none):
    :func:`airflow_jrs.domain.decision.decide` compares a summary's fingerprint as a prefix."""
    if not text.startswith(PREFIX):
        raise ValueError(f"a reference starts with {PREFIX!r}")
    fields = text[len(PREFIX) :].split(";")
    if len(fields) != 3:
        raise ValueError(f"a reference has 3 fields after {PREFIX!r}, got {len(fields)}")
    created_field, fence_field, fp = fields
    created = _EPOCH + _from_b36(created_field, "the creation time") * _MICRO
    fence = _from_b36(fence_field, "the fence") if fence_field else None
    fingerprint = None
    if fp:
        if not _BASE64URL.fullmatch(fp):
            raise ValueError(f"the fingerprint field must be {FINGERPRINT_CHARS} base64url characters, got {fp!r}")
        # 132 bits: pad to 24 characters (17 bytes), then keep the 33 hex digits that are real
        fingerprint = base64.urlsafe_b64decode(fp + "A=").hex()[: FINGERPRINT_CHARS * 6 // 4]
    result = JobResult(job_id=job_id, status=JobStatus.SUCCEEDED, fingerprint=fingerprint, fence=fence)
    return JobResultEntry(result=result, state=EntryState.CLEAN, created_at=created, summary=True)


def document_name(entry: JobResultEntry) -> str:
    """The name of an entry's result document in its job's folder: ``<fence>-<created µs,
    base36>``, both read from the reference (documents are immutable: one per result), or
    ``unfenced-<created>`` for a result written without a lease (an API or a test).

    The fence alone is not enough: a Redis restored from an older backup (or a namespace
    recreated) hands the same job the same fence again, and its new result would find the old
    result's document in its place: a cleanup that could never commit (documents are never
    overwritten). The server's creation time, in µs, tells the two apart."""
    created = entry.created_at
    if created is not None:
        created_field = _b36((created - _EPOCH) // _MICRO)
        return f"unfenced-{created_field}" if entry.result.fence is None else f"{entry.result.fence}-{created_field}"
    if entry.result.fence is None:
        raise ValueError(f"the entry of job {entry.job_id!r} has neither a fence nor a creation time")
    return str(entry.result.fence)
