"""The Redis of a fault trial on a Redis Cluster: real failovers of the namespace's primary.

Three primaries with one replica each (:class:`jrs_testbench.redis_cluster.EmbeddedRedisCluster`);
every host reaches the store by the connection's ``cluster=true`` spelling and follows the slot
map itself. A failover SIGKILLs (or SIGSTOPs) the primary that serves the run's namespace,
waits until its replica serves the slot and takes a write, then brings the old node back (it
rejoins as a replica of the promoted one, from its own ``nodes.conf``).

``lossy`` as in :mod:`.sentinel_front`: only a run whose ``durability`` lets a failover lose
acknowledged writes opens the checker's excusing window.
"""

from __future__ import annotations

import itertools
import os
import signal
import time
from pathlib import Path
from types import TracebackType

import redis as redis_lib

from airflow_jrs.store.redis.keys import KeySpace
from jrs_testbench.redis_cluster import EmbeddedRedisCluster
from jrs_testbench.redis_sentinel import Failover as NamedFailover
from jrs_testbench.trials.redis_front import Failover

HOWS = ("kill", "pause")


class ClusterFront:
    """A Redis Cluster for one run; :attr:`namespace` (set by the runner) says whose slot fails over."""

    def __init__(self, data_dir: str | Path, *, lossy: bool, hows: tuple[str, ...] = HOWS) -> None:
        self.cluster = EmbeddedRedisCluster(data_dir, primaries=3, replicas=1)
        self.lossy = lossy
        self.namespace = ""
        self._hows = itertools.cycle(hows)
        self.failovers: list[NamedFailover] = []

    def __enter__(self) -> ClusterFront:
        self.cluster.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        for node in self.cluster.nodes:
            if node.process is not None and node.process.poll() is None:
                os.kill(node.process.pid, signal.SIGCONT)
        self.cluster.stop()

    def url_for(self, host: str) -> str:
        return f"{self.cluster.url}?cluster=true"

    @property
    def primary_url(self) -> str:
        return self.url_for("check")

    def failover(self, timeout: float = 60.0) -> Failover:
        how = next(self._hows)
        key = KeySpace(self.namespace or "trials").dirty
        old = self.cluster.primary_for(key)
        assert old.process is not None
        started = time.monotonic()
        if how == "kill":
            old.crash()
        else:
            os.kill(old.process.pid, signal.SIGSTOP)
        deadline = time.monotonic() + timeout
        while not self._served_elsewhere(key, old.port):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no replica took over the slot of {key} within {timeout:.0f} s")
            time.sleep(0.05)
        took = time.monotonic() - started
        new = self.cluster.primary_for(key)
        if how == "kill":
            old.start()
        else:
            os.kill(old.process.pid, signal.SIGCONT)
        self.cluster.wait_until_ok(timeout)
        self.failovers.append(NamedFailover(how, old.port, new.port, took))
        return Failover(took_s=took, lost_bytes=0, new_primary_port=new.port)

    def _served_elsewhere(self, key: str, old_port: int) -> bool:
        try:
            client = self.cluster.client(socket_timeout=1, socket_connect_timeout=1)
        except (redis_lib.exceptions.RedisError, StopIteration):
            return False
        try:
            if client.get_node_from_key(key).port == old_port:
                return False
            client.set(f"{key}:failover-probe", "1")  # the namespace's slot takes a write
            return True
        except redis_lib.exceptions.RedisError:
            return False
        finally:
            client.close()

    def hold_replication(self) -> None:
        """Nothing to hold: a cluster failover loses what replication had not carried yet."""

    def add_replica(self) -> None:
        """The old primary rejoined as a replica in :meth:`failover`."""

    def heal(self, host: str | None = None) -> None:
        """No proxy to heal."""
