"""How a stored entry is read: the rules the sync and the async store share.

Three readers once disagreed on what a quarantined entry means ("missing" for one of them,
and "missing" means the job may run again). Both stores now read through these functions,
so every reader answers the same for the same bytes:

=====================  =============================================================
stored                 answer
=====================  =============================================================
nothing                ``None``: the job has no result
a valid entry          the :class:`JobResultEntry`
corrupt bytes          moved to quarantine, then :class:`CorruptJobResultError`
                       naming the quarantine key
nothing, quarantined   :class:`JobResultQuarantinedError` naming the quarantine key
a newer schema         :class:`UnsupportedSchemaVersionError`; left where it is (a
                       newer airflow-jrs reads it)
=====================  =============================================================

The quarantine itself is I/O (the ``QUARANTINE_ENTRY`` script): each store runs it with its
own client, with :func:`quarantine_call`'s keys and arguments.
"""

from __future__ import annotations

from typing import Any

from airflow_jrs.domain.model import JobResultEntry
from airflow_jrs.exceptions import CorruptJobResultError, JobResultQuarantinedError, UnsupportedSchemaVersionError
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.results.serde import EntryDecodeError, decode_entry, event_message

#: How many keys one MGET or pipeline reads at most.
READ_CHUNK = 500


class NeedsQuarantine(Exception):
    """The bytes are not an entry of this job; the caller moves them to quarantine.

    A control-flow signal inside the store, not an error: it never leaves it (the caller
    quarantines the bytes and raises :class:`~airflow_jrs.exceptions.CorruptJobResultError`),
    so it is no :class:`~airflow_jrs.exceptions.JrsError`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def decode_stored(keys: KeySpace, job_id: str, raw: bytes | str) -> JobResultEntry:
    """The entry in ``raw``; raises :class:`NeedsQuarantine` or :class:`UnsupportedSchemaVersionError`."""
    key = keys.result(job_id)
    try:
        entry = decode_entry(raw, job_id)
    except EntryDecodeError as exc:
        if exc.version is not None:
            # Written by a newer airflow-jrs: readable by it, so leave it where it is.
            raise UnsupportedSchemaVersionError(
                f"entry {key!r} has schema version {exc.version}; this airflow-jrs reads up to "
                "its own version. Upgrade airflow-jrs on this worker; the entry was left untouched.",
                job_id=job_id,
                namespace=keys.namespace,
                key=key,
                version=exc.version,
            ) from None
        raise NeedsQuarantine(exc.reason) from None
    if entry.result.job_id != job_id:
        raise NeedsQuarantine(f"it holds the result of job {entry.result.job_id!r}, not {job_id!r}")
    return entry


def quarantine_call(keys: KeySpace, job_id: str, raw: bytes) -> tuple[list[str], list[Any]]:
    """KEYS and ARGV of ``QUARANTINE_ENTRY`` for these bytes (its notification included: a
    page that keeps what it read learns that the entry left)."""
    names = [
        keys.result(job_id),
        keys.quarantine(job_id),
        keys.dirty,
        keys.index,
        keys.quarantined,
        keys.unsuccessful,
        keys.reference_bucket(job_id),
    ]
    return names, [job_id, raw, keys.events, event_message("quarantined", job_id)]


def corrupt_error(keys: KeySpace, job_id: str, reason: str, moved: bool) -> CorruptJobResultError:
    key = keys.result(job_id)
    where = keys.quarantine(job_id) if moved else key
    return CorruptJobResultError(
        f"entry {key!r} of job {job_id!r} is corrupt ({reason}); it was moved to {where!r}. "
        f"Inspect it, then `airflow-jrs release-quarantine {job_id}` (store.release_quarantine) "
        "to let the job run again.",
        job_id=job_id,
        namespace=keys.namespace,
        key=where,
    )


def quarantined_error(keys: KeySpace, job_id: str) -> JobResultQuarantinedError:
    key = keys.quarantine(job_id)
    return JobResultQuarantinedError(
        f"job {job_id!r} is blocked: its entry is in quarantine at {key!r}. Inspect it, then "
        f"`airflow-jrs release-quarantine {job_id}` (store.release_quarantine) to let it run.",
        job_id=job_id,
        namespace=keys.namespace,
        key=key,
    )
