"""JobResultTrigger: wait for job results in the triggerer, woken by the store's notifications.

Why a trigger and not polling: the store publishes one message on ``jrs:{ns}:events`` for
every create/clean/forget (in the same Lua script as the write), so a waiting trigger wakes
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
* ``{"status": "error", "job_id", "message"}``: an entry the trigger cannot read (corrupt,
  newer schema, quarantined) or a Redis error that retrying cannot fix; the sensor then reads
  through the store, which quarantines and raises its own clear error (fail closed).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis as redis_lib
import redis.asyncio as aioredis
from airflow.triggers.base import BaseTrigger, TriggerEvent
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import AuthenticationError, AuthorizationError, RedisError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.store.keys import KeySpace
from airflow_jrs.store.model import JobResultEntry, JobStatus, validate_job_id
from airflow_jrs.store.serde import EntryDecodeError, decode_entry, result_to_dict

#: ``any``: a result exists (dirty or clean); ``dirty``: cleanup still pending; ``clean``: committed.
TARGET_STATES = ("any", "dirty", "clean")
DEFAULT_STATUSES = (JobStatus.SUCCEEDED.value,)
#: Connection kwargs the trigger passes to ``redis.asyncio.Redis`` (all plain JSON values).
CONNECTION_KEYS = frozenset(
    {
        "host",
        "port",
        "db",
        "username",
        "password",
        "ssl",
        "ssl_keyfile",
        "ssl_certfile",
        "ssl_cert_reqs",
        "ssl_ca_certs",
        "ssl_ca_path",
        "ssl_check_hostname",
        "ssl_password",
    }
)
_SSL_KEYS = sorted(k for k in CONNECTION_KEYS if k.startswith("ssl_"))
_REFUSED = (AuthenticationError, AuthorizationError)
_RETRYABLE = (RedisConnectionError, RedisTimeoutError, OSError)


def trigger_connection_kwargs(client: Any, conn_id: str) -> dict[str, Any]:
    """Plain ``redis.asyncio`` kwargs equivalent to ``client`` (resolved by the hook, not the triggerer).

    Only what the jrs connection can set is carried (host, port, db, ACL user, password, TLS);
    Redis Cluster is refused rather than half-supported.
    """
    if isinstance(client, redis_lib.RedisCluster):
        raise JrsConfigError(
            f"jrs connection {conn_id!r} is a Redis Cluster connection; deferrable=True does not "
            "support Redis Cluster yet. Use mode='reschedule' (which frees the worker slot too)."
        )
    pool = client.connection_pool
    given = pool.connection_kwargs
    if "path" in given:
        raise JrsConfigError(
            f"jrs connection {conn_id!r} uses a Unix socket; deferrable=True needs host and port. "
            "Use mode='reschedule', or a TCP address."
        )
    kwargs = {k: given[k] for k in ("host", "port", "db", "username", "password") if given.get(k) is not None}
    if issubclass(pool.connection_class, redis_lib.SSLConnection):
        kwargs["ssl"] = True
        kwargs.update({k: given[k] for k in _SSL_KEYS if given.get(k) is not None})
    return kwargs


def entry_to_dict(entry: JobResultEntry) -> dict[str, Any]:
    """What sensors hand to XCom: the result's JSON form plus its entry state."""
    return {**result_to_dict(entry.result), "state": entry.state.value}


def validate_wait_args(target_state: str, statuses: Collection[str]) -> list[str]:
    """Check ``target_state`` and ``statuses``; return the statuses as plain strings."""
    if target_state not in TARGET_STATES:
        raise ValueError(
            f"target_state {target_state!r} is not one of {list(TARGET_STATES)}: 'any' waits for "
            "any result, 'dirty' for one whose cleanup is pending, 'clean' for a committed one"
        )
    values = [s.value if isinstance(s, JobStatus) else str(s) for s in statuses]
    unknown = sorted(set(values) - {s.value for s in JobStatus})
    if unknown or not values:
        raise ValueError(f"statuses {list(statuses)!r} must be a non-empty subset of {[s.value for s in JobStatus]}")
    return values


@dataclass(frozen=True)
class WaitOutcome:
    """Verdict on a set of entries: done (with results), failed (with a message), or waiting."""

    done: bool = False
    results: list[dict[str, Any]] = field(default_factory=list)
    failed_job_id: str | None = None
    failure: str | None = None
    failed_result: dict[str, Any] | None = None
    waiting: dict[str, str] = field(default_factory=dict)

    def describe_wait(self) -> str:
        return "; ".join(f"{job_id}: {why}" for job_id, why in self.waiting.items())


