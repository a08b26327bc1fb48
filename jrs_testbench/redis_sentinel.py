"""A real local Sentinel group: one primary, its replicas and three sentinels, all on loopback.

The servers are :class:`~jrs_testbench.redis_server.EmbeddedRedis` (append-only, ``appendfsync
always``); each sentinel is ``redis-server <conf> --sentinel`` with its own folder (a sentinel
rewrites its config file as it learns). The primary refuses writes once no replica has
acknowledged it for :data:`MAX_LAG_S` seconds (``min-replicas-to-write 1``,
``min-replicas-max-lag``): what the operations guide tells teams to set, and what bounds how long
a holder cut off with the old primary can renew its lease there.

:meth:`EmbeddedSentinelGroup.fail_over` makes one failover happen the way a team sees it (the
primary killed, paused or cut off) and returns when the sentinels name a new primary that answers
as one; the old server comes back as a replica.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import redis as redis_lib

from jrs_testbench.helpers import free_port
from jrs_testbench.lossy_proxy import LossyProxy
from jrs_testbench.redis_server import EmbeddedRedis, find_redis_server

#: The name the sentinels monitor the primary under.
MASTER = "jrs"
#: A primary silent this long (ms) is down for a sentinel: small, so a trial fails over often.
DOWN_AFTER_MS = 600
#: Seconds a failover waits for every sentinel (not only a majority) to name the new primary.
SETTLE_S = 10.0
#: Seconds without a replica's acknowledgement after which the primary refuses writes.
MAX_LAG_S = 2


@dataclass
class Failover:
    """One failover: how it was caused, the primary before and after, and how long it took until
    the sentinels named a new primary that accepts writes."""

    how: str
    old_port: int
    new_port: int
    took_s: float


class EmbeddedSentinelGroup:
    """``replicas`` replicas of one primary and ``sentinels`` sentinels (quorum: a majority)."""

    def __init__(
        self, data_dir: str | os.PathLike[str], *, replicas: int = 2, sentinels: int = 3, proxied: bool = False
    ) -> None:
        self.data_dir = Path(data_dir)
        guard = [
            "--min-replicas-to-write",
            "1",
            "--min-replicas-max-lag",
            str(MAX_LAG_S),
            "--repl-diskless-sync-delay",
            "0",
        ]
        self.servers = [EmbeddedRedis(self.data_dir / f"server-{i}", extra_args=guard) for i in range(1 + replicas)]
        #: ``proxied``: each server is reached (by clients, sentinels and the other servers) only
        #: through its own TCP proxy, the address it announces, so a cut of that proxy cuts it off
        #: while it runs on (``fail_over("cut")``)
        self.proxies: list[LossyProxy] = []
        if proxied:
            self.proxies = [LossyProxy("127.0.0.1", server.port) for server in self.servers]
            for server, proxy in zip(self.servers, self.proxies, strict=True):
                server.extra_args += ["--replica-announce-ip", "127.0.0.1", "--replica-announce-port", str(proxy.port)]
        self.sentinel_ports = [free_port() for _ in range(sentinels)]
        self._sentinels: list[subprocess.Popen[bytes]] = []
        self.quorum = sentinels // 2 + 1

    # -- where it is -------------------------------------------------------------------------
    def url(self, db: int = 0, **query: str) -> str:
        """The store's one spelling: a sentinel's address, the rest as ``sentinels``."""
        first, *rest = self.sentinel_ports
        extra = "".join(f"&{k}={v}" for k, v in query.items())
        more = ",".join(f"127.0.0.1:{p}" for p in rest)
        return f"redis://127.0.0.1:{first}/{db}?sentinel_master={MASTER}&sentinels={more}{extra}"

    def sentinel(self, i: int = 0) -> redis_lib.Redis:
        return redis_lib.Redis(port=self.sentinel_ports[i], socket_timeout=2, decode_responses=True)

    def primary_port(self, *, every: bool = False) -> int:
        """The primary's port as a majority of sentinels name it now (``every``: all of them)."""
        named = []
        for i in range(len(self.sentinel_ports)):
            try:
                named.append(int(self.sentinel(i).sentinel_get_master_addr_by_name(MASTER)[1]))
            except (redis_lib.exceptions.RedisError, TypeError):
                continue
        need = len(self.sentinel_ports) if every else self.quorum
        for port in named:
            if named.count(port) >= need:
                return next((s.port for s in self.servers if self.address(s) == port), port)
        raise RuntimeError(f"the sentinels do not agree on a primary: {named}")

    def _all_name(self, port: int) -> bool:
        try:
            return self.primary_port(every=True) == port
        except RuntimeError:
            return False

    def server(self, port: int) -> EmbeddedRedis:
        return next(s for s in self.servers if s.port == port)

    def address(self, server: EmbeddedRedis) -> int:
        """The port everybody reaches ``server`` at: its proxy's when proxied, else its own."""
        if not self.proxies:
            return server.port
        return self.proxies[self.servers.index(server)].port

    # -- starting and stopping -------------------------------------------------------------------
    def start(self) -> EmbeddedSentinelGroup:
        primary, *replicas = self.servers
        for proxy in self.proxies:
            proxy.__enter__()
        primary.start()
        for replica in replicas:
            replica.extra_args += ["--replicaof", "127.0.0.1", str(self.address(primary))]
            replica.start()
        for server, proxy in zip(self.servers, self.proxies, strict=False):
            if proxy.target[1] != server.port:  # the server moved to another free port
                proxy.retarget("127.0.0.1", server.port)
        for i, port in enumerate(self.sentinel_ports):
            folder = self.data_dir / f"sentinel-{i}"
            folder.mkdir(parents=True, exist_ok=True)
            conf = folder / "sentinel.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {folder}\nlogfile {folder / 'sentinel.log'}\n"
                f"sentinel monitor {MASTER} 127.0.0.1 {self.address(primary)} {self.quorum}\n"
                f"sentinel down-after-milliseconds {MASTER} {DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {MASTER} 4000\n"
                f"sentinel parallel-syncs {MASTER} 2\n"
            )
            self._sentinels.append(
                subprocess.Popen(
                    [find_redis_server(), str(conf), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                )
            )
        self._wait(lambda: self._replicas_seen() >= len(replicas), "the sentinels to see every replica")
        self._wait(lambda: self._peers_seen() >= len(self.sentinel_ports) - 1, "the sentinels to see each other")
        self._wait(lambda: self._new_primary(0), "the primary to take writes (its replicas in sync)")
        return self

    def _peers_seen(self) -> int:
        try:
            return min(len(self.sentinel(i).sentinel_sentinels(MASTER)) for i in range(len(self.sentinel_ports)))
        except redis_lib.exceptions.RedisError:
            return 0

    def _replicas_seen(self) -> int:
        """Replicas every sentinel sees up and linked (what ``discover_slaves`` hands a client)."""
        try:
            return min(
                sum(1 for r in self.sentinel(i).sentinel_slaves(MASTER) if _healthy(r))
                for i in range(len(self.sentinel_ports))
            )
        except redis_lib.exceptions.RedisError:
            return 0

    def stop(self) -> None:
        for proc in self._sentinels:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self._sentinels = []
        for server in self.servers:
            if server.process is not None and server.process.poll() is None:
                os.kill(server.process.pid, signal.SIGCONT)  # a paused one cannot terminate
            server.stop()
        for proxy in self.proxies:
            proxy.close()

    def __enter__(self) -> EmbeddedSentinelGroup:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- failing over ----------------------------------------------------------------------------
    def fail_over(self, how: str = "kill", *, timeout: float = 60.0) -> Failover:
        """Lose the primary (``kill``: SIGKILL; ``pause``: SIGSTOP; ``ask``: ``SENTINEL FAILOVER``;
        ``cut``: its proxy blackholes every connection, the server runs on: proxied groups only),
        wait until a majority names another primary that takes writes, then bring the old one back
        (it rejoins as a replica). ``took_s`` runs from the loss to that first accepted write."""
        old = self.primary_port()
        server = self.server(old)
        assert server.process is not None
        started = time.monotonic()
        if how == "kill":
            server.crash()
        elif how == "pause":
            os.kill(server.process.pid, signal.SIGSTOP)
        elif how == "ask":
            self._wait(self._ask, "the sentinels to take a failover request (INPROG: one still ends)", timeout)
        elif how == "cut" and self.proxies:
            self.proxies[self.servers.index(server)].set_mode("blackhole")
        else:
            raise ValueError(f"how must be kill, pause, ask or (proxied) cut; got {how!r}")
        new = self._wait(lambda: self._new_primary(old), "a new primary that takes writes", timeout)
        took = time.monotonic() - started
        # The old server back as a replica of the new primary: what the sentinels would make of
        # it within their 10 s INFO period, done at once so a trial fails over every few seconds.
        new_address = self.address(self.server(new))
        if how == "kill":
            server.extra_args = [*_without_replicaof(server.extra_args), "--replicaof", "127.0.0.1", str(new_address)]
            server.start()
        else:
            if how == "pause":
                os.kill(server.process.pid, signal.SIGCONT)
            elif how == "cut":  # what it held goes on: a command sent during the cut reaches the old primary now
                self.proxies[self.servers.index(server)].heal()
            _replicate(old, new_address)
        self._wait(lambda: self._replica_of(old, new), f"the old primary {old} to follow {new}", timeout)
        self._wait(lambda: self._replicas_seen() >= len(self.servers) - 1, "the sentinels to see every replica")
        # A client asks the first sentinel that answers: one that still names the old server (now
        # a replica) sends its reads there until a write meets READONLY. Give the laggards a while
        # (under load one took more than a minute); clients cope with them as in production.
        with contextlib.suppress(TimeoutError):
            self._wait(lambda: self._all_name(new), f"every sentinel to name {new}", SETTLE_S)
        return Failover(how, old, new, took)

    def _ask(self) -> bool:
        try:
            self.sentinel().execute_command("SENTINEL", "FAILOVER", MASTER)
            return True
        except redis_lib.exceptions.ResponseError as exc:
            if "INPROG" not in str(exc):
                raise
            return False

    def _new_primary(self, old: int) -> int | None:
        try:
            port = self.primary_port()
        except RuntimeError:
            return None
        if port == old:
            return None
        client = redis_lib.Redis(port=port, socket_timeout=1)
        try:
            client.set("jrs-testbench:failover-probe", "1")
            return port
        except redis_lib.exceptions.RedisError:
            return None
        finally:
            client.close()

    def _replica_of(self, port: int, primary: int) -> bool:
        client = redis_lib.Redis(port=port, socket_timeout=1, decode_responses=True)
        try:
            info = client.info("replication")
            return (
                info.get("role") == "slave"
                and int(info.get("master_port", 0)) == self.address(self.server(primary))
                and (info.get("master_link_status") == "up")
            )
        except redis_lib.exceptions.RedisError:
            return False
        finally:
            client.close()

    @staticmethod
    def _wait(check, what: str, timeout: float = 60.0):  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = check()
            if found:
                return found
            time.sleep(0.05)
        raise TimeoutError(f"gave up after {timeout:.0f} s waiting for {what}")


def _without_replicaof(args: list[str]) -> list[str]:
    if "--replicaof" not in args:
        return args
    at = args.index("--replicaof")
    return args[:at] + args[at + 3 :]


def _replicate(port: int, primary: int) -> None:
    client = redis_lib.Redis(port=port, socket_timeout=2)
    try:
        for _ in range(50):
            try:
                client.replicaof("127.0.0.1", primary)
                return
            except redis_lib.exceptions.BusyLoadingError:
                time.sleep(0.1)
    finally:
        client.close()


def _healthy(replica: dict) -> bool:  # type: ignore[type-arg]
    flags = str(replica.get("flags", ""))
    return not any(f in flags for f in ("s_down", "o_down", "disconnected")) and (
        replica.get("master-link-status") in (None, "ok")
    )
