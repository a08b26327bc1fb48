"""Every redis-py client of the product is built here, with one timeout and retry policy.

A hook, the CLI, the triggerer, the supervisor and the Airflow-free protocol
(:mod:`airflow_jrs.protocol`) all talk to one store: a wait on Redis must be bounded the same way
wherever the client was built, or a lease renewal in one process could wait longer than the
lease lives. Copies of that policy at each call site drifted; the project's architecture test
now checks that no module outside this one constructs a redis-py client or pool.

A client that must be rebuilt in another process (a trigger, the supervisor beside
spark-submit) travels as a *connection*: plain JSON kwargs (:data:`CONNECTION_KEYS`), taken
from a live client by :func:`connection_of` and turned back into one by :func:`sync_client`
or :func:`async_client`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, parse_qs, urlencode, urlsplit, urlunsplit

import redis as redis_lib
import redis.asyncio as aioredis
import redis.asyncio.sentinel as aio_sentinel
import redis.sentinel as sync_sentinel
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.retry import Retry

from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.store.redis.sentinel import (
    SENTINEL_KEYS,
    is_sentinel,
    sentinel_connection,
    sentinel_parts,
    sentinel_pool,
)

if TYPE_CHECKING:
    from airflow_jrs.settings import JrsSettings

#: Connection kwargs accepted from plain JSON (what a trigger or the supervisor's environment
#: can carry): no client objects.
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
        "cluster",
    }
    | SENTINEL_KEYS  # a Sentinel-managed primary: :mod:`.sentinel`
)
_SSL_KEYS = sorted(k for k in CONNECTION_KEYS if k.startswith("ssl_"))
#: Connection kwargs a cluster client keeps that belong to that client object, not to its settings.
_CLIENT_BOUND = ("host", "port", "redis_connect_func", "oss_cluster_maint_notifications_handler")


#: Keys of :func:`policy_options` that make the retry policy; every other key is a connection kwarg.
_RETRY_KEYS = ("retries", "retry_backoff", "retry_backoff_max")
_RETRIED_ERRORS = (redis_lib.exceptions.ConnectionError, redis_lib.exceptions.TimeoutError)


def policy_options(settings: JrsSettings) -> dict[str, Any]:
    """The ``[jrs]`` client policy as plain JSON: connection kwargs (socket timeouts) and the
    retry policy as numbers (``retries``, ``retry_backoff``, ``retry_backoff_max``).

    The ONE place a client setting is named: :func:`apply_client_policy` sets it on a sync
    client, :func:`async_policy_client` on an async one, and a trigger carries this dict as one
    serialized value, so a new setting added here reaches every client without touching them.
    """
    return {
        "socket_connect_timeout": settings.connect_timeout,
        "socket_timeout": settings.read_timeout,
        "retries": settings.retries,
        "retry_backoff": settings.retry_backoff,
        "retry_backoff_max": settings.retry_backoff_max,
    }


def _policy_parts(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``options`` split into connection kwargs and the retry numbers (``None``: none given)."""
    kwargs = {k: v for k, v in options.items() if k not in _RETRY_KEYS}
    if not any(k in options for k in _RETRY_KEYS):
        return kwargs, None
    defaults = {"retries": 0, "retry_backoff": 0.0, "retry_backoff_max": 0.0}
    return kwargs, {k: options.get(k, defaults[k]) for k in _RETRY_KEYS}


def _backoff(numbers: Mapping[str, Any]) -> ExponentialBackoff:
    return ExponentialBackoff(cap=float(numbers["retry_backoff_max"]), base=float(numbers["retry_backoff"]))


def client_retry(settings: JrsSettings) -> Retry:
    """The retry policy of the sync client: ``retries`` times, backoff doubling from
    ``retry_backoff`` up to ``retry_backoff_max``, on lost connections and timeouts only."""
    return _sync_retry(policy_options(settings))


def _sync_retry(numbers: Mapping[str, Any]) -> Retry:
    return Retry(_backoff(numbers), int(numbers["retries"]), supported_errors=(*_RETRIED_ERRORS, TimeoutError))


def _given_kwargs(client: Any) -> dict[str, Any]:
    """The connection kwargs ``client`` makes its connections with (the live dict, not a copy).

    A ``Redis`` keeps them on its pool; a ``RedisCluster`` has no pool of its own and keeps them
    on its nodes manager, which builds each node's client from them. Reading a cluster client's
    pool instead finds nothing, and every check of a timeout against it passes unseen."""
    if isinstance(client, redis_lib.RedisCluster):
        return client.nodes_manager.connection_kwargs
    return client.connection_pool.connection_kwargs


