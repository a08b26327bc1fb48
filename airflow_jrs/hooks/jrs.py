"""JrsHook: resolves the jrs connection and the ``[jrs]`` config once, and builds the store.

Precedence for every setting: operator argument > connection extra > ``[jrs]`` config > default.
Invalid values raise :class:`JrsConfigError`; nothing silently falls back (the Spark hook's
"unknown connection means yarn" is the example not to follow).

The connection is a plain Redis URL, e.g.
``AIRFLOW_CONN_JRS_DEFAULT='redis://:secret@redis:6379/0?namespace=prod&ssl=true'``.
Host, port, login (ACL user), password, TLS (``ssl*`` extras) and cluster mode are handled by
the Redis provider's hook; the database comes from the ``db`` extra or the URL path.
"""

from __future__ import annotations

import json
import os
from typing import Any

import redis as redis_lib
from airflow.providers.common.compat.sdk import BaseHook, conf
from airflow.providers.redis.hooks.redis import RedisHook

from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.observability.metrics import TASK_METRICS
from airflow_jrs.settings import BY_NAME, DEFAULT_CONN_ID, JrsSettings, parse_boolean, resolve
from airflow_jrs.store import AsyncRedisJobResultStore, RedisJobResultStore
from airflow_jrs.store.namespace import JobNamespace
from airflow_jrs.store.redis.clients import (
    apply_client_policy,
    async_policy_client,
    connection_of,
    policy_client,
    policy_options,
)
from airflow_jrs.store.redis.diagnosis import describe_server
from airflow_jrs.store.redis.namespace import RedisJobNamespace
from airflow_jrs.store.redis.sentinel import SENTINEL_KEYS, SENTINEL_PORT, is_sentinel, parse_sentinels

__all__ = ["JrsHook", "JrsSettings", "async_connection_kwargs"]


def _airflow_home() -> str:
    return os.environ.get("AIRFLOW_HOME") or os.path.expanduser("~/airflow")


#: Extras that redis-py takes as booleans. From a URL they arrive as strings, and redis-py
#: would read ``ssl="false"`` as true (a non-empty string): parse them strictly instead.
_BOOLEAN_EXTRAS = ("ssl", "cluster", "ssl_check_hostname", "sentinel_ssl")
#: Extras of a Sentinel-managed primary's connection that reach its client (:mod:`.sentinel`).
_SENTINEL_EXTRAS = (*sorted(SENTINEL_KEYS), "ssl", "ssl_cert_reqs", "ssl_ca_certs", "ssl_ca_path", "ssl_keyfile",
                    "ssl_certfile", "ssl_password", "ssl_check_hostname", "db")  # fmt: skip


class _JrsRedisHook(RedisHook):
    """The Redis provider's hook, plus: the database may come from the URL path (``/0``),
    ``rediss://`` means TLS, and boolean extras given as text are parsed (``ssl=false`` is off)."""

    @classmethod
    def get_connection(cls, conn_id: str) -> Any:
        conn = super().get_connection(conn_id)
        extra = dict(conn.extra_dejson)
        where, db = ("extra db", extra["db"]) if "db" in extra else ("URL path", conn.schema)
        if isinstance(db, str) and db:
            if not db.strip().isdigit():
                raise JrsConfigError(
                    f"connection {conn_id!r}: the {where} {db!r} is not a Redis database number; "
                    "use e.g. redis://host:6379/0 or db=0"
                )
            extra["db"] = int(db)
        if conn.conn_type == "rediss" and "ssl" not in extra:
            extra["ssl"] = True
        for name in _BOOLEAN_EXTRAS:
            if name in extra:
                try:
                    extra[name] = parse_boolean(extra[name])
                except ValueError:
                    raise JrsConfigError(
                        f"connection {conn_id!r}: extra {name}={extra[name]!r} must be true or false; "
                        "fix the connection URL or extra"
                    ) from None
        if extra != conn.extra_dejson:
            conn.extra = json.dumps(extra)
        return conn


