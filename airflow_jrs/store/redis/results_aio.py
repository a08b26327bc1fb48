"""The job result store's read side on ``redis.asyncio``, for code that runs in an event loop.

Triggers run in Airflow's triggerer, one event loop shared by every deferred task: a blocking
read would stall them all. This class reads with the same keys and the same rules as
:class:`~airflow_jrs.store.redis.results.RedisJobResultStore` (:mod:`.read_rules`: a corrupt entry is
quarantined and raises, a quarantined one raises, a newer schema raises; never "missing"),
and errors are the same :mod:`airflow_jrs.exceptions` (``StoreUnavailableError.retryable``
tells a lost connection from a refusal). It writes nothing but the quarantine move.

It also subscribes to the namespace's notifications (one per write of an entry, published
by the write's own script), for waiters that should wake within a round trip of a write.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import redis.asyncio as aioredis

from airflow_jrs.domain.model import JobResultEntry, validate_job_id
from airflow_jrs.domain.recompute import RequestSeen
from airflow_jrs.store.redis import result_scripts
from airflow_jrs.store.redis.clients import CONNECTION_KEYS, async_client
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
from airflow_jrs.store.redis.recompute_requests import seen_async
from airflow_jrs.store.redis.replies import as_bytes
from airflow_jrs.store.results.serde import event_job_id

__all__ = ["ANY_JOB", "CONNECTION_KEYS", "AsyncRedisJobResultStore", "Notifications"]

#: A notification that could not be read: the waiter re-reads everything it waits for.
ANY_JOB = "*"


class Notifications:
    """The namespace's notifications, subscribed and confirmed (see :meth:`AsyncRedisJobResultStore.notifications`)."""

    def __init__(self, pubsub: Any, namespace: str) -> None:
        self._pubsub = pubsub
        self._namespace = namespace

    async def next(self, timeout: float) -> str | None:
        """The job id the next notification names (:data:`ANY_JOB` when unreadable), or
        ``None`` when none arrived within ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            with redis_errors("receive the store's notifications", self._namespace):
                msg = await self._pubsub.get_message(
                    ignore_subscribe_messages=True, timeout=max(deadline - loop.time(), 0.0)
                )
            if msg is not None:
                return event_job_id(msg.get("data")) or ANY_JOB
            if loop.time() >= deadline:
                return None


class AsyncRedisJobResultStore:
    """Read job results from an event loop, with the sync store's rules.

    :param connection: a ``redis.asyncio`` client (``Redis`` or ``RedisCluster``), or its kwargs
        (:data:`CONNECTION_KEYS`; ``cluster: true`` starts from ``host``/``port`` as one node
        of a Redis Cluster: a namespace's keys share one slot, so every read is one node's)
    :param namespace: the store's namespace
    :param client_options: more ``redis.asyncio.Redis`` options when ``connection`` is kwargs
        (timeouts, retry policy, ``client_name``)
    """

    def __init__(
        self,
        connection: aioredis.Redis | aioredis.RedisCluster | Mapping[str, Any],
        namespace: str,
        **client_options: Any,
    ) -> None:
        self.keys = KeySpace(namespace)
        self.namespace = namespace
        self.client: Any
        if isinstance(connection, (aioredis.Redis, aioredis.RedisCluster)):
            self.client = connection
        else:
            self.client = async_client(connection, **client_options)
        self._quarantine = self.client.register_script(result_scripts.QUARANTINE_ENTRY)

    def __repr__(self) -> str:  # the client's repr may hold a password
        return f"AsyncRedisJobResultStore(namespace={self.namespace!r})"

    async def aclose(self) -> None:
        await self.client.aclose()

    async def recompute_seen(self, job_id: str, run_id: str) -> RequestSeen | None:
        """When ``run_id`` first met its recompute request for ``job_id`` (read only: the worker
        records it), for the triggerer's copy of the recompute rule."""
        return await seen_async(self.client, self.namespace, job_id, run_id)

    async def get_entry(self, job_id: str) -> JobResultEntry | None:
        """The job's entry, or ``None``; raises as :meth:`RedisJobResultStore.get_entry` does."""
        return (await self.get_entries([job_id]))[job_id]

    async def get_entries(self, job_ids: Sequence[str]) -> dict[str, JobResultEntry | None]:
        """Entries of ``job_ids`` in one round trip (per 500); the first unreadable one raises."""
        ids = [validate_job_id(j) for j in job_ids]
        entries: dict[str, JobResultEntry | None] = {}
        for start in range(0, len(ids), READ_CHUNK):
            chunk = ids[start : start + READ_CHUNK]
            with redis_errors(f"read the results of {chunk[:3]}", self.namespace):
                pipe = self.client.pipeline(transaction=False)
                for job_id in chunk:
                    pipe.get(self.keys.result(job_id))
                    pipe.hget(self.keys.reference_bucket(job_id), job_id)
                    pipe.exists(self.keys.quarantine(job_id))
                replies = await pipe.execute()
            for i, job_id in enumerate(chunk):
                raw, quarantined = replies[3 * i], replies[3 * i + 2]
                if raw is None:  # a clean reference that does not expire lives in its bucket
                    raw = replies[3 * i + 1]
                if raw is None:
                    if quarantined:
                        raise quarantined_error(self.keys, job_id)
                    entries[job_id] = None
                else:
                    entries[job_id] = await self._decode_or_quarantine(job_id, as_bytes(raw))
        return entries

    async def _decode_or_quarantine(self, job_id: str, raw: bytes) -> JobResultEntry:
        try:
            return decode_stored(self.keys, job_id, raw)
        except NeedsQuarantine as exc:
            keys, args = quarantine_call(self.keys, job_id, raw)
            with redis_errors(f"quarantine the entry of job {job_id!r}", self.namespace, job_id):
                moved = bool(await self._quarantine(keys=keys, args=args))
            raise corrupt_error(self.keys, job_id, exc.reason, moved) from None

    @asynccontextmanager
    async def notifications(self, confirm_timeout: float = 10.0) -> AsyncIterator[Notifications]:
        """Subscribe to the namespace's notifications; yields once Redis confirmed the subscription.

        Read the store *after* entering: a write after the confirmation is announced, one
        before it is seen by the read, so nothing falls in between.
        """
        channel = self.keys.events
        if isinstance(self.client, aioredis.RedisCluster):
            # A cluster client learns the slot map on its first command; pub/sub needs it first.
            with redis_errors("discover the Redis Cluster's nodes", self.namespace):
                await self.client.initialize()
        async with self.client.pubsub() as pubsub:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + confirm_timeout
            with redis_errors(f"subscribe to {channel}", self.namespace):
                await pubsub.subscribe(channel)
                while True:
                    msg = await pubsub.get_message(timeout=max(deadline - loop.time(), 0.0))
                    if msg is not None and msg["type"] == "subscribe":
                        break
                    if loop.time() >= deadline:
                        raise TimeoutError(f"no confirmation of SUBSCRIBE {channel} within {confirm_timeout}s")
            yield Notifications(pubsub, self.namespace)