def read_timeout(client: Any) -> float | None:
    """Seconds ``client`` waits for a reply (``socket_timeout``; ``None``: no limit): what a
    durable write's wait must stay below, or redis-py gives up on the reply first and sends the
    script again (:mod:`airflow_jrs.store.redis.durability`)."""
    timeout = _given_kwargs(client).get("socket_timeout")
    return float(timeout) if timeout is not None else None


def apply_client_policy(client: Any, settings: JrsSettings) -> None:
    """Set the ``[jrs]`` client policy (:func:`policy_options`) on a fresh redis-py client (no
    connection yet is affected: it only changes how the next connections are made and commands
    retried)."""
    kwargs, numbers = _policy_parts(policy_options(settings))
    _given_kwargs(client).update(kwargs)
    if numbers is not None:
        client.set_retry(_sync_retry(numbers))


def client_from_url(url: str, settings: JrsSettings | None = None) -> redis_lib.Redis:
    """A client for ``url`` (``redis://`` or ``rediss://``) with the settings' timeouts and retries
    (redis-py's own defaults without settings): for code that runs without Airflow's connections
    (the protocol's trials, scripts, a store built from a URL). A URL with ``sentinel_master``
    names a Sentinel-managed primary (:mod:`.sentinel`), one with ``cluster=true`` a node of a
    Redis Cluster: the same spelling as the jrs connection's extras."""
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    if "sentinel_master" in query or "cluster" in query:
        return _topology_from_url(parts, query, settings)
    client = redis_lib.Redis.from_url(url)
    if settings is not None:
        apply_client_policy(client, settings)
    return client


#: A URL's query keys that say which topology it names (redis-py's own parser knows none).
_TOPOLOGY_KEYS = SENTINEL_KEYS | {"cluster"}


def _topology_from_url(parts: SplitResult, query: dict[str, list[str]], settings: JrsSettings | None) -> Any:
    own: dict[str, Any] = {k: v[-1] for k, v in query.items() if k in _TOPOLOGY_KEYS}
    rest = urlencode([(k, v) for k, values in query.items() if k not in _TOPOLOGY_KEYS for v in values])
    given = redis_lib.connection.parse_url(urlunsplit(parts._replace(query=rest)))
    connection_class = given.pop("connection_class", None)
    if isinstance(connection_class, type) and issubclass(connection_class, redis_lib.SSLConnection):
        given["ssl"] = True
    for flag in ("sentinel_ssl", "cluster"):
        if flag in own:
            own[flag] = own[flag].strip().lower() in ("1", "true", "yes", "on")
    connection = {**given, **own}
    return policy_client(connection, settings) if settings is not None else sync_client(connection)


def connection_of(client: Any, conn: str) -> dict[str, Any]:
    """The plain kwargs (:data:`CONNECTION_KEYS`) that reach the same server with the same
    credentials and TLS as ``client``; a Redis Cluster client gives one of its nodes and
    ``cluster: true``; a Sentinel-managed one its sentinels and primary's name. ``conn`` names
    the connection in the error a Unix socket raises (another process needs host and port)."""
    pool = sentinel_pool(client)
    if pool is not None:
        return sentinel_connection(pool)
    if isinstance(client, redis_lib.RedisCluster):
        node = client.get_default_node()
        given = client.nodes_manager.connection_kwargs
        kwargs: dict[str, Any] = {"host": node.host, "port": node.port, "cluster": True}
        kwargs.update({k: given[k] for k in ("username", "password") if given.get(k) is not None})
        connection_class = given.get("connection_class")
        if given.get("ssl") or (
            isinstance(connection_class, type) and issubclass(connection_class, redis_lib.SSLConnection)
        ):
            kwargs["ssl"] = True
            kwargs.update({k: given[k] for k in _SSL_KEYS if given.get(k) is not None})
        return kwargs
    pool = client.connection_pool
    given = pool.connection_kwargs
    if "path" in given:
        raise JrsConfigError(
            f"{conn} uses a Unix socket; a client in another process (a sensor waiting in the "
            "triggerer, the supervisor beside spark-submit) needs host and port. Use a TCP address "
            "(or mode='reschedule' for the sensor)."
        )
    kwargs = {k: given[k] for k in ("host", "port", "db", "username", "password") if given.get(k) is not None}
    if issubclass(pool.connection_class, redis_lib.SSLConnection):
        kwargs["ssl"] = True
        kwargs.update({k: given[k] for k in _SSL_KEYS if given.get(k) is not None})
    return kwargs


