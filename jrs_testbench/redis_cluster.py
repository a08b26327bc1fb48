"""A real local Redis Cluster: three primaries and three replicas, built by ``redis-cli --cluster create``.

Each node is an :class:`~jrs_testbench.redis_server.EmbeddedRedis` in cluster mode (append-only,
``appendfsync always``, loopback only) with its own data folder, so a node can be killed and
restarted like a lost machine. Used by the Redis Cluster variant of the store contract suite,
the lease and trigger tests, and the failover test.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import redis as redis_lib

from jrs_testbench.helpers import free_port
from jrs_testbench.redis_server import EmbeddedRedis, PortTaken, find_redis_cli

#: Small on purpose: a failover is noticed within about this long (ms).
NODE_TIMEOUT_MS = 2000


def _cluster_port(taken: set[int] | None = None) -> int:
    """A free port whose cluster bus port (+10,000) is free too; Redis wants it at most 55,535.

    ``taken`` holds the ports of this cluster's other nodes: none of them may be our port or
    our bus port, nor may ours be theirs plus 10,000. Every port is free while the nodes are
    only being planned, so without this a node's bus port can be another node's client port
    (CI saw exactly that: the second node found its port served by the first).
    """
    taken = taken or set()
    clashes = taken | {p + 10000 for p in taken} | {p - 10000 for p in taken}
    for _ in range(200):
        port = free_port()
        if port > 55535 or port in clashes or port + 10000 in clashes:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair (port, port + 10000) below 55,535 found")


class EmbeddedRedisCluster:
    """``primaries`` primaries with ``replicas`` replicas each, all on 127.0.0.1."""

    def __init__(self, data_dir: str | os.PathLike[str], *, primaries: int = 3, replicas: int = 1) -> None:
        self.data_dir = Path(data_dir)
        ports: set[int] = set()
        for _ in range(primaries * (1 + replicas)):
            ports.add(_cluster_port(ports))
        self.nodes = [
            EmbeddedRedis(
                self.data_dir / f"node-{i}",
                port=port,
                extra_args=[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    str(NODE_TIMEOUT_MS),
                    "--cluster-require-full-coverage",
                    "no",
                    # A replica syncs at once (the default waits 5 s for more replicas to share the
                    # transfer); and a primary pings its replicas every second, not every 10 s: until
                    # a replica's offset moves past 0, CLUSTER SLOTS leaves it out (Redis 7), and
                    # wait_until_ok waits for every range's replicas there. 11 s to start became 4.
                    "--repl-diskless-sync-delay",
                    "0",
                    "--repl-ping-replica-period",
                    "1",
                ],
            )
            for i, port in enumerate(sorted(ports))
        ]
        self.replicas = replicas

    @property
    def url(self) -> str:
        """A URL of one node; the connection's ``cluster=true`` makes the client discover the rest."""
        return f"redis://127.0.0.1:{self.nodes[0].port}/0"

    def client(self, **kwargs: Any) -> redis_lib.RedisCluster:
        """A cluster client that starts from a live node (any of them knows the rest)."""
        live = next(n for n in self.nodes if n.process is not None)
        return redis_lib.RedisCluster(host="127.0.0.1", port=live.port, **kwargs)

    def start(self, timeout: float = 60.0) -> EmbeddedRedisCluster:
        try:
            for node in self.nodes:
                self._start_node(node)
            addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
            subprocess.run(
                [find_redis_cli(), "--cluster", "create", *addresses, "--cluster-replicas", str(self.replicas),
                 "--cluster-yes"],
                check=True, capture_output=True, text=True, timeout=timeout,
            )  # fmt: skip
            self.wait_until_ok(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_node(self, node: EmbeddedRedis) -> None:
        """Start a node that is not in the cluster yet; another process may have taken its port
        since it was planned, so it moves to a fresh pair (nothing knows its address yet)."""
        for attempt in range(3):
            try:
                node.start()
                return
            except PortTaken:
                if attempt == 2:
                    raise
                node.port = _cluster_port({n.port for n in self.nodes if n is not node})

    def wait_until_ok(self, timeout: float = 60.0, *, replicas: int | None = None) -> None:
        """Until every live node reports ``cluster_state:ok``, all 16,384 slots are served, and
        each slot range has its replicas attached and in sync (a failover needs them)."""
        want = self.replicas if replicas is None else replicas
        deadline = time.monotonic() + timeout
        while True:
            states = []
            for node in self.nodes:
                if node.process is None:
                    continue
                try:
                    client = redis_lib.Redis(port=node.port, socket_timeout=2)
                    info = client.cluster("info")
                    ranges = client.execute_command("CLUSTER", "SLOTS")
                    replication = client.info("replication")
                    client.close()
                    states.append(
                        info.get("cluster_state") == "ok"
                        and int(info["cluster_slots_ok"]) == 16384
                        and all(len(r) - 2 >= 1 + want for r in ranges)
                        and replication.get("master_link_status", "up") == "up"
                    )
                except redis_lib.exceptions.RedisError:
                    states.append(False)
            if states and all(states):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"Redis Cluster not ok after {timeout}s: {states}")
            time.sleep(0.2)

    def primary_for(self, key: str) -> EmbeddedRedis:
        """The node that serves ``key``'s slot as primary now."""
        client = self.client()
        try:
            node = client.get_node_from_key(key)
            return next(n for n in self.nodes if n.port == node.port)
        finally:
            client.close()

    def slots(self) -> list[Any]:
        """``CLUSTER SLOTS`` as a live node sees it (for failure messages)."""
        live = next(n for n in self.nodes if n.process is not None)
        client = redis_lib.Redis(port=live.port, socket_timeout=2)
        try:
            return list(client.execute_command("CLUSTER", "SLOTS"))
        finally:
            client.close()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> EmbeddedRedisCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def one_node_cluster(data_dir: str | os.PathLike[str]) -> EmbeddedRedis:
    """A cluster of one primary holding every slot: the cheapest cluster a client can discover."""
    node = EmbeddedRedis(
        data_dir,
        port=_cluster_port(),
        extra_args=["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"],
    ).start()
    client = redis_lib.Redis(port=node.port)
    try:
        client.execute_command("CLUSTER", "ADDSLOTS", *range(16384))  # ADDSLOTSRANGE needs Redis 7
        deadline = time.monotonic() + 30
        while client.cluster("info").get("cluster_state") != "ok":
            if time.monotonic() > deadline:
                node.stop()
                raise RuntimeError("one-node cluster never became ok")
            time.sleep(0.05)
    finally:
        client.close()
    return node
