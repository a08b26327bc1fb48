"""The read side of :class:`~airflow_jrs.store.redis.results.RedisJobResultStore`: entries, listings, history.

Reads are pipelined and need no script, except the quarantine move of a corrupt entry
(:data:`~airflow_jrs.store.redis.result_scripts.QUARANTINE_ENTRY`). Every read decodes through
:meth:`RedisReads.entry_from` or :meth:`RedisReads._decode_or_quarantine`, by the rules of
:mod:`~airflow_jrs.store.redis.read_rules` that the async store follows too.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow_jrs.domain.model import JobResultEntry
from airflow_jrs.exceptions import JobResultEntryError
from airflow_jrs.store.redis.errors import redis_errors
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.read_rules import (
    READ_CHUNK,
    NeedsQuarantine,
    corrupt_error,
    decode_stored,
    quarantine_call,
    quarantined_error,
)
from airflow_jrs.store.redis.replies import as_bytes, as_str
from airflow_jrs.store.results.serde import EntryDecodeError, decode_history_item

log = logging.getLogger("airflow_jrs.store.redis.results")


class RedisReads:
    """What the sync Redis store reads; the store sets ``client``, ``keys``, ``namespace`` and
    registers ``_quarantine``."""

    client: Any
    keys: KeySpace
    namespace: str
    _quarantine: Any

    def _get_entry(self, job_id: str) -> JobResultEntry | None:
        raw, quarantined = self._stored(job_id, quarantine=True)
        return self.entry_from(job_id, raw, quarantined)

    def _raw_entry(self, job_id: str) -> bytes | None:
        """The job's stored bytes as the scripts read them (``read_entry``): its key, else its
        field in its reference bucket (a clean reference that does not expire); ``None``: none.
        Raises :class:`~airflow_jrs.exceptions.StoreUnavailableError` when Redis cannot be read."""
        return self._stored(job_id, quarantine=False)[0]

    def _stored(self, job_id: str, *, quarantine: bool) -> tuple[bytes | None, bool]:
        """The job's bytes (key, else field) and, when asked, whether it is quarantined: one round trip.

        Key before field, as a commit moves an entry (key to field, in one script): a commit
        between the two reads is still seen. A supersede moves the other way; one between them
        reads as "no result" while its attempt holds the lease; an attempt decides again once
        it holds the lease itself (protocol/attempt.py), so it never runs beside it."""
        k = self.keys
        with redis_errors(f"read the result of job {job_id!r}", self.namespace, job_id):
            pipe = self.client.pipeline(transaction=False)
            pipe.get(k.result(job_id))
            pipe.hget(k.reference_bucket(job_id), job_id)
            if quarantine:
                pipe.exists(k.quarantine(job_id))
            raw, field, *quarantined = pipe.execute()
        found = raw if raw is not None else field
        return (None if found is None else as_bytes(found)), bool(quarantined and quarantined[0])

    def entry_from(self, job_id: str, raw: Any, quarantined: bool) -> JobResultEntry | None:
        """What the job's stored bytes (``None``: no entry) and quarantine flag mean, by the rules of
        :mod:`.read_rules`: ``None``, the entry, or an error (a corrupt entry is quarantined first).
        The one decoder of the sync side: :func:`.batch_read.read_entries` answers with it too."""
        if raw is None:
            if quarantined:
                raise quarantined_error(self.keys, job_id)
            return None
        return self._decode_or_quarantine(job_id, as_bytes(raw))

    def _decode_or_quarantine(self, job_id: str, raw: bytes) -> JobResultEntry:
        """Decode ``raw``; move it to quarantine, then raise, when corrupt."""
        try:
            return decode_stored(self.keys, job_id, raw)
        except NeedsQuarantine as exc:
            keys, args = quarantine_call(self.keys, job_id, raw)
            with redis_errors(f"quarantine the entry of job {job_id!r}", self.namespace, job_id):
                moved = bool(self._quarantine(keys=keys, args=args))
            if moved:
                log.error("Quarantined the corrupt entry of job %r at %r", job_id, self.keys.quarantine(job_id))
            raise corrupt_error(self.keys, job_id, exc.reason, moved) from None

    def _read_many(self, job_ids: list[str]) -> list[JobResultEntry]:
        """Entries of ``job_ids`` (in order), skipping missing ones and quarantining corrupt ones."""
        entries: list[JobResultEntry] = []
        for start in range(0, len(job_ids), READ_CHUNK):
            chunk = job_ids[start : start + READ_CHUNK]
            with redis_errors("read results", self.namespace):
                raws = list(self.client.mget([self.keys.result(j) for j in chunk]))
                unkeyed = [i for i, raw in enumerate(raws) if raw is None]
                if unkeyed:  # clean references that do not expire live in buckets
                    pipe = self.client.pipeline(transaction=False)
                    for i in unkeyed:
                        pipe.hget(self.keys.reference_bucket(chunk[i]), chunk[i])
                    for i, field in zip(unkeyed, pipe.execute(), strict=True):
                        raws[i] = field
            for job_id, raw in zip(chunk, raws, strict=False):
                if raw is None:
                    continue
                try:
                    entries.append(self._decode_or_quarantine(job_id, as_bytes(raw)))
                except JobResultEntryError as exc:
                    log.error("Left out of the listing: %s", exc)
        return entries

    def _get_dirty_entries(self) -> list[JobResultEntry]:
        with redis_errors("list dirty results", self.namespace):
            members = self.client.smembers(self.keys.dirty)
        job_ids = sorted(as_str(m) for m in members)
        # The set was read before the entries: one cleaned or replaced in between is not pending.
        return [e for e in self._read_many(job_ids) if e.is_dirty and e.result.status.is_success]

    def _get_unsuccessful_entries(self) -> list[JobResultEntry]:
        with redis_errors("list unsuccessful results", self.namespace):
            members = self.client.smembers(self.keys.unsuccessful)
        job_ids = sorted(as_str(m) for m in members)
        # The set was read before the entries: one superseded in between is not unsuccessful.
        return [e for e in self._read_many(job_ids) if not e.result.status.is_success]

    def _list_entries(self, limit: int, offset: int) -> list[JobResultEntry]:
        with redis_errors("list results", self.namespace):
            members = self.client.zrevrange(self.keys.index, offset, offset + limit - 1)
        job_ids = [as_str(m) for m in members]
        entries = self._read_many(job_ids)
        found = {e.job_id for e in entries}
        unread = [j for j in job_ids if j not in found]
        if unread:  # clean entries that reached their TTL: drop them from the index too
            with redis_errors("prune the index", self.namespace):
                pipe = self.client.pipeline(transaction=False)
                for job_id in unread:
                    pipe.exists(self.keys.result(job_id))
                    pipe.hexists(self.keys.reference_bucket(job_id), job_id)
                found_at = pipe.execute()
                gone = [j for i, j in enumerate(unread) if not (found_at[2 * i] or found_at[2 * i + 1])]
                if gone:
                    self.client.zrem(self.keys.index, *gone)
        return entries

    def _get_history(self, job_id: str) -> list[JobResultEntry]:
        with redis_errors(f"read the history of job {job_id!r}", self.namespace, job_id):
            raws = self.client.lrange(self.keys.history(job_id), 0, -1)
        out = []
        for raw in raws:
            try:
                out.append(decode_history_item(raw, job_id))
            except EntryDecodeError as exc:
                log.error("History of job %r holds an unreadable entry (%s); kept as is", job_id, exc)
        return out

    def _get_quarantined(self) -> list[str]:
        with redis_errors("list quarantined jobs", self.namespace):
            members = self.client.smembers(self.keys.quarantined)
        return sorted(as_str(m) for m in members)
