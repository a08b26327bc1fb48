"""Fenced leases: at most one attempt works on a job, and a stale one cannot write.

Leadership alone is not mutual exclusion (FLINK-2354): a holder paused past its TTL wakes up
believing it still holds the job. So every acquisition hands out a *fencing token* from the
namespace's counter, which only grows (``INCR``: one key per namespace, so nothing is left
behind per job, and a job purged and created again never meets an old token), and every state
change of the job compares the caller's token with the lease's inside one Lua script. A timeline::

    t0  attempt A acquires         lease{token=7}   A works, renews every ttl/3
    t1  A is SIGSTOPped            lease expires at t0+ttl
    t2  attempt B acquires         lease{token=8}   B runs Spark
    t3  A wakes, tries to write    script sees token 8 != 7  -> LeaseLostError, nothing written

Unlike redis-py's ``Lock`` (a random token: tells holders apart but not their order) the
token orders holders, and unlike a lock without TTL a crashed holder frees the job. And like
``Lock``, each lease also has a random *owner nonce* (:mod:`airflow_jrs.spark.fence`) that every
fenced script compares with the token: a counter that went back (a failover that lost the
``INCR``, an ``everysec`` crash) can hand token 8 out twice, the nonce tells those two holders
apart. The nonce also lets a retried ACQUIRE or TAKE_OVER (its first reply lost on the wire)
recognise the lease it already took.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis as redis_lib

from airflow_jrs.domain.model import validate_job_id
from airflow_jrs.exceptions import JrsConfigError, LeaseHeldError, LeaseLostError
from airflow_jrs.settings import DEFAULT_LEASE_TTL
from airflow_jrs.store.leases.fence import Fence, fence_arg, new_nonce
from airflow_jrs.store.redis import lease_scripts as scripts
from airflow_jrs.store.redis.clients import fresh_client
from airflow_jrs.store.redis.durability import DurableWrites
from airflow_jrs.store.redis.errors import redis_errors
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.lua import ACQUIRED
from airflow_jrs.store.redis.replies import as_str

log = logging.getLogger(__name__)


def process_identity(pid: int) -> dict[str, str]:
    """What tells process ``pid`` apart from a later process that reuses its number, on Linux.

    ``pid_start`` is its start time (clock ticks since boot, ``/proc/<pid>/stat``) and
    ``pid_space`` the kernel boot and pid namespace it lives in: two containers may share a
    host name, never both. A successor may only judge a holder's pid from the same pid space
    (:mod:`airflow_jrs.protocol.takeover`). Empty where ``/proc`` is not there."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            start = fh.read().rsplit(")", 1)[1].split()[19]
        with open("/proc/sys/kernel/random/boot_id") as fh:
            boot = fh.read().strip()
        space = f"{boot}/{os.readlink(f'/proc/{pid}/ns/pid')}"
    except (OSError, IndexError):
        return {}
    return {"pid_start": start, "pid_space": space}


def default_owner(**extra: Any) -> dict[str, Any]:
    """Who holds a lease: enough for an on-call engineer to find the process, and for a
    successor on the same host to prove it dead (:func:`process_identity`)."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, **process_identity(pid), **extra}


@dataclass(frozen=True)
class LeaseHolder:
    """Who holds a job's lease now: the fencing token, the owner (host, pid, task), the TTL left,
    and the owner nonce (``None`` for a lease taken by a version without nonces)."""

    token: int
    owner: dict[str, Any]
    ttl_ms: int
    nonce: str | None = None
    #: the TTL each renewal sets (``None`` for a lease taken by a version that did not keep it):
    #: ``lease_ttl_ms - ttl_ms`` is how long ago its holder last renewed, on the server's clock
    lease_ttl_ms: int | None = None

    @property
    def fence(self) -> Fence:
        """The holder's fence identity: what a take-over compares."""
        return Fence(self.token, self.nonce)

    @property
    def silent_ms(self) -> int | None:
        """Milliseconds since the holder last acquired or renewed the lease (it renews every third
        of :attr:`lease_ttl_ms` while it lives); ``None`` when the lease does not say its TTL."""
        return None if self.lease_ttl_ms is None else max(0, self.lease_ttl_ms - self.ttl_ms)

    def describe(self) -> dict[str, Any]:
        return {**self.owner, "token": self.token, "ttl_ms": self.ttl_ms}


