"""Every redis-py client of the product gets the same ``[jrs]`` timeouts and retry policy here.

A hook, the CLI, the supervisor and the Airflow-free protocol (:mod:`airflow_jrs.protocol`) all
talk to one store: a wait on Redis must be bounded the same way wherever the client was built,
or a lease renewal in one process could wait longer than the lease lives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import redis as redis_lib
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

if TYPE_CHECKING:
    from airflow_jrs.config import JrsSettings


def client_retry(settings: JrsSettings) -> Retry:
    """The retry policy of the sync client: ``retries`` times, backoff doubling from
    ``retry_backoff`` up to ``retry_backoff_max``, on lost connections and timeouts only."""
    return Retry(
        ExponentialBackoff(cap=settings.retry_backoff_max, base=settings.retry_backoff),
        settings.retries,
        supported_errors=(redis_lib.exceptions.ConnectionError, redis_lib.exceptions.TimeoutError, TimeoutError),
    )


def apply_client_policy(client: Any, settings: JrsSettings) -> None:
    """Set the ``[jrs]`` timeouts and retry policy on a fresh redis-py client (no connection yet
    is affected: it only changes how the next connections are made and commands retried)."""
    timeouts = {"socket_connect_timeout": settings.connect_timeout, "socket_timeout": settings.read_timeout}
    retry = client_retry(settings)
    if isinstance(client, redis_lib.RedisCluster):
        client.nodes_manager.connection_kwargs.update(timeouts)
        client.set_retry(retry)
        return
    client.connection_pool.connection_kwargs.update(timeouts)
    client.set_retry(retry)


def client_from_url(url: str, settings: JrsSettings) -> redis_lib.Redis:
    """A client for ``url`` (``redis://`` or ``rediss://``) with the settings' timeouts and retries:
    for code that runs without Airflow's connections (the protocol's trials, scripts)."""
    client = redis_lib.Redis.from_url(url)
    apply_client_policy(client, settings)
    return client
