"""What the Redis server behind a store promises: version, persistence, eviction, latency.

The store's guarantees rest on server settings it cannot enforce. Fencing needs every
acknowledged ``INCR`` of a fence counter on disk before the reply (``appendonly yes`` with
``appendfsync always``): with ``everysec`` a crash can lose the last second and hand out a
token a live holder already has. Results must never be evicted (``maxmemory-policy
noeviction``): an evicted result makes its job run again. ``airflow-jrs doctor`` reads these
facts here so that nothing outside the store sends raw commands.

``CONFIG GET`` is often refused (an ACL user without ``+config``, managed services that rename
it); ``INFO`` then still tells ``aof_enabled`` and ``maxmemory_policy``, and what stays
unknown is ``None``.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import redis as redis_lib

from airflow_jrs.store.redis.errors import redis_errors
from airflow_jrs.store.redis.keys import PREFIX, KeySpace
from airflow_jrs.store.redis.replies import as_str
from airflow_jrs.store.server_facts import Namespaces, ServerFacts


def _config(client: redis_lib.Redis, name: str) -> str | None:
    reply: Any = client.config_get(name)
    if isinstance(reply, dict) and reply:
        # A cluster client may answer per node: {node: {name: value}}.
        value = next(iter(reply.values())) if name not in reply else reply[name]
        if isinstance(value, dict):
            value = value.get(name)
        return as_str(value) if value is not None else None
    return None


def read_server_facts(client: redis_lib.Redis, namespace: str) -> ServerFacts:
    """Read the facts; raises :class:`StoreUnavailableError` only when ``INFO`` fails too."""
    with redis_errors("read the server's INFO", namespace):
        info: dict[str, Any] = {}
        for section in ("server", "persistence", "memory"):
            reply: Any = client.info(section)
            if reply and all(isinstance(v, dict) for v in reply.values()):
                reply = next(iter(reply.values()))  # a cluster client: one node's answer
            info.update(reply or {})
    appendonly = appendfsync = policy = None
    readable = True
    try:
        appendonly = _config(client, "appendonly")
        appendfsync = _config(client, "appendfsync")
        policy = _config(client, "maxmemory-policy")
    except (redis_lib.exceptions.ResponseError, redis_lib.exceptions.NoPermissionError):
        readable = False
    if appendonly is None and "aof_enabled" in info:
        appendonly = "yes" if int(info["aof_enabled"]) else "no"
    if policy is None and info.get("maxmemory_policy") is not None:
        policy = as_str(info["maxmemory_policy"])
    return ServerFacts(
        version=as_str(info["redis_version"]) if info.get("redis_version") is not None else None,
        mode=as_str(info["redis_mode"]) if info.get("redis_mode") is not None else None,
        appendonly=appendonly,
        appendfsync=appendfsync,
        maxmemory_policy=policy,
        config_readable=readable,
    )


def ping_latency(client: redis_lib.Redis, namespace: str, count: int = 5) -> float:
    """Median seconds of ``count`` PINGs: one slow reply (a fork for the AOF rewrite) is not the norm."""
    took = []
    for _ in range(max(1, count)):
        started = time.perf_counter()
        with redis_errors("answer PING", namespace):
            client.ping()
        took.append(time.perf_counter() - started)
    return statistics.median(took)


#: How many keys a namespace listing reads at most: it answers a person's typo, it must not
#: walk a server holding millions of entries.
NAMESPACE_SCAN_KEYS = 10_000


def namespace_has_keys(client: redis_lib.Redis, namespace: str) -> bool:
    """Does ``namespace`` hold anything? Its counters and indexes say so in one round trip: a
    namespace that ever took a lease has its fence counter, one with results its index."""
    keys = KeySpace(namespace)
    with redis_errors("look for the namespace's keys", namespace):
        return bool(client.exists(keys.fence_counter, keys.index, keys.dirty, keys.unsuccessful, keys.quarantined))


def find_namespaces(client: redis_lib.Redis, namespace: str, max_keys: int = NAMESPACE_SCAN_KEYS) -> Namespaces:
    """Namespaces with keys on this server (``jrs:{<namespace>}:...``), from a SCAN of at most
    ``max_keys`` keys (never KEYS: it would block the server). ``namespace`` only names the
    caller's namespace in an error."""
    found: set[str] = set()
    seen = 0
    prefix = f"{PREFIX}:{{"
    with redis_errors("list the namespaces on the server", namespace):
        for key in client.scan_iter(match=f"{prefix}*}}:*", count=1000):
            seen += 1
            name = as_str(key)[len(prefix) :].split("}:", 1)[0]
            if name:
                found.add(name)
            if seen >= max_keys:
                return Namespaces(sorted(found), complete=False)
    return Namespaces(sorted(found), complete=True)