def _sentinel_connection(conn: Any) -> dict[str, Any]:
    """A Sentinel-managed primary's connection kwargs from the jrs connection: its address is a
    sentinel's, its login and password the primary's, the rest from the extras."""
    extra = conn.extra_dejson
    password = None if str(conn.password).lower() in ("none", "false", "") else conn.password
    found: dict[str, Any] = {"host": conn.host or "localhost", "port": conn.port or SENTINEL_PORT}
    found.update({k: extra[k] for k in _SENTINEL_EXTRAS if extra.get(k) not in (None, "")})
    found.update({k: v for k, v in (("username", conn.login), ("password", password)) if v})
    found["sentinels"] = parse_sentinels(found.get("sentinels"), f"jrs connection {conn.conn_id!r}: extra sentinels")
    return found


def async_connection_kwargs(client: Any, conn_id: str) -> dict[str, Any]:
    """Plain kwargs equivalent to the sync ``client`` of connection ``conn_id``
    (:func:`~airflow_jrs.store.redis.clients.connection_of`), what a trigger or the supervisor rebuilds
    a client from: only what the jrs connection can set is carried (host, port, db, ACL user,
    password, TLS; ``cluster`` for a Redis Cluster, reached through one of its nodes); a Unix
    socket is refused with what to use instead.
    """
    return connection_of(client, f"jrs connection {conn_id!r}")


