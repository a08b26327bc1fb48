"""The Redis job result store: one Lua script per transition, pipelined reads.

Why Redis: every Airflow deployment that runs Spark already reaches a Redis (or can run one),
a state change is one round trip, and ``appendonly`` makes entries outlive a restart.
Key layout: :mod:`airflow_jrs.store.redis.keys`; scripts: :mod:`airflow_jrs.store.redis.result_scripts`;
what a refused write raises: :mod:`airflow_jrs.store.redis.refusals`.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import redis as redis_lib

from airflow_jrs.domain.model import Actor, EntryState, HistoryReason, JobResult, JobResultEntry, utcnow
from airflow_jrs.exceptions import (
    JobResultEntryAlreadyExistsError,
    JrsConfigError,
    NoSuchJobResultError,
    StoreUnavailableError,
)
from airflow_jrs.store.leases.fence import fence_arg
from airflow_jrs.store.redis import lua
from airflow_jrs.store.redis import result_scripts as scripts
from airflow_jrs.store.redis.batch_read import read_entries
from airflow_jrs.store.redis.changes import ResultChanges, result_changes
from airflow_jrs.store.redis.clients import client_from_url, read_timeout
from airflow_jrs.store.redis.durability import Durability
from airflow_jrs.store.redis.errors import redis_errors
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.purge import RedisPurge
from airflow_jrs.store.redis.refusals import refusal
from airflow_jrs.store.redis.replies import as_bytes
from airflow_jrs.store.redis.result_reads import RedisReads
from airflow_jrs.store.results.base import UNSUCCESSFUL_ONLY, Answer, JobResultStore, Supersede
from airflow_jrs.store.results.documents import ResultDocuments, read_document, write_document
from airflow_jrs.store.results.reference import encode_reference, is_reference
from airflow_jrs.store.results.serde import (
    CLEAN_PREFIX,
    DIRTY_VERSION_PREFIX,
    READ_VERSIONS_ARG,
    EntryDecodeError,
    compact_fingerprint,
    decode_entry,
    encode_entry,
    event_message,
    history_note,
)

log = logging.getLogger(__name__)
#: The index keeps the most recent creations only (docs/store-lifecycle.md): at a million
#: entries it would otherwise cost ~148 B per job for a listing nobody pages through.
DEFAULT_INDEX_LIMIT = 10_000
#: Named in the history note of what a create supersedes.
_HOST = socket.gethostname()
#: Seconds a durable write waits for its acknowledgement; below redis-py's default read timeout (5 s).
DEFAULT_DURABILITY_TIMEOUT = 3.0


class RedisJobResultStore(RedisPurge, RedisReads, JobResultStore):
    """Job result store on Redis (standalone, Sentinel-managed or Cluster).

    :param client: a redis-py client, or a ``redis://`` / ``rediss://`` URL
    :param namespace: isolates deployments (Flink's cluster-id); entries of two namespaces never meet
    :param clean_ttl: expire clean entries after this long; ``None`` (default) keeps them forever
    :param delete_on_commit: delete entries when marked clean, as Flink does (then re-runs happen!)
    :param history_limit: how many superseded/forgotten entries to keep per job
    :param index_limit: how many of the most recent creations :meth:`list_entries` can list
        (the index's size, whatever the number of entries); ``None`` keeps every job in it
    :param durability: ``"none"`` (default), ``"aof"`` (each create and clean waits until the
        server's append-only file has it on disk: ``WAITAOF 1 0``, Redis 7.2+) or
        ``"replicas:N"`` (waits until N replicas have it: ``WAIT N``); see :mod:`~airflow_jrs.store.redis.durability`
    :param durability_timeout: seconds to wait for that acknowledgement before failing; shorter
        than the client's read timeout (else the client gives up first, and retries the write)
    :param result_documents: where full results of clean jobs live (``[jrs] result_documents``,
        :mod:`.documents`); then a committed entry is a ~40-B reference (:mod:`.reference`)
        instead of its JSON, a field of its reference bucket (``KeySpace.reference_bucket``)
        unless ``clean_ttl`` is set. ``None`` (default) keeps the full JSON in Redis
    """

    def __init__(
        self,
        client: redis_lib.Redis | str,
        namespace: str = "default",
        *,
        clean_ttl: timedelta | float | None = None,
        delete_on_commit: bool = False,
        history_limit: int = 20,
        index_limit: int | None = DEFAULT_INDEX_LIMIT,
        durability: str | Durability | None = None,
        durability_timeout: float = DEFAULT_DURABILITY_TIMEOUT,
        result_documents: ResultDocuments | None = None,
    ) -> None:
        self.keys = KeySpace(namespace)
        self.namespace = namespace
        if isinstance(client, str):
            client = client_from_url(client)
        self.client = client
        if isinstance(clean_ttl, timedelta):
            clean_ttl = clean_ttl.total_seconds()
        if clean_ttl is not None and clean_ttl <= 0:
            raise JrsConfigError(f"clean_ttl must be positive or None, got {clean_ttl!r}")
        self.clean_ttl_ms = int(clean_ttl * 1000) if clean_ttl else 0
        self.delete_on_commit = delete_on_commit
        if result_documents is not None and delete_on_commit:
            raise JrsConfigError(
                "delete_on_commit deletes committed entries, result_documents keeps them as references: "
                "set one of them, not both"
            )
        self.result_documents = result_documents
        if history_limit < 1:
            raise JrsConfigError(f"history_limit must be >= 1, got {history_limit}")
        self.history_limit = history_limit
        if index_limit is not None and index_limit < 1:
            raise JrsConfigError(f"index_limit must be >= 1 or None, got {index_limit}")
        self.index_limit = index_limit
        self.durability = durability if isinstance(durability, Durability) else Durability.parse(durability)
        self.durability.check_timeout(durability_timeout, read_timeout(client))
        self.durability_timeout_ms = int(durability_timeout * 1000)
        self._durability_checked = False
        self._create = client.register_script(scripts.CREATE_DIRTY_RESULT)
        self._clean = client.register_script(scripts.MARK_RESULT_AS_CLEAN)
        self._quarantine = client.register_script(scripts.QUARANTINE_ENTRY)
        self._release = client.register_script(scripts.RELEASE_QUARANTINE)
        self._rewrite = client.register_script(scripts.REWRITE_ENTRY)
        self._purge = client.register_script(scripts.PURGE_CLEAN_ENTRY)
        self._forget = client.register_script(scripts.FORGET_RESULT)

    def __repr__(self) -> str:
        return f"RedisJobResultStore(namespace={self.namespace!r}, client={self.client!r})"

    def ping(self) -> float:
        """One round trip; returns seconds taken. Raises :class:`StoreUnavailableError`."""
        started = time.perf_counter()
        with redis_errors("answer PING", self.namespace):
            self.client.ping()
        return time.perf_counter() - started

    def read_many(self, job_ids: Sequence[str], *, expiries: dict[str, float] | None = None) -> dict[str, Answer]:
        """One ``READ_ENTRIES`` script per 500 jobs (:mod:`.batch_read`)."""
        return read_entries(self, job_ids, expiries=expiries)

    def changes(self) -> ResultChanges:
        """The namespace's entry changes, watched from this process (one watcher per namespace,
        started on first use): what a reader that keeps entries between requests checks."""
        return result_changes(self.client, self.namespace)

    def _server_now(self, job_id: str) -> datetime:
        """The Redis server's clock (``TIME``): a result's ``created_at`` is compared with a
        ``jrs_recompute_at`` time (:mod:`airflow_jrs.domain.recompute`), so it must not depend on which
        host wrote the result; one round trip per result created."""
        with redis_errors(f"read the server's time for job {job_id!r}", self.namespace, job_id):
            seconds, micros = self.client.time()
        return datetime.fromtimestamp(int(seconds), tz=UTC).replace(microsecond=int(micros))

    # -- writes ---------------------------------------------------------------------------
    def _create_dirty_result(self, result: JobResult, fence: int | None, supersede: Supersede) -> JobResultEntry:
        k, job_id = self.keys, result.job_id
        created = self._server_now(job_id)
        raw = encode_entry(result, EntryState.DIRTY, created)
        event = event_message("created", job_id, status=result.status.value, state="dirty")
        # Who moves an entry it supersedes: the attempt that wrote the new result.
        mover = Actor(via="task" if result.attempt else "api", host=_HOST, attempt=result.attempt)
        with redis_errors(f"create the result of job {job_id!r}", self.namespace, job_id):
            code = self._durable_write(
                self._create,
                f"the result of job {job_id!r}",
                job_id,
                keys=[
                    k.result(job_id),
                    k.dirty,
                    k.index,
                    k.quarantine(job_id),
                    k.lease(job_id),
                    k.intent(job_id),
                    k.history(job_id),
                    k.unsuccessful,
                    k.reference_bucket(job_id),
                ],
                args=[
                    raw,
                    job_id,
                    int(created.timestamp() * 1000),
                    fence_arg(fence),
                    "u" if supersede == UNSUCCESSFUL_ONLY else "1" if supersede else "0",
                    result.fingerprint or "",
                    self.history_limit,
                    k.events,
                    event,
                    READ_VERSIONS_ARG,
                    "1" if result.status.is_success else "0",
                    self.index_limit or 0,
                    compact_fingerprint(result.fingerprint),
                    history_note(HistoryReason.RERUN, mover, created),
                    history_note(HistoryReason.SUPERSEDED, mover, created),
                ],
            )
        if code == lua.OK:
            return JobResultEntry(result=result, state=EntryState.DIRTY, created_at=created, stored=raw.encode())
        if code == lua.UNRECOGNISED:
            self.get_entry(job_id)  # quarantines a corrupt entry and raises; refuses a newer one
            raise JobResultEntryAlreadyExistsError(
                f"job {job_id!r} has an entry the store could not compare; it was not replaced.",
                job_id=job_id,
                namespace=self.namespace,
            )
        raise refusal(code, self.keys, job_id, "create", fence)

    def _read_document(self, summary: JobResultEntry) -> JobResultEntry:
        return read_document(self.result_documents, self.namespace, summary)

    def _committing(self, job_id: str, expected: JobResultEntry | None) -> tuple[JobResultEntry | None, str, bool]:
        """What a commit compares and writes: the dirty entry (read now when the caller has none
        and documents are on: a reference is written only for the entry its document holds), its
        reference ('' when it has none) and whether to write that reference.

        The document is written here, before the script that writes the reference runs: a
        reference never points at a missing document (intent before side effect). When the write
        fails the entry stays dirty (:class:`ResultDocumentError`); a crash after it leaves a
        document and a dirty entry, and the retried cleanup writes the same bytes again."""
        if self.result_documents is not None and expected is None:
            raw = self._raw_entry(job_id)
            if raw is not None and not is_reference(raw):
                expected = self._decode_or_quarantine(job_id, raw)
        if expected is None or expected.summary or not expected.is_dirty:
            return expected, "", False
        ref = encode_reference(expected) or ""
        if not ref or self.result_documents is None:
            return expected, ref, False
        write_document(self.result_documents, self.namespace, expected)
        return expected, ref, True

    def _mark_result_as_clean(self, job_id: str, expected: JobResultEntry | None, _retry: bool = True) -> bool:
        k = self.keys
        read_here = expected is None
        expected, ref, as_reference = self._committing(job_id, expected)
        with redis_errors(f"mark job {job_id!r} clean", self.namespace, job_id):
            code = self._durable_write(
                self._clean,
                f"job {job_id!r} marked clean",
                job_id,
                keys=[
                    k.result(job_id),
                    k.dirty,
                    k.index,
                    k.quarantine(job_id),
                    k.history(job_id),
                    k.reference_bucket(job_id),
                ],
                args=[
                    job_id,
                    self.clean_ttl_ms,
                    "1" if self.delete_on_commit else "0",
                    k.events,
                    event_message("cleaned", job_id, state="clean"),
                    DIRTY_VERSION_PREFIX,
                    self.history_limit,
                    CLEAN_PREFIX,
                    expected.stored if expected is not None and expected.stored is not None else "",
                    history_note(HistoryReason.COMMITTED, None, utcnow()),
                    ref,
                    "1" if as_reference else "0",
                ],
            )
        if code == lua.OK:
            return True
        if code == lua.CHANGED and read_here and as_reference and _retry:
            return self._mark_result_as_clean(job_id, None, _retry=False)  # changed since this call read it
        if code == lua.ALREADY_CLEAN:
            return False
        if code == lua.UNRECOGNISED and _retry:
            # Readable but not byte-canonical (edited by hand?): rewrite it canonically, retry once.
            # A corrupt entry is quarantined (and raises) by the read.
            raw = self._raw_entry(job_id)
            if raw is not None:
                if expected is not None and raw != expected.stored:
                    raise refusal(lua.CHANGED, self.keys, job_id, "clean")
                entry = self._decode_or_quarantine(job_id, raw)  # a malformed reference too
                if entry.summary:  # a valid reference (the script refuses only malformed ones)
                    return self._mark_result_as_clean(job_id, expected, _retry=False)
                canonical = encode_entry(entry.result, entry.state, entry.created_at or utcnow())
                with redis_errors(f"rewrite the entry of job {job_id!r}", self.namespace, job_id):
                    rewritten = self._rewrite(
                        keys=[k.result(job_id)],
                        args=[raw, canonical, k.events, event_message("rewritten", job_id)],
                    )
                if expected is not None and rewritten:  # the same entry, now in canonical bytes
                    expected = replace(expected, stored=canonical.encode())
            return self._mark_result_as_clean(job_id, expected, _retry=False)
        if code == lua.UNRECOGNISED:
            raise StoreUnavailableError(
                f"job {job_id!r}: the entry changed while it was being marked clean; retry the cleanup.",
                namespace=self.namespace,
                job_id=job_id,
            )
        raise refusal(code, self.keys, job_id, "clean")

    def _forget_result(
        self, job_id: str, expected: JobResultEntry | None, fence: int | None, reason: str, actor: Actor | None
    ) -> JobResultEntry | None:
        k = self.keys
        with redis_errors(f"forget job {job_id!r}", self.namespace, job_id):
            raw = expected.stored if expected is not None else self._raw_entry(job_id)
            code = lua.NOOP
            if raw is not None:
                code = self._forget(
                    keys=[
                        k.result(job_id),
                        k.history(job_id),
                        k.dirty,
                        k.index,
                        k.unsuccessful,
                        k.lease(job_id),
                        k.reference_bucket(job_id),
                    ],
                    args=[
                        job_id,
                        self.history_limit,
                        k.events,
                        event_message("forgotten", job_id, reason=reason),
                        fence_arg(fence),
                        raw,
                        history_note(reason, actor, utcnow()),
                    ],
                )
        if code != lua.OK:
            raise refusal(code, self.keys, job_id, "forget", fence)
        if expected is not None:
            return expected
        try:
            return decode_entry(as_bytes(raw), job_id)
        except EntryDecodeError:
            return None

    def _release_quarantine(self, job_id: str, actor: Actor | None) -> bytes:
        k = self.keys
        with redis_errors(f"release job {job_id!r} from quarantine", self.namespace, job_id):
            raw = self._release(
                keys=[k.quarantine(job_id), k.quarantined, k.history(job_id)],
                args=[
                    job_id,
                    self.history_limit,
                    history_note(HistoryReason.RELEASED, actor, utcnow()),
                    k.events,
                    event_message("released", job_id),
                ],
            )
        if raw is None:
            raise NoSuchJobResultError(
                f"job {job_id!r} has nothing in quarantine in namespace {self.namespace!r}.",
                job_id=job_id,
                namespace=self.namespace,
            )
        return bytes(raw)

    # -- durability -----------------------------------------------------------------------
    def _durable_write(self, script: Any, what: str, job_id: str, *, keys: list[str], args: list[Any]) -> Any:
        """Run a write script; with ``durability`` set, also wait for its acknowledgement.

        ``WAIT``/``WAITAOF`` count the writes of *their own connection*: the script and the
        wait go down one pipeline (one connection, one round trip), never as two calls that
        a connection pool might send on different connections. On a Redis Cluster both go to
        the primary that owns the namespace's slot."""
        if not self.durability.enabled:
            return script(keys=keys, args=args)
        client = self._slot_client()
        if not self._durability_checked:
            self.durability.check_server(client, self.namespace)
            self._durability_checked = True
        code, acked = self.durability.write_and_wait(client, script, keys, args, self.durability_timeout_ms)
        if code in (lua.OK, lua.ALREADY_CLEAN):
            self.durability.require(acked, what, self.namespace, job_id, self.durability_timeout_ms)
        return code

    def _slot_client(self) -> Any:
        if isinstance(self.client, redis_lib.RedisCluster):
            return self.client.get_node_from_key(self.keys.dirty).redis_connection
        return self.client
