"""The namespace on Redis: every noun of :class:`~airflow_jrs.store.namespace.JobNamespace` from one client.

Building each noun from a raw client at every call site is how a result written from ``on_kill``
once ignored the configured ``durability``; one object hands them all out instead, with the
settings' limits, TTLs and durability. The Airflow hook builds it from the connection
(:meth:`airflow_jrs.hooks.JrsHook.jobs`); the CLI, the trials and scripts from a URL
(:meth:`RedisJobNamespace.from_url`). It is the one place outside a noun that reads the client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import redis as redis_lib

from airflow_jrs.domain.signals import NO_SIGNALS, Signals
from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.settings import JrsSettings
from airflow_jrs.store.leases.lease import LeaseHolder, default_owner
from airflow_jrs.store.namespace import JobNamespace
from airflow_jrs.store.redis.clients import client_from_url, connection_of, fresh_client
from airflow_jrs.store.redis.durability import Durability, DurableWrites
from airflow_jrs.store.redis.errors import redis_errors
from airflow_jrs.store.redis.heartbeats import RedisHeartbeats
from airflow_jrs.store.redis.intents import RedisIntentStore
from airflow_jrs.store.redis.leases import RedisJobLease, held_leases
from airflow_jrs.store.redis.recompute_requests import RedisRecomputeRequests
from airflow_jrs.store.redis.recoveries import RedisRecoveries
from airflow_jrs.store.redis.results import RedisJobResultStore
from airflow_jrs.store.redis.sentinel import failover_facts
from airflow_jrs.store.redis.server import find_namespaces, namespace_has_keys, ping_latency, read_server_facts
from airflow_jrs.store.redis.stop_requests import RedisStopRequests
from airflow_jrs.store.results.documents import FolderDocuments
from airflow_jrs.store.server_facts import FailoverFacts, Namespaces, ServerFacts


@dataclass
class RedisJobNamespace(JobNamespace):
    """Results, leases, intents, heartbeats and requests of one namespace, on one Redis client.

    :param connection: plain redis-py kwargs for the same server (what a supervisor beside
        spark-submit connects with); ``None``: not looked up yet, or they cannot be handed on
        (:meth:`connection_kwargs` takes them from the client, or says why not)
    :param signals: who hears what the guard decides (:mod:`airflow_jrs.domain.signals`): the
        Airflow hook hands in its metrics, everybody else hears nothing
    :param source: what the client's connection is called in an error (``jrs connection
        'jrs_default'``, ``the Redis URL``)
    """

    client: redis_lib.Redis
    settings: JrsSettings
    connection: dict[str, Any] | None = field(default=None, repr=False)
    signals: Signals = field(default=NO_SIGNALS, repr=False)
    source: str = field(default="the store's Redis connection", repr=False)

    @classmethod
    def from_url(cls, url: str, settings: JrsSettings) -> RedisJobNamespace:
        """The jobs of ``settings.namespace`` on the Redis server at ``url``."""
        client = client_from_url(url, settings)
        source = "the Redis URL"
        try:
            connection: dict[str, Any] | None = connection_of(client, source)
        except JrsConfigError:  # a Unix socket: nothing in another process can reach it by kwargs
            connection = None
        return cls(client, settings, connection, source=source)

    @property
    def namespace(self) -> str:
        return self.settings.namespace

    def connection_kwargs(self) -> dict[str, Any]:
        """:attr:`connection`, taken from the client the first time it is asked for when nobody
        handed it in: the hook leaves it unset (:meth:`airflow_jrs.hooks.JrsHook.jobs`), so that a
        task that finds its job done pays no lookup; only a launch that starts a supervisor asks.

        :raises JrsConfigError: the client reaches its server through a Unix socket, which
            another process cannot be handed (the message names :attr:`source` and what to use)
        """
        if self.connection is None:
            self.connection = connection_of(self.client, self.source)
        return self.connection

    @cached_property
    def results(self) -> RedisJobResultStore:
        """The job result store, with the configured durability, limits and TTLs."""
        s = self.settings
        return RedisJobResultStore(
            self.client,
            s.namespace,
            clean_ttl=s.clean_ttl,
            delete_on_commit=s.delete_on_commit,
            history_limit=s.history_limit,
            index_limit=s.index_limit or None,
            durability=s.durability,
            durability_timeout=s.durability_timeout,
            result_documents=FolderDocuments.from_setting(s.result_documents) if s.result_documents else None,
        )

    @cached_property
    def durable_writes(self) -> DurableWrites:
        """The configured ``durability`` for what lets an attempt start Spark: its lease, its
        intent, its supervisor's first heartbeat (the results have it through :attr:`results`)."""
        s = self.settings
        return DurableWrites(Durability.parse(s.durability), s.durability_timeout)

    @cached_property
    def intents(self) -> RedisIntentStore:
        return RedisIntentStore(self.client, self.namespace, self.settings.spec_root, durable=self.durable_writes)

    @cached_property
    def heartbeats(self) -> RedisHeartbeats:
        return RedisHeartbeats(self.client, self.namespace, durable=self.durable_writes)

    @cached_property
    def stop_requests(self) -> RedisStopRequests:
        return RedisStopRequests(self.client, self.namespace)

    @cached_property
    def recompute_requests(self) -> RedisRecomputeRequests:
        return RedisRecomputeRequests(self.client, self.namespace)

    @cached_property
    def recoveries(self) -> RedisRecoveries:
        """What successors did about dead attempts, per job (for people; nothing decides from it)."""
        return RedisRecoveries(self.client, self.namespace)

    def lease(self, job_id: str, *, ttl: float | None = None, **owner: Any) -> RedisJobLease:
        """A new (not yet acquired) lease of ``job_id``; ``owner`` names the attempt (dag_id, task_id,
        run_id, map_index, try_number: for the on-call engineer, and so that a retry knows its own
        earlier try, :mod:`~airflow_jrs.protocol.takeover`), beside this process's host and pid."""
        return RedisJobLease(
            self.client, self.namespace, job_id, ttl=ttl or self.settings.lease_ttl, owner=default_owner(**owner),
            durable=self.durable_writes,
        )  # fmt: skip

    def held_leases(self) -> dict[str, LeaseHolder]:
        """Every lease held now, by job id: who computes what.

        A SCAN; see :func:`~airflow_jrs.store.leases.lease.held_leases`."""
        return held_leases(self.client, self.namespace)

    def in_use(self) -> bool:
        """Does the namespace hold any key? A wrong namespace must not read as an empty store."""
        return namespace_has_keys(self.client, self.namespace)

    def namespaces_on_server(self) -> Namespaces:
        """The namespaces the server holds (a bounded SCAN): which one a user may have meant."""
        return find_namespaces(self.client, self.namespace)

    def server_facts(self) -> ServerFacts:
        """The server's version, persistence and eviction settings (what ``doctor`` checks)."""
        return read_server_facts(self.client, self.namespace)

    def failover_facts(self) -> FailoverFacts | None:
        """Behind Sentinel: the primary the sentinels name, its replicas and its write guard
        (what ``doctor`` checks); ``None`` for a store that is not Sentinel-managed."""
        with redis_errors("ask the sentinels for the primary", self.namespace):
            return failover_facts(self.client)

    def ping_latency(self, count: int = 5) -> float:
        """Median seconds of ``count`` PINGs: what every task pays per round trip."""
        return ping_latency(self.client, self.namespace, count)

    def fresh(self) -> RedisJobNamespace:
        """The same namespace and settings on a client of its own, with none of this one's
        connections (close it after use): for writes from a signal handler, whose interrupted
        thread may hold a pooled connection. Same durability and limits as every other write."""
        return RedisJobNamespace(fresh_client(self.client), self.settings, self.connection, self.signals, self.source)

    def close(self) -> None:
        self.client.close()
