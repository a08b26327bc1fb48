"""Durability on request: a create or clean returns only once Redis says the write will survive.

By default a write is acknowledged when it is in the primary's memory: with ``appendfsync
everysec`` a crash may lose the last second, and a failover may lose what the replicas had
not received yet. A lost SUCCEEDED result only costs a recomputation (the job runs again),
but a lost *clean* mark or a lost result of a job with side effects outside its staging folder
may cost more; this option trades a little latency for that (docs/benchmarks.md has the
figure):

=================  ===========================================================================
``none``           acknowledged in memory (the default; the behaviour of every earlier version)
``aof``            ``WAITAOF 1 0 <timeout>``: fsynced to the primary's append-only file (Redis
                   7.2+, ``appendonly yes``); an older server or AOF off is a configuration error
``replicas:N``     ``WAIT N <timeout>``: received by N replicas (any Redis version)
=================  ===========================================================================

When the acknowledgement does not come in time the write has still happened (Redis cannot
take it back): the task fails with :class:`StoreUnavailableError` and its retry finds the
entry, exactly as after a lost reply.

The same setting covers the writes that let an attempt start Spark (:class:`DurableWrites`):
taking a job's lease (acquire and take-over), recording its intent and the supervisor's first
heartbeat. A failover to a replica without them would let a second attempt take the lease
and start beside the first until the first one's next renewal is refused (up to
``lease_ttl``/3); with ``durability`` set none of them is acted on before the replicas (or the
disk) have it. Renewals and later beats do not wait: the lease and the heartbeat they extend
are already durable, and a lost extension only ends them earlier, which the next renewal
finds (docs/concepts/leases.md).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis as redis_lib

from airflow_jrs.exceptions import JrsConfigError, StoreUnavailableError
from airflow_jrs.settings import durability_parts
from airflow_jrs.store.redis.clients import read_timeout as client_read_timeout

#: Seconds between the end of the wait and the client's read timeout.
READ_TIMEOUT_MARGIN = 1.0
#: Pipelines a durable write sends at most: again after ``NoScriptError`` or a demoted primary's ``READONLY``.
PIPELINE_TRIES = 3
#: Seconds before a write refused by a demoted primary is sent again (times the try's number).
DEMOTED_PAUSE = 0.2
#: What the task does after a result or a clean was not made durable.
_RETRY_FINDS_IT = "The task fails so that its retry (which finds the entry) runs once the store is healthy again"
#: WAITAOF exists from this server version on.
WAITAOF_SINCE = (7, 2)
#: ``StoreUnavailableError.kind`` of a write Redis made but could not make durable in time. The
#: store answered: this is a refusal, not an outage, and nothing may start on it (not even an
#: unguarded run under ``on_store_unavailable=run``, which exists for a store that cannot be reached).
NOT_DURABLE = "not_durable"


def _version(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in text.split(".")[:2])
    except ValueError:
        return (0,)


@dataclass(frozen=True)
class Durability:
    """A parsed ``durability`` setting: ``mode`` is ``none``, ``aof`` or ``replicas``."""

    mode: str = "none"
    replicas: int = 0

    @classmethod
    def parse(cls, value: str | None) -> Durability:
        """The setting's value, by its one grammar (:func:`airflow_jrs.settings.durability_parts`)."""
        mode, replicas = durability_parts(value)
        return cls(mode, replicas)

    @property
    def enabled(self) -> bool:
        return self.mode != "none"

    def __str__(self) -> str:
        return f"replicas:{self.replicas}" if self.mode == "replicas" else self.mode

    def check_timeout(self, seconds: float, read_timeout: float | None) -> None:
        """The wait must end before the client's read timeout: otherwise redis-py gives up on the
        reply first and *retries the pipeline*, which runs the write script a second time."""
        if not self.enabled:
            return
        if not seconds > 0:
            raise JrsConfigError(f"durability_timeout must be positive, got {seconds!r}")
        if read_timeout is not None and seconds + READ_TIMEOUT_MARGIN > read_timeout:
            raise JrsConfigError(
                f"durability_timeout ({seconds:g} s) must be at least {READ_TIMEOUT_MARGIN:g} s shorter than "
                f"the Redis client's read timeout ({read_timeout:g} s, [jrs] read_timeout): lower the one or "
                "raise the other"
            )

    def check_server(self, client: Any, namespace: str) -> None:
        """Refuse ``aof`` where it cannot work, before the first write rather than after it."""
        if self.mode != "aof":
            return
        info = client.info()
        version = str(info.get("redis_version", "?"))
        if _version(version) < WAITAOF_SINCE:
            raise JrsConfigError(
                f"durability='aof' (namespace {namespace!r}) waits with WAITAOF, which needs Redis "
                f"{'.'.join(map(str, WAITAOF_SINCE))} or newer; this server runs redis {version}. Upgrade "
                "Redis, or set durability to 'replicas:N' (WAIT, any version) or 'none'."
            )
        if not info.get("aof_enabled"):
            raise JrsConfigError(
                f"durability='aof' (namespace {namespace!r}) needs the server's append-only file, but "
                f"redis {version} runs with appendonly no. Turn it on (appendonly yes) or choose "
                "another durability."
            )

    def wait(self, pipe: Any, timeout_ms: int) -> None:
        """Queue the wait behind the write on ``pipe`` (same connection)."""
        if self.mode == "aof":
            pipe.execute_command("WAITAOF", 1, 0, timeout_ms)
        else:
            pipe.execute_command("WAIT", self.replicas, timeout_ms)

    def write_and_wait(self, client: Any, script: Any, keys: list[str], args: list[Any], timeout_ms: int) -> Any:
        """Run ``script`` and :meth:`wait` behind it in one pipeline; returns ``(reply, acked)``.

        A pipeline loads its scripts before it sends them; a failover in between (or redis-py's
        retry of the pipeline on the new primary after a lost connection) meets a server that
        never saw them, and the pipeline raises ``NoScriptError``: the script did not run there.
        It is sent again in a new pipeline, which loads it again (what redis-py does for a
        script called outside a pipeline); the store's scripts recognise their own earlier write.

        Behind Sentinel, a pooled connection to the demoted primary answers ``READONLY``: the
        write was refused, and redis-py drops that connection but retries the pipeline on it
        without asking the sentinels again. A new pipeline takes a new connection, which does."""
        for attempt in range(1, PIPELINE_TRIES + 1):
            pipe = client.pipeline(transaction=False)
            script(keys=keys, args=args, client=pipe)
            self.wait(pipe, timeout_ms)
            try:
                return pipe.execute()
            except redis_lib.exceptions.NoScriptError:
                if attempt == PIPELINE_TRIES:
                    raise
            except redis_lib.exceptions.ConnectionError as exc:
                if attempt == PIPELINE_TRIES or not isinstance(exc.__context__, redis_lib.exceptions.ReadOnlyError):
                    raise
                time.sleep(DEMOTED_PAUSE * attempt)  # a sentinel may still name the old primary
        raise AssertionError("unreachable")

    def require(
        self, reply: Any, what: str, namespace: str, job_id: str, timeout_ms: int, *, then: str | None = None
    ) -> None:
        """Raise unless ``reply`` (of :meth:`wait`) acknowledges the write; ``then`` says what the
        task does next (by default: its retry finds the entry)."""
        if self.mode == "aof":
            local = int(reply[0]) if isinstance(reply, (list, tuple)) and reply else 0
            if local >= 1:
                return
            got = f"the append-only file did not have it on disk within {timeout_ms} ms"
        else:
            if int(reply) >= self.replicas:
                return
            got = f"{int(reply)} of {self.replicas} replicas acknowledged it within {timeout_ms} ms"
        raise StoreUnavailableError(
            f"{what} was written, but not durably as durability={str(self)!r} asks: {got}. "
            f"{then or _RETRY_FINDS_IT}; "
            "check the replicas' link (INFO replication) or the disk.",
            namespace=namespace,
            job_id=job_id,
            retryable=True,
            what=f"make {what} durable",
            kind=NOT_DURABLE,
        )