def evaluate(
    job_ids: Sequence[str],
    entries: Mapping[str, JobResultEntry | None],
    *,
    namespace: str,
    target_state: str = "any",
    statuses: Collection[str] = DEFAULT_STATUSES,
    fail_on_unsuccessful: bool = True,
) -> WaitOutcome:
    """Decide whether the wait is over; the single rule shared by the sensor and the trigger.

    A job counts when its entry exists, its status is in ``statuses`` and its state matches
    ``target_state``. An unsuccessful result (FAILED, CANCELED, STOPPED) outside ``statuses``
    ends the wait as a failure when ``fail_on_unsuccessful``, whatever its entry state: its
    cleanup does not make it succeed. Otherwise the wait goes on (a later attempt may
    supersede it).
    """
    wanted = set(statuses)
    waiting: dict[str, str] = {}
    for job_id in job_ids:
        entry = entries.get(job_id)
        if entry is None:
            waiting[job_id] = "no result yet"
            continue
        status = entry.result.status
        if status.value not in wanted:
            if not status.is_success and fail_on_unsuccessful:
                error = f": {entry.result.error}" if entry.result.error else ""
                return WaitOutcome(
                    failed_job_id=job_id,
                    failure=(
                        f"job {job_id!r} (namespace {namespace!r}) has a {status.value} result{error}. "
                        "Failing now instead of waiting for a result that will not come: re-run the "
                        "job (a new attempt supersedes the result), or set fail_on_unsuccessful=False "
                        f"to wait for a later attempt, or add {status.value!r} to statuses to accept it."
                    ),
                    failed_result=entry_to_dict(entry),
                )
            waiting[job_id] = f"{status.value} result, waiting for one of {sorted(wanted)}"
            continue
        if target_state != "any" and entry.state.value != target_state:
            waiting[job_id] = f"result is {entry.state.value}, waiting for {target_state}"
    if waiting:
        return WaitOutcome(waiting=waiting)
    return WaitOutcome(done=True, results=[entry_to_dict(entries[j]) for j in job_ids])  # type: ignore[arg-type]


class _Unreadable(Exception):
    """An entry the trigger must not interpret; the sensor re-reads it through the store."""

    def __init__(self, job_id: str, message: str) -> None:
        super().__init__(message)
        self.job_id = job_id