def _holder(token: Any, owner: Any, ttl_ms: Any, nonce: Any = None, lease_ttl_ms: Any = None) -> LeaseHolder:
    try:
        parsed = json.loads(owner) if owner else {}
        if not isinstance(parsed, dict):
            raise ValueError(owner)
    except ValueError:
        parsed = {"owner": repr(owner)}
    nonce = as_str(nonce) if nonce else None
    try:
        full = int(as_str(lease_ttl_ms)) if lease_ttl_ms else None
    except ValueError:
        full = None
    return LeaseHolder(token=int(token), owner=parsed, ttl_ms=int(ttl_ms), nonce=nonce or None, lease_ttl_ms=full)


def boot_clock() -> float:
    """Seconds on ``CLOCK_BOOTTIME``: unlike ``time.monotonic()`` it counts a suspend of the host."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


@dataclass
class JobLease:
    """The lease of one job in one namespace. Not reusable: one ``acquire`` per instance."""

    client: redis_lib.Redis
    namespace: str
    job_id: str
    ttl: float = DEFAULT_LEASE_TTL
    owner: dict[str, Any] = field(default_factory=default_owner)
    on_lost: Callable[[JobLease], None] | None = None
    #: ``durability`` for acquire and take-over (``None``: acknowledged in memory). A lease lost
    #: in a failover lets a second attempt start beside this one until its next renewal.
    durable: DurableWrites | None = None

    def __post_init__(self) -> None:
        validate_job_id(self.job_id)
        if self.ttl < 1:
            raise JrsConfigError(f"lease ttl must be at least 1 second, got {self.ttl}")
        self.keys = KeySpace(self.namespace)
        #: This lease's owner nonce: with the token, an identity that cannot repeat (a lost INCR
        #: can re-issue a token, never a nonce). One per instance, so a retried command keeps it.
        self.nonce = new_nonce()
        self.token: Fence | None = None
        #: ``CLOCK_BOOTTIME`` when the last acquire or renewal that succeeded was sent
        self.renewed_at: float | None = None
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._acquire = self.client.register_script(scripts.ACQUIRE_LEASE)
        self._take_over = self.client.register_script(scripts.TAKE_OVER_LEASE)
        self._renew = self.client.register_script(scripts.RENEW_LEASE)
        self._release = self.client.register_script(scripts.RELEASE_LEASE)

    @property
    def ttl_ms(self) -> int:
        return int(self.ttl * 1000)

    def _acquire_keys(self) -> list[str]:
        """The keys of ACQUIRE_LEASE; TAKE_OVER_LEASE uses the same, so both count on one fence."""
        return [self.keys.lease(self.job_id), self.keys.fence_counter]

    def acquire(self) -> Fence:
        """Take the lease and return its fence (the token, carrying this lease's nonce), or raise
        :class:`LeaseHeldError`. A retry of this call after a lost reply gets the same fence."""
        sent = boot_clock()
        with redis_errors(f"acquire the lease of job {self.job_id!r}", self.namespace, self.job_id):
            reply = self._hand_out(
                self._acquire, [json.dumps(self.owner), self.ttl_ms, int(time.time() * 1000), self.nonce]
            )
        if int(reply[0]) == ACQUIRED:
            self.token = Fence(int(reply[1]), self.nonce)
            self.renewed_at = sent
            return self.token
        raise self._held(_holder(*reply[1:5]))

    def take_over(self, dead: LeaseHolder) -> Fence | None:
        """Take the lease from ``dead``, a holder the caller proved dead, before its TTL runs out.

        A compare-and-set on ``dead``'s token and nonce that hands out a new token from the fence counter:
        whatever ``dead`` left running can no longer write, and of two successors that proved the
        same holder dead only one gets the lease. Returns the new token; ``None`` when the lease is
        gone meanwhile (call :meth:`acquire`); raises :class:`LeaseHeldError` naming whoever holds
        it now. Proving the holder dead is the caller's business: the lease cannot see processes.
        """
        sent = boot_clock()
        with redis_errors(f"take over the lease of job {self.job_id!r}", self.namespace, self.job_id):
            reply = self._hand_out(
                self._take_over,
                [fence_arg(dead.fence), json.dumps(self.owner), self.ttl_ms, int(time.time() * 1000), self.nonce],
            )
        if int(reply[0]) == ACQUIRED:
            self.token = Fence(int(reply[1]), self.nonce)
            self.renewed_at = sent
            return self.token
        if len(reply) < 4:
            return None
        raise self._held(_holder(*reply[1:5]))

    def _hand_out(self, script: Any, args: list[Any]) -> Any:
        """Run ACQUIRE_LEASE or TAKE_OVER_LEASE; with ``durability`` set, the lease counts as taken
        only once the replicas (or the disk) have it, else it is given back and the call raises
        :class:`~airflow_jrs.exceptions.StoreUnavailableError` (nothing started: a retry takes it)."""
        if self.durable is None:
            return script(keys=self._acquire_keys(), args=args)
        return self.durable.run(
            self.client, script, keys=self._acquire_keys(), args=args,
            written=lambda reply: int(reply[0]) == ACQUIRED,
            what=f"the lease of job {self.job_id!r}", namespace=self.namespace, job_id=self.job_id,
            then="The lease was given back and nothing was started; the task's retry takes it again once the "
            "store is healthy",
            undo=lambda reply: self._release(
                keys=[self.keys.lease(self.job_id)], args=[fence_arg(Fence(int(reply[1]), self.nonce))]
            ),
        )  # fmt: skip

    def _held(self, holder: LeaseHolder) -> LeaseHeldError:
        return LeaseHeldError(
            f"job {self.job_id!r} is being worked on by another attempt ({holder.describe()}); its lease "
            f"expires in {holder.ttl_ms / 1000:.1f}s unless renewed. Not starting a second copy.",
            job_id=self.job_id,
            holder=holder.describe(),
        )

    def peek(self) -> LeaseHolder | None:
        """The current holder of the job's lease (anyone's, not only ours), or ``None``."""
        key = self.keys.lease(self.job_id)
        with redis_errors(f"read the lease of job {self.job_id!r}", self.namespace, self.job_id):
            pipe = self.client.pipeline(transaction=False)
            pipe.hmget(key, ["token", "owner", "nonce", "ttl_ms"])
            pipe.pttl(key)
            (token, owner, nonce, lease_ttl), ttl_ms = pipe.execute()
        if token is None:
            return None
        return _holder(as_str(token), as_str(owner) if owner is not None else None, ttl_ms, nonce, lease_ttl)

    def revoke(self) -> bool:
        """Release our lease on a connection of its own; safe inside a signal handler.

        ``on_kill`` runs on the thread that was interrupted, which may be in the middle of a
        command on a pooled connection: reusing it could read that command's reply. A fresh
        connection with the same settings cannot. Never raises: the lease's TTL is the
        fallback, and a kill must not be masked by a Redis error. ``True`` when released.
        """
        self.stop_renewal()
        if self.token is None:
            return False
        try:
            client = fresh_client(self.client)
            try:
                release = client.register_script(scripts.RELEASE_LEASE)
                return bool(release(keys=[self.keys.lease(self.job_id)], args=[fence_arg(self.token)]))
            finally:
                client.close()
        except Exception as exc:
            log.warning("Could not revoke the lease of job %r (it expires by its TTL): %s", self.job_id, exc)
            return False

    def renew(self) -> bool:
        """Extend the lease; ``False`` (and :attr:`lost` set) when it is no longer ours."""
        token = self._require_token()
        sent = boot_clock()
        with redis_errors(f"renew the lease of job {self.job_id!r}", self.namespace, self.job_id):
            ok = bool(self._renew(keys=[self.keys.lease(self.job_id)], args=[fence_arg(token), self.ttl_ms]))
        if not ok:
            self._mark_lost()
        else:
            self.renewed_at = sent
        return ok

    def held_for_sure(self, share: float) -> bool:
        """Has less than ``share`` of the TTL passed since the last acquire or renewal was *sent*?

        What an attempt that runs Spark in its own process checks to fence itself off before the
        key can expire on the server (a partition from Redis leaves the renewer retrying until a
        whole TTL passed, by which time a successor may run): the supervisor's rule, for
        launchers that have no supervisor. On ``CLOCK_BOOTTIME``, which counts a suspend."""
        return self.renewed_at is not None and boot_clock() - self.renewed_at < share * self.ttl

    def release(self) -> bool:
        """Give the lease back (no-op when already lost); stops renewal."""
        self.stop_renewal()
        if self.token is None:
            return False
        with redis_errors(f"release the lease of job {self.job_id!r}", self.namespace, self.job_id):
            return bool(self._release(keys=[self.keys.lease(self.job_id)], args=[fence_arg(self.token)]))

    def check(self) -> Fence:
        """Raise :class:`LeaseLostError` when renewal noticed the loss; else return the fence (the
        token, carrying the nonce: pass it to every fenced write)."""
        token = self._require_token()
        if self.lost.is_set():
            raise LeaseLostError(
                f"lost the lease of job {self.job_id!r} (fencing token {token}); another attempt "
                "may own the job. This attempt stops and writes nothing.",
                job_id=self.job_id,
                fence=token,
            )
        return token

    def start_renewal(self, interval: float | None = None) -> None:
        """Renew in a daemon thread every ``ttl/3`` seconds until released or lost."""
        self._require_token()
        period = interval if interval is not None else self.ttl / 3
        self._thread = threading.Thread(
            target=self._renew_loop, args=(period,), name=f"jrs-lease-{self.job_id}", daemon=True
        )
        self._thread.start()

    def stop_renewal(self) -> None:
        self._stop.set()
        thread = self._thread
        # is_alive(): a kill (signal handler) can land between the thread's creation and its
        # start, and joining a thread never started raises (fault trials, seed 1, trial 759).
        if thread is not None and thread is not threading.current_thread() and thread.is_alive():
            thread.join(timeout=5)

    def _renew_loop(self, period: float) -> None:
        """Renew until stopped. A Redis blip (restart, failover) is retried: the lease is only
        given up once it would have expired since the last successful renewal, because from
        then on another attempt may legitimately hold it."""
        last_ok = time.monotonic()
        while not self._stop.wait(period):
            try:
                if not self.renew():
                    return
                last_ok = time.monotonic()
            except Exception as exc:
                if time.monotonic() - last_ok >= self.ttl:
                    log.error("Could not renew the lease of job %r for %.0fs: %s", self.job_id, self.ttl, exc)
                    self._mark_lost()
                    return
                log.warning("Could not renew the lease of job %r (will retry): %s", self.job_id, exc)

    def _mark_lost(self) -> None:
        if self.lost.is_set():
            return
        self.lost.set()
        log.error("Lost the lease of job %r (fencing token %s)", self.job_id, self.token)
        if self.on_lost is not None:
            self.on_lost(self)

    def _require_token(self) -> Fence:
        if self.token is None:
            # A programming error, not a state of the job: no JrsError on purpose.
            raise RuntimeError(f"the lease of job {self.job_id!r} was never acquired; call acquire() first")
        return self.token


def held_leases(client: redis_lib.Redis, namespace: str) -> dict[str, LeaseHolder]:
    """Every lease held in ``namespace`` now, by job id: what the on-call engineer asks first
    ("who is running what?"). Leases have no index (they come and go with attempts), so this
    SCANs (never KEYS: a large keyspace must not block the server); a lease that expires
    between the SCAN and the read is left out."""
    keys = KeySpace(namespace)
    with redis_errors("list held leases", namespace):
        found = sorted(as_str(k) for k in client.scan_iter(match=keys.job_pattern("lease"), count=1000))
        pipe = client.pipeline(transaction=False)
        for key in found:
            pipe.hmget(key, ["token", "owner", "nonce", "ttl_ms"])
            pipe.pttl(key)
        replies = pipe.execute() if found else []
    held: dict[str, LeaseHolder] = {}
    for i, key in enumerate(found):
        (token, owner, nonce, lease_ttl), ttl_ms = replies[2 * i], replies[2 * i + 1]
        if token is not None:
            held[keys.job_id_of("lease", key)] = _holder(
                as_str(token), as_str(owner) if owner is not None else None, ttl_ms, nonce, lease_ttl
            )
    return held