def _checked(connection: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    unknown = sorted(set(connection) - CONNECTION_KEYS)
    if unknown:
        raise JrsConfigError(f"connection kwargs {unknown} are not supported; allowed: {sorted(CONNECTION_KEYS)}")
    kwargs = dict(connection)
    cluster = bool(kwargs.pop("cluster", False))
    if cluster and is_sentinel(kwargs):
        raise JrsConfigError(
            "the connection sets both cluster and sentinel_master: a Redis Cluster fails over by itself, "
            "a Sentinel-managed primary is one server; keep the one the store runs on"
        )
    if cluster:
        kwargs.pop("db", None)  # a cluster has database 0 only
    return kwargs, cluster


def sync_client(connection: Mapping[str, Any], **options: Any) -> Any:
    """A redis-py client (``RedisCluster`` with ``cluster: true``) for ``connection``
    (:data:`CONNECTION_KEYS`), with ``options`` (timeouts, retry policy)."""
    kwargs, cluster = _checked(connection)
    if cluster:
        return redis_lib.RedisCluster(**kwargs, **options)
    if is_sentinel(kwargs):
        return sentinel_sync_client(kwargs, **options)
    return redis_lib.Redis(**kwargs, **options)


def policy_client(connection: Mapping[str, Any], settings: JrsSettings) -> Any:
    """A sync client for ``connection`` with the ``[jrs]`` timeouts and retry policy, given when
    it is built: a Sentinel-managed client hands the timeouts to its sentinels' clients then."""
    kwargs, numbers = _policy_parts(policy_options(settings))
    client = sync_client(connection, **kwargs)
    if numbers is not None:
        client.set_retry(_sync_retry(numbers))
    return client


def bounded_client(connection: Mapping[str, Any], timeout: float) -> Any:
    """A sync client whose every socket operation ends within ``timeout`` seconds, with no
    retries of its own: for a caller that retries itself and must get back in time (the
    supervisor's beat loop fences itself before its heartbeat can expire)."""
    return sync_client(connection, socket_timeout=timeout, socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 0))


def async_client(connection: Mapping[str, Any], **options: Any) -> Any:
    """A ``redis.asyncio`` client for ``connection`` (:data:`CONNECTION_KEYS`), with ``options``
    (timeouts, retry policy, ``client_name``)."""
    kwargs, cluster = _checked(connection)
    if cluster:
        return aioredis.RedisCluster(**kwargs, **options)
    if is_sentinel(kwargs):
        return sentinel_async_client(kwargs, **options)
    return aioredis.Redis(**kwargs, **options)


def async_policy_client(connection: Mapping[str, Any], policy: Mapping[str, Any], **overrides: Any) -> Any:
    """A ``redis.asyncio`` client for ``connection`` with the client policy ``policy`` (what
    :func:`policy_options` gave, carried as JSON), then the caller's own ``overrides`` (a
    ``client_name``; a trigger that reconnects itself passes its own ``retry``)."""
    kwargs, numbers = _policy_parts(policy)
    if numbers is not None:
        kwargs["retry"] = AsyncRetry(_backoff(numbers), int(numbers["retries"]), supported_errors=_RETRIED_ERRORS)
    return async_client(connection, **{**kwargs, **overrides})


def fresh_client(client: Any) -> Any:
    """A new client with ``client``'s settings and none of its connections (close it after use):
    for writes from a signal handler, whose interrupted thread may hold a pooled connection."""
    if isinstance(client, redis_lib.RedisCluster):
        node = client.get_default_node()
        kwargs = {k: v for k, v in client.nodes_manager.connection_kwargs.items() if k not in _CLIENT_BOUND}
        return redis_lib.RedisCluster(host=node.host, port=node.port, **kwargs)
    sentinel = sentinel_pool(client)
    if sentinel is not None:
        kwargs = {
            k: v for k, v in sentinel.connection_kwargs.items() if k not in ("connection_pool", "connection_class")
        }
        pool = sync_sentinel.SentinelConnectionPool(
            sentinel.service_name, sentinel.sentinel_manager, connection_class=sentinel.connection_class, **kwargs
        )
        return redis_lib.Redis.from_pool(pool)
    pool = client.connection_pool
    fresh = pool.__class__(connection_class=pool.connection_class, **pool.connection_kwargs)
    return redis_lib.Redis.from_pool(fresh)  # the client owns the pool: close() disconnects it


def sentinel_sync_client(connection: Mapping[str, Any], **options: Any) -> redis_lib.Redis:
    """A ``Redis`` client of the primary the sentinels name now, and after every failover
    (:mod:`.sentinel`)."""
    addresses, master, sentinel, primary = sentinel_parts(connection, options)
    return sync_sentinel.Sentinel(addresses, sentinel_kwargs=sentinel).master_for(master, **primary)


def sentinel_async_client(connection: Mapping[str, Any], **options: Any) -> Any:
    """The ``redis.asyncio`` client of :func:`sentinel_sync_client` (a trigger's)."""
    addresses, master, sentinel, primary = sentinel_parts(connection, options)
    return aio_sentinel.Sentinel(addresses, sentinel_kwargs=sentinel).master_for(master, **primary)