class JobResultTrigger(BaseTrigger):
    """Yield one event once ``job_ids`` have results that :func:`evaluate` accepts.

    :param connection: ``redis.asyncio.Redis`` kwargs, see :data:`CONNECTION_KEYS`
    :param namespace: the store's namespace
    :param job_ids: jobs to wait for (all of them)
    :param target_state: ``any``, ``dirty`` or ``clean``
    :param statuses: result statuses that count (default SUCCEEDED only)
    :param fail_on_unsuccessful: end with a ``failed`` event on an unsuccessful result
    :param poll_interval: seconds between re-reads when no message arrives (the safety net)
    :param max_backoff: longest pause between reconnect attempts, in seconds
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
    ) -> None:
        super().__init__()
        unknown = sorted(set(connection) - CONNECTION_KEYS)
        if unknown:
            raise ValueError(f"connection kwargs {unknown} are not supported; allowed: {sorted(CONNECTION_KEYS)}")
        if not job_ids:
            raise ValueError("job_ids is empty: name at least one job to wait for")
        if poll_interval <= 0 or max_backoff <= 0:
            raise ValueError(f"poll_interval ({poll_interval}) and max_backoff ({max_backoff}) must be > 0")
        self.connection = dict(connection)
        self.keys = KeySpace(namespace)
        self.namespace = namespace
        self.job_ids = [validate_job_id(j) for j in job_ids]
        self.statuses = validate_wait_args(target_state, statuses)
        self.target_state = target_state
        self.fail_on_unsuccessful = fail_on_unsuccessful
        self.poll_interval = float(poll_interval)
        self.max_backoff = float(max_backoff)
        self._client: aioredis.Redis | None = None
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
            },
        )

    def __repr__(self) -> str:  # no password in logs
        return (
            f"JobResultTrigger(namespace={self.namespace!r}, job_ids={self.job_ids!r}, "
            f"target_state={self.target_state!r}, statuses={self.statuses!r})"
        )

    def _new_client(self) -> aioredis.Redis:
        # No retries inside redis-py: a silent reconnect would re-subscribe without our
        # re-read, and a message published meanwhile would be lost. We reconnect ourselves.
        return aioredis.Redis(
            **self.connection,
            retry=Retry(NoBackoff(), 0),
            socket_connect_timeout=10,
            socket_timeout=10,
            socket_keepalive=True,
            health_check_interval=max(int(self.poll_interval), 1),
            client_name=f"jrs-trigger:{self.namespace}",  # visible in CLIENT LIST
        )

    async def _close_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                await client.aclose()
            except Exception as exc:  # closing a dead connection must not hide the real outcome
                self.log.debug("Closing the Redis client failed: %s", exc)

    async def cleanup(self) -> None:
        await self._close_client()

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            while True:
                try:
                    payload = await self._subscribe_and_wait()
                except _REFUSED as exc:  # a subclass of ConnectionError, but waiting cannot fix it
                    payload = self._refused(exc)
                except _RETRYABLE as exc:
                    self._failures += 1
                    delay = min(0.05 * 2**self._failures, self.max_backoff)
                    self.log.warning(
                        "Lost Redis (%s) while waiting for %s in namespace %r; reconnecting in %.2fs "
                        "and re-reading the store",
                        exc,
                        self.job_ids,
                        self.namespace,
                        delay,
                    )
                    await self._close_client()
                    await asyncio.sleep(delay)
                    continue
                except RedisError as exc:  # wrong type, script errors: retrying cannot fix it
                    payload = self._refused(exc)
                yield TriggerEvent(payload)
                return
        finally:
            await self._close_client()

    def _refused(self, exc: Exception) -> dict[str, Any]:
        message = f"Redis refused the trigger's reads in namespace {self.namespace!r}: {exc}"
        return {"status": "error", "job_id": self.job_ids[0], "message": message}

    async def _subscribe_and_wait(self) -> dict[str, Any]:
        """One connection's life: subscribe, confirm, read, then re-read on messages and ticks."""
        await self._close_client()
        self._client = client = self._new_client()
        loop = asyncio.get_running_loop()
        async with client.pubsub() as pubsub:
            await pubsub.subscribe(self.keys.events)
            deadline = loop.time() + 10.0
            while True:  # wait for the confirmation: only then is every later write announced
                msg = await pubsub.get_message(timeout=max(deadline - loop.time(), 0.0))
                if msg is not None and msg["type"] == "subscribe":
                    break
                if loop.time() >= deadline:
                    raise RedisTimeoutError(f"no confirmation of SUBSCRIBE {self.keys.events}")
            self._failures = 0
            payload = await self._check(client)
            next_read = loop.time() + self.poll_interval
            while payload is None:
                msg = await pubsub.get_message(
                    ignore_subscribe_messages=True, timeout=max(next_read - loop.time(), 0.0)
                )
                if msg is None and loop.time() < next_read:
                    continue
                if msg is not None and not self._concerns(msg.get("data")):
                    continue
                payload = await self._check(client)
                next_read = loop.time() + self.poll_interval
            return payload

    def _concerns(self, data: Any) -> bool:
        """Whether a message names one of our jobs; unreadable messages count (re-reading is cheap)."""
        try:
            return json.loads(data).get("job_id") in self.job_ids
        except (TypeError, ValueError, AttributeError):
            return True

    async def _check(self, client: aioredis.Redis) -> dict[str, Any] | None:
        """Read the entries (one round trip) and return an event payload, or ``None`` to wait on."""
        try:
            entries = await self._read(client)
        except _Unreadable as exc:
            return {"status": "error", "job_id": exc.job_id, "message": str(exc)}
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

    async def _read(self, client: aioredis.Redis) -> dict[str, JobResultEntry | None]:
        pipe = client.pipeline(transaction=False)
        for job_id in self.job_ids:
            pipe.get(self.keys.result(job_id))
            pipe.exists(self.keys.quarantine(job_id))
        replies = await pipe.execute()
        entries: dict[str, JobResultEntry | None] = {}
        for i, job_id in enumerate(self.job_ids):
            raw, quarantined = replies[2 * i], replies[2 * i + 1]
            if raw is None:
                if quarantined:
                    raise _Unreadable(job_id, f"the entry of job {job_id!r} is in quarantine")
                entries[job_id] = None
                continue
            try:
                entry = decode_entry(raw)
            except EntryDecodeError as exc:
                raise _Unreadable(job_id, f"the entry of job {job_id!r} is unreadable: {exc.reason}") from None
            if entry.job_id != job_id:
                raise _Unreadable(job_id, f"the entry of job {job_id!r} holds job {entry.job_id!r}")
            entries[job_id] = entry
        return entries