class JrsHook(BaseHook):
    """Builds the job result store and job leases from the ``jrs_default`` connection."""

    conn_name_attr = "jrs_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = "jrs"
    hook_name = "Job Result Store (Redis)"

    def __init__(self, jrs_conn_id: str | None = None, **overrides: Any) -> None:
        super().__init__()
        self.jrs_conn_id = jrs_conn_id or conf.get("jrs", "conn_id", fallback=DEFAULT_CONN_ID)
        self._overrides = {k: v for k, v in overrides.items() if v is not None}
        unknown = set(self._overrides) - set(BY_NAME)
        if unknown:
            raise JrsConfigError(f"unknown jrs settings {sorted(unknown)}; known: {sorted(BY_NAME)}")
        self._client: redis_lib.Redis | None = None
        self._settings: JrsSettings | None = None
        self._extra: dict[str, Any] | None = None

    def _connection_extra(self) -> dict[str, Any]:
        if self._extra is None:
            try:
                conn = self.get_connection(self.jrs_conn_id)
            except Exception as exc:
                raise JrsConfigError(
                    f"jrs connection {self.jrs_conn_id!r} is not defined: create it, e.g. "
                    f"AIRFLOW_CONN_{self.jrs_conn_id.upper()}='redis://127.0.0.1:6379/0?namespace=prod' ({exc})"
                ) from exc
            self._extra = dict(conn.extra_dejson)
        return self._extra

    @property
    def settings(self) -> JrsSettings:
        if self._settings is None:
            self._settings = resolve(
                conn_id=self.jrs_conn_id,
                arguments=self._overrides,
                extra=self._connection_extra(),
                section=lambda name: conf.get("jrs", name, fallback=None),
                home=_airflow_home(),
            )
        return self._settings

    @property
    def namespace(self) -> str:
        return self.settings.namespace

    def get_conn(self) -> redis_lib.Redis:
        """The redis-py client (built by the Redis provider's hook, cached), with the ``[jrs]``
        timeouts and retry policy (:func:`~airflow_jrs.store.redis.clients.apply_client_policy`)."""
        if self._client is None:
            conn = _JrsRedisHook.get_connection(self.jrs_conn_id)
            if is_sentinel(conn.extra_dejson):  # the Redis provider's hook knows no Sentinel
                self._client = policy_client(_sentinel_connection(conn), self.settings)
                return self._client
            client = _JrsRedisHook(redis_conn_id=self.jrs_conn_id).get_conn()
            apply_client_policy(client, self.settings)
            self._client = client
        return self._client

    def server(self) -> str:
        """``host:port`` of the store, for messages: never credentials; ``unknown host`` when the
        connection cannot even be looked up."""
        try:
            conn = self.get_connection(self.jrs_conn_id)
        except Exception:
            return "unknown host"
        master = conn.extra_dejson.get("sentinel_master")
        return describe_server(conn.host, conn.port or (SENTINEL_PORT if master else 6379), master)

    def close(self) -> None:
        """Close the cached client's connections (a hook used for one lookup in a thread)."""
        client, self._client = self._client, None
        if client is not None:
            client.close()

    def get_store(self) -> RedisJobResultStore:
        """The job result store with the configured settings (:attr:`JobNamespace.results`)."""
        settings = self.settings  # a missing connection: JrsConfigError first
        return RedisJobNamespace(self.get_conn(), settings).results

    def connection_kwargs(self) -> dict[str, Any]:
        """Plain kwargs for the same server and credentials as :meth:`get_conn`, for a client in
        another process: a trigger's (``redis.asyncio``); the supervisor beside spark-submit gets
        the same kwargs from the attempt's namespace
        (:meth:`~airflow_jrs.protocol.JobNamespace.connection_kwargs`). Both clients are built from
        them by :mod:`airflow_jrs.store.redis.clients`."""
        return async_connection_kwargs(self.get_conn(), self.jrs_conn_id)

    def async_connection_kwargs(self) -> dict[str, Any]:
        """:meth:`connection_kwargs`, under the name triggers and sensors know it by."""
        return self.connection_kwargs()

    def client_policy(self) -> dict[str, Any]:
        """The ``[jrs]`` client policy as plain JSON
        (:func:`~airflow_jrs.store.redis.clients.policy_options`): what a trigger carries next
        to :meth:`async_connection_kwargs` to build its client as :meth:`get_conn` is built."""
        return policy_options(self.settings)

    def get_async_store(self, **client_options: Any) -> AsyncRedisJobResultStore:
        """The store's async reader for this connection, with the ``[jrs]`` client policy and then
        ``client_options`` (call it outside the event loop: it may look the connection up)."""
        client = async_policy_client(self.async_connection_kwargs(), self.client_policy(), **client_options)
        return AsyncRedisJobResultStore(client, self.namespace)

    def jobs(self) -> JobNamespace:
        """Results, leases, intents and heartbeats of this connection's namespace, on one client
        (what the Airflow-free protocol takes: :class:`airflow_jrs.protocol.JobNamespace`).

        Its ``connection`` stays unset: looking it up costs a connection lookup on every task,
        the skip path included; a launcher that starts a supervisor asks the namespace for it
        only when it launches (:meth:`~airflow_jrs.protocol.JobNamespace.connection_kwargs`,
        an error naming this connection as :meth:`connection_kwargs` does).

        Its ``signals`` are the worker's Airflow metrics
        (:data:`~airflow_jrs.observability.metrics.TASK_METRICS`): what the attempt decides is
        counted where it decides. The CLI and the page build their namespace here too, and never
        decide, so they send nothing."""
        settings = self.settings  # a missing connection: JrsConfigError first
        return RedisJobNamespace(
            self.get_conn(), settings, signals=TASK_METRICS, source=f"jrs connection {self.jrs_conn_id!r}"
        )

    def test_connection(self) -> tuple[bool, str]:
        try:
            took = self.get_store().ping()
        except Exception as exc:
            return False, str(exc)
        return True, f"PONG in {took * 1000:.1f} ms (namespace {self.namespace!r})"

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden-fields": ["schema"],
            "relabeling": {"login": "ACL user", "host": "Redis host"},
            "placeholders": {"port": "6379", "extra": '{"namespace": "prod", "ssl": false}'},
        }
