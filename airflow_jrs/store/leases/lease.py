"""Fenced leases: at most one attempt works on a job, and a stale one cannot write. The contract.

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

This module is the contract every backend's lease keeps (:class:`JobLease`: acquire, take over,
peek, renew, release, revoke; the renewal thread and the loss it notices are the same for all)
and what a holder is (:class:`LeaseHolder`). The Redis lease is
:class:`airflow_jrs.store.redis.leases.RedisJobLease`; a namespace hands leases out
(:meth:`airflow_jrs.store.namespace.JobNamespace.lease`).
"""

from __future__ import annotations

import abc
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from airflow_jrs.domain.model import validate_job_id
from airflow_jrs.exceptions import JrsConfigError, LeaseHeldError, LeaseLostError
from airflow_jrs.settings import DEFAULT_LEASE_TTL
from airflow_jrs.store.leases.fence import Fence, new_nonce

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


def boot_clock() -> float:
    """Seconds on ``CLOCK_BOOTTIME``: unlike ``time.monotonic()`` it counts a suspend of the host."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


class JobLease(abc.ABC):
    """The lease of one job in one namespace. Not reusable: one ``acquire`` per instance.

    What every backend shares is here: the owner nonce drawn per instance, the renewal thread
    (every ``ttl/3``, giving up only once a whole TTL passed without a renewal), the loss it
    notices and :meth:`check`. A backend writes the six transitions, each atomic and compared on
    the fence identity."""

    def __init__(
        self,
        namespace: str,
        job_id: str,
        ttl: float = DEFAULT_LEASE_TTL,
        owner: dict[str, Any] | None = None,
        on_lost: Callable[[JobLease], None] | None = None,
    ) -> None:
        self.namespace = namespace
        self.job_id = validate_job_id(job_id)
        if ttl < 1:
            raise JrsConfigError(f"lease ttl must be at least 1 second, got {ttl}")
        self.ttl = ttl
        self.owner = default_owner() if owner is None else owner
        self.on_lost = on_lost
        #: This lease's owner nonce: with the token, an identity that cannot repeat (a lost INCR
        #: can re-issue a token, never a nonce). One per instance, so a retried command keeps it.
        self.nonce = new_nonce()
        self.token: Fence | None = None
        #: ``CLOCK_BOOTTIME`` when the last acquire or renewal that succeeded was sent
        self.renewed_at: float | None = None
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(namespace={self.namespace!r}, job_id={self.job_id!r}, token={self.token})"

    @property
    def ttl_ms(self) -> int:
        return int(self.ttl * 1000)

    @abc.abstractmethod
    def acquire(self) -> Fence:
        """Take the lease and return its fence (the token, carrying this lease's nonce), or raise
        :class:`LeaseHeldError`. A retry of this call after a lost reply gets the same fence."""

    @abc.abstractmethod
    def take_over(self, dead: LeaseHolder) -> Fence | None:
        """Take the lease from ``dead``, a holder the caller proved dead, before its TTL runs out:
        a compare-and-set on its token and nonce that hands out a new token. ``None`` when the lease
        is gone meanwhile (call :meth:`acquire`); raises :class:`LeaseHeldError` naming whoever holds
        it now. Proving the holder dead is the caller's business: the lease cannot see processes."""

    @abc.abstractmethod
    def peek(self) -> LeaseHolder | None:
        """The current holder of the job's lease (anyone's, not only ours), or ``None``."""

    @abc.abstractmethod
    def renew(self) -> bool:
        """Extend the lease; ``False`` (and :attr:`lost` set, through :meth:`_mark_lost`) when it is
        no longer ours."""

    @abc.abstractmethod
    def release(self) -> bool:
        """Give the lease back (no-op when already lost); stops renewal."""

    @abc.abstractmethod
    def revoke(self) -> bool:
        """Release our lease on a connection of its own (safe inside a signal handler, whose
        interrupted thread may hold a pooled one); never raises. ``True`` when released."""

    def held_for_sure(self, share: float) -> bool:
        """Has less than ``share`` of the TTL passed since the last acquire or renewal was *sent*?

        What an attempt that runs Spark in its own process checks to fence itself off before the
        key can expire on the server (a partition from Redis leaves the renewer retrying until a
        whole TTL passed, by which time a successor may run): the supervisor's rule, for
        launchers that have no supervisor. On ``CLOCK_BOOTTIME``, which counts a suspend."""
        return self.renewed_at is not None and boot_clock() - self.renewed_at < share * self.ttl

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

    def _held(self, holder: LeaseHolder) -> LeaseHeldError:
        return LeaseHeldError(
            f"job {self.job_id!r} is being worked on by another attempt ({holder.describe()}); its lease "
            f"expires in {holder.ttl_ms / 1000:.1f}s unless renewed. Not starting a second copy.",
            job_id=self.job_id,
            holder=holder.describe(),
        )