@dataclass
class DurableWrites:
    """``durability`` for the writes that let an attempt start Spark: the lease (acquire,
    take-over), the intent and the first heartbeat (the result store has its own, the same rule).

    One per client, shared by the lease, the intent store and the heartbeats of a namespace
    (:class:`airflow_jrs.protocol.JobNamespace`), so the server is checked once. ``timeout``
    is capped below the client's read timeout: redis-py would otherwise give up on the reply
    first and send the script again (the supervisor's client is bounded at a sixth of the TTL)."""

    durability: Durability = field(default_factory=Durability)
    #: seconds a write waits for its acknowledgement
    timeout: float = 3.0
    checked: bool = False

    @property
    def enabled(self) -> bool:
        return self.durability.enabled

    def timeout_ms(self, client: Any) -> int:
        read_timeout = client_read_timeout(client)
        seconds = self.timeout
        if read_timeout is not None:
            seconds = min(seconds, max(read_timeout - READ_TIMEOUT_MARGIN, read_timeout / 2))
        return max(1, int(seconds * 1000))

    def run(
        self,
        client: Any,
        script: Any,
        *,
        keys: list[str],
        args: list[Any],
        written: Callable[[Any], bool],
        what: str,
        namespace: str,
        job_id: str,
        then: str,
        undo: Callable[[Any], Any] | None = None,
    ) -> Any:
        """Run the write ``script``; when ``written(reply)`` and durability is on, wait for the
        acknowledgement on the same connection (one pipeline: ``WAIT`` counts the writes of its
        own connection). Not acknowledged: ``undo(reply)`` (best effort: give the lease back), then
        :class:`StoreUnavailableError` naming what was not made durable and ``then``."""
        if not self.enabled:
            return script(keys=keys, args=args)
        node = (
            client.get_node_from_key(keys[0]).redis_connection if isinstance(client, redis_lib.RedisCluster) else client
        )
        if not self.checked:
            self.durability.check_server(node, namespace)
            self.checked = True
        timeout_ms = self.timeout_ms(node)
        reply, acked = self.durability.write_and_wait(node, script, keys, args, timeout_ms)
        if written(reply):
            try:
                self.durability.require(acked, what, namespace, job_id, timeout_ms, then=then)
            except StoreUnavailableError:
                if undo is not None:
                    with contextlib.suppress(Exception):  # the TTL is the fallback; the error is what matters
                        undo(reply)
                raise
        return reply
