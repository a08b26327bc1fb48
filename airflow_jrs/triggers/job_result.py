"""JobResultTrigger: wait for job results in the triggerer, woken by the store's notifications.

Why a trigger and not polling: the store publishes one message on the namespace's events channel for
every write of an entry (create, clean, forget, purge, quarantine, release, rewrite; in the same Lua
script as the write), so a waiting trigger wakes
within a round trip of the write, while a worker slot stays free.

Why it still reads the store: pub/sub is fire-and-forget. A message published while the
trigger was not subscribed (before it started, while Redis restarted, on a dropped
connection) is gone. So the trigger

1. subscribes and waits for Redis to confirm the subscription, **then** reads the entries:
   a write that happens after the confirmation is announced to us, one that happened before
   it is seen by the read; nothing falls in between;
2. re-reads on every message naming one of its jobs, and every ``poll_interval`` anyway;
3. on a connection error backs off (doubling up to ``max_backoff``), subscribes again and
   re-reads (step 1), so a Redis restart costs one reconnect, not a lost wake-up.

It yields exactly one :class:`TriggerEvent` and closes its client in ``finally`` and in
:meth:`cleanup`. It receives plain, serializable kwargs (the sensor resolved the connection
through :class:`~airflow_jrs.hooks.jrs.JrsHook`): no connection lookup in the event loop.

Event payloads (``status`` first):

* ``{"status": "success", "results": [<result dict + "state">, ...]}`` in ``job_ids`` order;
* ``{"status": "failed", "job_id", "message", "result"}``: an unsuccessful result while
  ``fail_on_unsuccessful`` (the sensor fails fast);
* ``{"status": "error", "job_id", "message", "error"}``: an entry the store refuses to
  read (``error`` names the exception: a corrupt entry, now quarantined; a quarantined one; a
  newer schema; the message names the key) or a Redis error that retrying cannot fix; the
  sensor then reads through the sync store, which raises the same clear error (fail closed).

Reads go through :class:`~airflow_jrs.store.AsyncRedisJobResultStore`, with the same rules as
every other reader of the store; the wait rule is :func:`airflow_jrs.domain.wait.evaluate`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from airflow_jrs.domain.wait import DEFAULT_STATUSES, evaluate, validate_wait_args
from airflow_jrs.exceptions import JobResultEntryError, JrsConfigError, StoreUnavailableError
from airflow_jrs.observability.metrics import TRIGGERER_METRICS, task_of
from airflow_jrs.settings import BY_NAME
from airflow_jrs.store import AsyncRedisJobResultStore, validate_job_id
from airflow_jrs.store.redis.clients import async_policy_client
from airflow_jrs.store.redis.results_aio import ANY_JOB, CONNECTION_KEYS


class JobResultTrigger(BaseTrigger):
    """Yield one event once ``job_ids`` have results that :func:`evaluate` accepts.

    :param connection: ``redis.asyncio.Redis`` kwargs, see :data:`airflow_jrs.store.redis.results_aio.CONNECTION_KEYS`
    :param namespace: the store's namespace
    :param job_ids: jobs to wait for (all of them)
    :param target_state: ``any``, ``dirty`` or ``clean``
    :param statuses: result statuses that count (default SUCCEEDED only)
    :param fail_on_unsuccessful: end with a ``failed`` event on an unsuccessful result
    :param poll_interval: seconds between re-reads when no message arrives (the safety net)
    :param max_backoff: longest pause between reconnect attempts, in seconds
    :param client_policy: the ``[jrs]`` client policy of the task's connection, as plain JSON
        (:func:`~airflow_jrs.store.redis.clients.policy_options`); the client is built with it,
        so a new client setting needs no change here
    :param connect_timeout: what a trigger serialized before ``client_policy`` carried instead
        (``[jrs] connect_timeout``); used only without ``client_policy``
    :param read_timeout: likewise, ``[jrs] read_timeout``
    """

    def __init__(
        self,
        *,
        connection: Mapping[str, Any],
        namespace: str,
        job_ids: Sequence[str],
        target_state: str = "any",
        statuses: Collection[str] = DEFAULT_STATUSES,
        fail_on_unsuccessful: bool = True,
        poll_interval: float = 60.0,
        max_backoff: float = 30.0,
        client_policy: Mapping[str, Any] | None = None,
        connect_timeout: float = BY_NAME["connect_timeout"].default,
        read_timeout: float = BY_NAME["read_timeout"].default,
    ) -> None:
        super().__init__()
        unknown = sorted(set(connection) - CONNECTION_KEYS)
        if unknown:
            raise JrsConfigError(f"connection kwargs {unknown} are not supported; allowed: {sorted(CONNECTION_KEYS)}")
        if not job_ids:
            raise JrsConfigError("job_ids is empty: name at least one job to wait for")
        if poll_interval <= 0 or max_backoff <= 0:
            raise JrsConfigError(f"poll_interval ({poll_interval}) and max_backoff ({max_backoff}) must be > 0")
        self.connection = dict(connection)
        self.namespace = namespace
        self.job_ids = [validate_job_id(j) for j in job_ids]
        self.statuses = validate_wait_args(target_state, statuses)
        self.target_state = target_state
        self.fail_on_unsuccessful = fail_on_unsuccessful
        self.poll_interval = float(poll_interval)
        self.max_backoff = float(max_backoff)
        if client_policy is None:  # serialized by a release before client_policy: only the timeouts
            client_policy = {"socket_connect_timeout": float(connect_timeout), "socket_timeout": float(read_timeout)}
        self.client_policy = dict(client_policy)
        self._store: AsyncRedisJobResultStore | None = None
        self._failures = 0  # consecutive failed connections, for the backoff

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "connection": dict(self.connection),
                "namespace": self.namespace,
                "job_ids": list(self.job_ids),
                "target_state": self.target_state,
                "statuses": list(self.statuses),
                "fail_on_unsuccessful": self.fail_on_unsuccessful,
                "poll_interval": self.poll_interval,
                "max_backoff": self.max_backoff,
                "client_policy": dict(self.client_policy),
            },
        )

    def __repr__(self) -> str:  # no password in logs
        return (
            f"JobResultTrigger(namespace={self.namespace!r}, job_ids={self.job_ids!r}, "
            f"target_state={self.target_state!r}, statuses={self.statuses!r})"
        )

    def _new_store(self) -> AsyncRedisJobResultStore:
        # No retries inside redis-py: a silent reconnect would re-subscribe without our
        # re-read, and a message published meanwhile would be lost. We reconnect ourselves.
        client = async_policy_client(
            self.connection,
            self.client_policy,
            retry=Retry(NoBackoff(), 0),
            socket_keepalive=True,
            health_check_interval=max(int(self.poll_interval), 1),
            client_name=f"jrs-trigger:{self.namespace}",  # visible in CLIENT LIST
        )
        return AsyncRedisJobResultStore(client, self.namespace)

    async def _close_store(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            try:
                await store.aclose()
            except Exception as exc:  # closing a dead connection must not hide the real outcome
                self.log.debug("Closing the Redis client failed: %s", exc)

    async def cleanup(self) -> None:
        await self._close_store()

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            while True:
                try:
                    payload = await self._subscribe_and_wait()
                except StoreUnavailableError as exc:
                    self._count(exc)
                    if not exc.retryable:  # a wrong password, a missing permission: waiting cannot fix it
                        payload = self._refused(exc)
                    else:
                        self._failures += 1
                        delay = min(0.05 * 2**self._failures, self.max_backoff)
                        self.log.warning(
                            "Lost Redis (%s) while waiting for %s in namespace %r; reconnecting in %.2fs "
                            "and re-reading the store",
                            exc,  # our words (store.diagnosis), not the server's
                            self.job_ids,
                            self.namespace,
                            delay,
                        )
                        await self._close_store()
                        await asyncio.sleep(delay)
                        continue
                yield TriggerEvent(payload)
                return
        finally:
            await self._close_store()

    def _count(self, exc: BaseException) -> None:
        """A store error (by kind) or a read that met quarantine, in the triggerer's Airflow metrics."""
        dag_id, task_id = task_of(self.task_instance)
        TRIGGERER_METRICS.failed(exc, dag_id=dag_id, task_id=task_id)

    def _refused(self, exc: StoreUnavailableError) -> dict[str, Any]:
        message = f"Redis refused the trigger's reads in namespace {self.namespace!r}: {exc}"
        return {"status": "error", "job_id": self.job_ids[0], "message": message, "error": type(exc).__name__}

    async def _subscribe_and_wait(self) -> dict[str, Any]:
        """One connection's life: subscribe, confirm, read, then re-read on notifications and ticks."""
        await self._close_store()
        self._store = store = self._new_store()
        loop = asyncio.get_running_loop()
        async with store.notifications() as notifications:
            self._failures = 0
            payload = await self._check(store)
            next_read = loop.time() + self.poll_interval
            while payload is None:
                job_id = await notifications.next(timeout=max(next_read - loop.time(), 0.0))
                if job_id is None and loop.time() < next_read:
                    continue
                if job_id is not None and job_id != ANY_JOB and job_id not in self.job_ids:
                    continue
                payload = await self._check(store)
                next_read = loop.time() + self.poll_interval
            return payload

    async def _check(self, store: AsyncRedisJobResultStore) -> dict[str, Any] | None:
        """Read the entries (one round trip) and return an event payload, or ``None`` to wait on."""
        try:
            entries = await store.get_entries(self.job_ids)
        except JobResultEntryError as exc:
            self._count(exc)  # a read that met quarantine
            return {"status": "error", "job_id": exc.job_id, "message": str(exc), "error": type(exc).__name__}
        outcome = evaluate(
            self.job_ids,
            entries,
            namespace=self.namespace,
            target_state=self.target_state,
            statuses=self.statuses,
            fail_on_unsuccessful=self.fail_on_unsuccessful,
        )
        if outcome.failure is not None:
            return {
                "status": "failed",
                "job_id": outcome.failed_job_id,
                "message": outcome.failure,
                "result": outcome.failed_result,
            }
        if outcome.done:
            return {"status": "success", "results": outcome.results}
        self.log.debug("Still waiting: %s", outcome.describe_wait())
        return None
