"""Purge for :class:`~airflow_jrs.store.redis.results.RedisJobResultStore`: old clean entries, and their
result documents when ``[jrs] result_documents`` is set.

Maintenance, not the task path: a daily task or a CLI call walks the namespace with SCAN. Kept
apart from the store's write path (create, clean, forget) because it is the one place that
deletes documents.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from airflow_jrs.domain.model import utcnow
from airflow_jrs.store.redis import lua
from airflow_jrs.store.redis.errors import redis_errors
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.read_rules import READ_CHUNK
from airflow_jrs.store.redis.replies import as_bytes, as_str
from airflow_jrs.store.results.documents import ResultDocuments
from airflow_jrs.store.results.reference import document_name, is_reference
from airflow_jrs.store.results.serde import EntryDecodeError, decode_entry, decode_history_item, event_message

log = logging.getLogger(__name__)
#: Reference buckets one round trip of a purge reads (``HGETALL`` each, ~500 fields at most
#: in the compact encoding).
_BUCKETS_PER_READ = 64


class RedisPurge:
    """The purge half of the Redis store (a mixin: the store supplies its client, keys,
    namespace, documents and the registered ``PURGE_CLEAN_ENTRY`` script)."""

    client: Any
    keys: KeySpace
    namespace: str
    result_documents: ResultDocuments | None
    _purge: Any

    def _purge_clean_entries(self, older_than: timedelta) -> int:
        # SCAN, not the index: the index keeps only the most recent creations. A purge is
        # maintenance (a daily task, a CLI call): O(keys in the database) is its price, and
        # what it buys is an index that costs nothing per job.
        cutoff = utcnow() - older_than
        k, purged = self.keys, 0
        for job_id, raw in self._stored_entries():
            try:
                entry = decode_entry(raw, job_id)
            except EntryDecodeError:
                continue  # a read quarantines it (or a newer version owns it): not purge's to judge
            if not entry.is_clean or entry.created_at is None or entry.created_at > cutoff:
                continue
            keys = [k.result(job_id), k.history(job_id), k.dirty, k.index, k.unsuccessful, k.reference_bucket(job_id)]
            with redis_errors(f"purge job {job_id!r}", self.namespace, job_id):
                history = self.client.lrange(k.history(job_id), 0, -1) if self.result_documents else []
                event = event_message("purged", job_id)
                done = self._purge(keys=keys, args=[job_id, raw, k.events, event]) == lua.OK
            purged += done
            if done and self.result_documents is not None:
                self._delete_documents(job_id, [raw, *map(as_bytes, history)])
        return purged

    def _stored_entries(self) -> Iterator[tuple[str, bytes]]:
        """Every entry of the namespace, ``(job id, bytes)``: the result keys (SCAN), then the
        fields of the reference buckets (clean references that do not expire)."""
        k = self.keys
        prefix = k.result("x")[:-1]
        with redis_errors("list the entries to purge", self.namespace):
            names = [as_str(n) for n in self.client.scan_iter(match=f"{prefix}*", count=1000)]
        for start in range(0, len(names), READ_CHUNK):
            chunk = names[start : start + READ_CHUNK]
            with redis_errors("read the entries to purge", self.namespace):
                raws = self.client.mget(chunk)
            for name, raw in zip(chunk, raws, strict=True):
                if raw is not None:
                    yield name[len(prefix) :], as_bytes(raw)
        buckets = k.reference_buckets()
        for start in range(0, len(buckets), _BUCKETS_PER_READ):
            with redis_errors("read the references to purge", self.namespace):
                pipe = self.client.pipeline(transaction=False)
                for bucket in buckets[start : start + _BUCKETS_PER_READ]:
                    pipe.hgetall(bucket)
                fields = pipe.execute()
            for bucket_fields in fields:
                for job_id, raw in sorted(bucket_fields.items()):
                    yield as_str(job_id), as_bytes(raw)

    def _delete_documents(self, job_id: str, raws: list[bytes]) -> None:
        """After a purge: the documents of the purged entry and of its history's references. A
        document left behind (a failed delete, a history item pushed meanwhile) costs disk and
        no correctness: nothing refers to it any more; the warning names it."""
        assert self.result_documents is not None
        for raw in raws:
            if not is_reference(raw):
                continue
            try:
                name = document_name(decode_history_item(raw, job_id))
                self.result_documents.delete(self.namespace, job_id, name)
            except (EntryDecodeError, OSError, ValueError) as exc:
                log.warning("job %r was purged; one of its result documents was not deleted: %s", job_id, exc)
