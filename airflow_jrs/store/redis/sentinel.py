"""A store behind Redis Sentinel: one spelling of where it is, and the clients that follow it.

Teams that run one Redis with automatic failover run it under Sentinel: a few sentinel
processes watch the primary, promote a replica when it is lost and tell clients the new address.
A client asks a sentinel for the primary each time it connects, so a failover is followed
without restarting anything (redis-py's ``Sentinel.master_for``; a connection to the old
primary, demoted to a replica, turns its ``READONLY`` answers into a lost connection and
reconnects to the new one).

**The one spelling** (a connection, ``--redis-url`` and the docs alike): the address is one
sentinel, the extras name the rest::

    redis://:PRIMARY_PASSWORD@sentinel-1:26379/0?sentinel_master=mymaster
        &sentinels=sentinel-2:26379,sentinel-3:26379&namespace=prod

* ``sentinel_master``: the name the sentinels monitor the primary under (their
  ``sentinel monitor <name> ...``); it is what turns Sentinel on;
* ``sentinels``: more sentinels, ``host:port`` comma-separated (any one answering is enough;
  give them all so a lost sentinel is not a lost store);
* the URL's user, password, database and TLS (``rediss://``, ``ssl*``) are the **primary's**;
* ``sentinel_username``/``sentinel_password``: the sentinels' own ACL user and password (a
  sentinel's ``requirepass``; none by default: sentinels rarely have one);
* ``sentinel_ssl``: TLS to the sentinels (default: the same as to the primary), with the same
  ``ssl_*`` files.

A process that rebuilds the client (a trigger, the supervisor) gets the same as plain JSON kwargs
(:data:`SENTINEL_KEYS`; ``sentinels`` as ``[[host, port], ...]``), from :func:`sentinel_connection`.

Store-only: redis-py and the standard library.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import redis as redis_lib
import redis.sentinel as sync_sentinel

from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.store.server_facts import FailoverFacts

#: Connection kwargs of a Sentinel-managed store, beside the primary's own (db, user, TLS).
SENTINEL_KEYS = frozenset({"sentinel_master", "sentinels", "sentinel_username", "sentinel_password", "sentinel_ssl"})
#: The port a sentinel listens on unless told otherwise.
SENTINEL_PORT = 26379
_SSL_FILES = ("ssl_keyfile", "ssl_certfile", "ssl_cert_reqs", "ssl_ca_certs", "ssl_ca_path", "ssl_check_hostname")


def is_sentinel(connection: Mapping[str, Any]) -> bool:
    """Does ``connection`` (kwargs or a connection's extras) name a Sentinel-managed primary?"""
    return bool(connection.get("sentinel_master"))


def parse_sentinels(value: Any, where: str = "sentinels") -> list[tuple[str, int]]:
    """``host:port`` comma-separated (a URL or an extra) or ``[[host, port], ...]`` (JSON) as
    addresses; a missing port is :data:`SENTINEL_PORT`."""
    if value in (None, ""):
        return []
    items: Sequence[Any] = value.split(",") if isinstance(value, str) else value
    found = []
    for item in items:
        try:
            if isinstance(item, str):
                host, _, port = item.strip().rpartition(":") if ":" in item else (item.strip(), "", "")
                found.append((host, int(port) if port else SENTINEL_PORT))
            else:
                host, port = item
                found.append((str(host), int(port)))
        except (TypeError, ValueError):
            raise JrsConfigError(
                f"{where}: {item!r} is not a sentinel address; use host:port, comma-separated, e.g. "
                "sentinels=sentinel-2:26379,sentinel-3:26379"
            ) from None
        if not found[-1][0]:
            raise JrsConfigError(f"{where}: {item!r} has no host; use host:port, e.g. sentinel-2:26379")
    return found


def sentinel_parts(
    connection: Mapping[str, Any], options: Mapping[str, Any]
) -> tuple[list[tuple[str, int]], str, dict, dict]:
    """The sentinels' addresses, the primary's name, the sentinels' kwargs and the primary's
    (``options``, the client policy, go to both): what :mod:`.clients` builds a client from."""
    kwargs = dict(connection)
    master = str(kwargs.pop("sentinel_master"))
    first = (str(kwargs.pop("host", "localhost")), int(kwargs.pop("port", None) or SENTINEL_PORT))
    addresses = [first, *(a for a in parse_sentinels(kwargs.pop("sentinels", None)) if a != first)]
    ssl = bool(kwargs.get("ssl", False))
    sentinel_ssl = kwargs.pop("sentinel_ssl", None)
    sentinel_ssl = ssl if sentinel_ssl is None else bool(sentinel_ssl)
    sentinel: dict[str, Any] = {
        k: options[k] for k in ("socket_timeout", "socket_connect_timeout") if options.get(k) is not None
    }
    for name in ("username", "password"):
        value = kwargs.pop(f"sentinel_{name}", None)
        if value is not None:
            sentinel[name] = value
    if sentinel_ssl:
        sentinel["ssl"] = True
        sentinel.update({k: kwargs[k] for k in _SSL_FILES if kwargs.get(k) is not None})
    kwargs.pop("cluster", None)
    return addresses, master, sentinel, {**kwargs, **options}


def sentinel_pool(client: Any) -> sync_sentinel.SentinelConnectionPool | None:
    """``client``'s pool when it follows a Sentinel-managed primary, else ``None``."""
    pool = getattr(client, "connection_pool", None)
    return pool if isinstance(pool, sync_sentinel.SentinelConnectionPool) else None


def sentinel_connection(pool: sync_sentinel.SentinelConnectionPool) -> dict[str, Any]:
    """The plain kwargs (:data:`SENTINEL_KEYS` and the primary's) that rebuild a client of the
    same primary through the same sentinels, in another process."""
    manager = pool.sentinel_manager
    addresses = [
        [s.connection_pool.connection_kwargs["host"], s.connection_pool.connection_kwargs["port"]]
        for s in manager.sentinels
    ]
    given = pool.connection_kwargs
    kwargs: dict[str, Any] = {"host": addresses[0][0], "port": addresses[0][1], "sentinel_master": pool.service_name}
    if len(addresses) > 1:
        kwargs["sentinels"] = addresses[1:]
    kwargs.update({k: given[k] for k in ("db", "username", "password") if given.get(k) is not None})
    if issubclass(pool.connection_class, redis_lib.SSLConnection):
        kwargs["ssl"] = True
        kwargs.update({k: given[k] for k in (*_SSL_FILES, "ssl_password") if given.get(k) is not None})
    own = manager.sentinel_kwargs
    kwargs.update({f"sentinel_{k}": own[k] for k in ("username", "password") if own.get(k) is not None})
    if bool(own.get("ssl")) != bool(kwargs.get("ssl")):
        kwargs["sentinel_ssl"] = bool(own.get("ssl"))
    return kwargs


def failover_facts(client: Any) -> FailoverFacts | None:
    """:class:`FailoverFacts` of ``client``'s store, or ``None`` when it is not Sentinel-managed.

    ``min-replicas-to-write`` and ``min-replicas-max-lag``: a primary cut off from its replicas
    refuses writes after the lag, which bounds how long a holder cut off with it keeps renewing
    a lease the new primary let expire."""
    pool = sentinel_pool(client)
    if pool is None:
        return None
    manager = pool.sentinel_manager
    primary = manager.discover_master(pool.service_name)
    replicas = manager.discover_slaves(pool.service_name)
    guard: list[int | None] = []
    for name in ("min-replicas-to-write", "min-replicas-max-lag"):
        try:
            reply = client.config_get(name)
            value = reply.get(name) if isinstance(reply, dict) else None
            guard.append(int(value) if value is not None else None)
        except (redis_lib.exceptions.ResponseError, ValueError):
            guard.append(None)
    return FailoverFacts(primary, replicas, guard[0], guard[1])
