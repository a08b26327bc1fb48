"""The namespace: the one services contract every caller of the store gets (FLIP-194's services).

Everything the protocol, the launchers, the supervisor, the views and the CLI need of the store is
a noun of one namespace: its results, leases, intents, heartbeats, stop and recompute requests,
recoveries, and what the server behind it promises. Flink hands its job manager one
``HighAvailabilityServices`` per deployment for the same reason: a caller names the services,
never the client under them, so that a second backend is one package that implements this
contract (and each noun's, beside it) and passes the one contract suite, not an edit of every
caller. The Redis backend is :class:`airflow_jrs.store.redis.namespace.RedisJobNamespace`.

Each noun has its own small contract: :class:`~airflow_jrs.store.results.base.JobResultStore`,
:class:`~airflow_jrs.store.leases.lease.JobLease`, :class:`~airflow_jrs.store.intents.IntentStore`,
:class:`~airflow_jrs.store.heartbeats.Heartbeats`, :class:`~airflow_jrs.store.stop_requests.StopRequests`,
:class:`~airflow_jrs.store.recompute_requests.RecomputeRequests`,
:class:`~airflow_jrs.store.recoveries.Recoveries` and the facts of :mod:`airflow_jrs.store.server_facts`.
One rule crosses nouns and a backend must keep it in one transaction: the result's write checks
the lease's fence and deletes the intent in the same step (docs/architecture.md, invariants).
"""

from __future__ import annotations

import abc
from typing import Any

from airflow_jrs.domain.signals import NO_SIGNALS, Signals
from airflow_jrs.settings import JrsSettings
from airflow_jrs.store.heartbeats import Heartbeats
from airflow_jrs.store.intents import IntentStore
from airflow_jrs.store.leases.lease import JobLease, LeaseHolder
from airflow_jrs.store.recompute_requests import RecomputeRequests
from airflow_jrs.store.recoveries import Recoveries
from airflow_jrs.store.results.base import JobResultStore
from airflow_jrs.store.server_facts import FailoverFacts, Namespaces, ServerFacts
from airflow_jrs.store.stop_requests import StopRequests


class JobNamespace(abc.ABC):
    """Results, leases, intents, heartbeats, requests and recoveries of one namespace, with the
    configured durability and limits, and what its server promises.

    ``settings`` are the resolved ``[jrs]`` settings (the namespace among them); ``signals`` who
    hears what the guard decides (:mod:`airflow_jrs.domain.signals`: the Airflow hook hands in its
    metrics, everybody else hears nothing); ``source`` what the store's connection is called in an
    error (``jrs connection 'jrs_default'``, ``the Redis URL``)."""

    settings: JrsSettings
    signals: Signals = NO_SIGNALS
    source: str = "the store's connection"

    @property
    def namespace(self) -> str:
        return self.settings.namespace

    # -- the nouns ------------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def results(self) -> JobResultStore:
        """The job result store, with the configured durability, limits and TTLs."""

    @property
    @abc.abstractmethod
    def intents(self) -> IntentStore:
        """The references to running jobs' specs (written with the configured durability)."""

    @property
    @abc.abstractmethod
    def heartbeats(self) -> Heartbeats:
        """Whether each launched submission still runs (the first beat with the durability)."""

    @property
    @abc.abstractmethod
    def stop_requests(self) -> StopRequests:
        """What people and successors ask of running attempts."""

    @property
    @abc.abstractmethod
    def recompute_requests(self) -> RecomputeRequests:
        """When each run's request to compute a job again first met it."""

    @property
    @abc.abstractmethod
    def recoveries(self) -> Recoveries:
        """What successors did about dead attempts, per job (for people; nothing decides from it)."""

    @abc.abstractmethod
    def lease(self, job_id: str, *, ttl: float | None = None, **owner: Any) -> JobLease:
        """A new (not yet acquired) lease of ``job_id``; ``owner`` names the attempt (dag_id, task_id,
        run_id, map_index, try_number: for the on-call engineer, and so that a retry knows its own
        earlier try, :mod:`~airflow_jrs.protocol.takeover`), beside this process's host and pid."""

    @abc.abstractmethod
    def held_leases(self) -> dict[str, LeaseHolder]:
        """Every lease held now, by job id: who computes what."""

    # -- the server -----------------------------------------------------------------------
    @abc.abstractmethod
    def in_use(self) -> bool:
        """Does the namespace hold anything? A wrong namespace must not read as an empty store."""

    @abc.abstractmethod
    def namespaces_on_server(self) -> Namespaces:
        """The namespaces the server holds (bounded): which one a user may have meant."""

    @abc.abstractmethod
    def server_facts(self) -> ServerFacts:
        """The server's version, persistence and eviction settings (what ``doctor`` checks)."""

    @abc.abstractmethod
    def failover_facts(self) -> FailoverFacts | None:
        """Behind a failover manager (Sentinel): the primary it names, its replicas and its write
        guard (what ``doctor`` checks); ``None`` for a store without one."""

    @abc.abstractmethod
    def ping_latency(self, count: int = 5) -> float:
        """Median seconds of ``count`` round trips: what every task pays per store call."""

    # -- handing on -----------------------------------------------------------------------
    @abc.abstractmethod
    def connection_kwargs(self) -> dict[str, Any]:
        """How another process (the supervisor beside spark-submit, a trigger) reaches the same
        store: plain, JSON-able settings.

        :raises JrsConfigError: the connection cannot be handed on (the message names
            :attr:`source` and what to use instead)"""

    @abc.abstractmethod
    def fresh(self) -> JobNamespace:
        """The same namespace and settings on connections of their own (close it after use): for
        writes from a signal handler, whose interrupted thread may hold a pooled connection."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the connections."""
