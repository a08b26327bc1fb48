"""What a deploy mode answers, and the target a submission goes to.

Recovery needs the same few things from wherever Spark runs: which masters are this mode's,
what its application and driver ids look like (only ids are ever stored), how to tag a
submission so that a successor can find it, how to find (and stop) a dead attempt's
application, and what id spark-submit reported for it. :class:`DeployMode` is that interface;
each mode is a module of this package (:mod:`.local`, :mod:`.standalone`, :mod:`.yarn`,
:mod:`.kubernetes`) and :mod:`.registry` lists them and picks one for a Spark connection.

Every mode also scans local processes: a spark-submit that outlived its task on this host
is a predecessor whatever the master. Nothing here imports Airflow at import time: the
supervisor (``python -m``) reads the id shapes through :mod:`.registry`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from airflow_jrs.launch import provider_adapter as provider
from airflow_jrs.protocol.launcher import Predecessor, local_predecessors


class ClusterUnreachableError(RuntimeError):
    """The cluster manager could not be asked whether an attempt's driver runs: unknown is not "none"."""


@dataclass(frozen=True)
class IdShape:
    """One shape of application or driver id a deploy mode's Spark reports (a full match).

    :param cluster_driver: the id names a driver that runs in the cluster, which ending
        spark-submit does not end (the orphaned supervisor then records nothing)
    :param printed: distinctive enough to be searched for in spark-submit's output (a
        Kubernetes ``<pod>-driver`` is not: any word ending in ``-driver`` would match)
    """

    pattern: str
    cluster_driver: bool = False
    printed: bool = True

    @cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern)


@dataclass(frozen=True)
class SparkTarget:
    """The master and deploy mode one submission goes to, resolved once from public inputs
    (:func:`.registry.resolve_target`).

    :param kind: the :attr:`DeployMode.kind` whose master prefix the master has (``other`` when none has)
    :param cluster: cluster deploy mode on a master that has one: spark-submit's exit says little
        about the application
    :param conf: the operator's Spark conf (a mode reads what it needs, e.g. a Kubernetes namespace)
    """

    conn_id: str
    master: str
    deploy_mode: str | None
    kind: str
    cluster: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)
    conf: Mapping[str, Any] = field(default_factory=dict)


class DeployMode:
    """One way Spark runs a submission. The defaults are those of a driver that lives in
    spark-submit, on this host (local master, client deploy mode): nothing to tag, no cluster
    to ask, the predecessors are local processes.

    A mode module subclasses it and sets the class attributes the registry reads
    (:attr:`kind`, :attr:`master_prefixes`, :attr:`ids`, :attr:`cluster_capable`), then
    overrides what differs: :meth:`for_target`, :meth:`refuse_unsafe`, :meth:`submission_conf`,
    :meth:`prepare`, :meth:`cluster_predecessors` (whose :class:`Predecessor` carries the mode's
    stop), :meth:`before_resubmit`.
    """

    #: for messages ("local", "yarn-cluster", ...)
    name = "local"
    #: the master family, the registry's key (``SparkTarget.kind``)
    kind = "local"
    #: the driver runs in the cluster: spark-submit's exit says little about the application
    cluster = False
    #: master URLs of this mode start with one of these (``spark://``, ``yarn``, ...)
    master_prefixes: tuple[str, ...] = ()
    #: what this mode's application and driver ids look like
    ids: tuple[IdShape, ...] = ()
    #: a cluster deploy mode exists on these masters (``local[...]`` has none)
    cluster_capable = True

    # -- what the registry asks of a mode class -------------------------------------------------
    @classmethod
    def claims(cls, master: str) -> bool:
        """Is ``master`` one of this mode's master URLs?"""
        return master.startswith(cls.master_prefixes) if cls.master_prefixes else False

    @classmethod
    def for_target(cls, target: SparkTarget) -> DeployMode:
        """The mode instance for a resolved target of this kind (client and cluster may differ)."""
        return cls()

    @classmethod
    def refuse_unsafe(
        cls, target: SparkTarget, conf: Mapping[str, Any], *, task_id: str, options: Mapping[str, Any]
    ) -> None:
        """Raise :class:`~airflow_jrs.exceptions.JrsConfigError` for a configuration of this mode
        whose result could not be trusted (``options``: the operator's tracking arguments and
        ``durable``)."""

    # -- one attempt ----------------------------------------------------------------------------
    def application_id(self, value: object) -> str | None:
        """``value`` if it has the shape of one of this mode's ids (:attr:`ids`), else ``None``:
        a reattach path or a log line must never reach the intent or the result."""
        if isinstance(value, str) and any(shape.regex.fullmatch(value) for shape in self.ids):
            return value
        return None

    def submission_conf(self, tag: str, fence: int, user_conf: dict[str, Any]) -> dict[str, str]:
        """Conf that makes this attempt's application findable (added to the user's conf)."""
        return {}

    def prepare(self, spark_hook: Any) -> None:
        """Called with the hook that will run spark-submit, before it runs (to learn more from it)."""

    def find_predecessors(
        self, spark_hook: Any, namespace: str, job_id: str, tag: str, known_ids: Sequence[str] = ()
    ) -> list[Predecessor]:
        """Live applications of earlier attempts of the job (``known_ids``: ids their intents recorded):
        spark-submit processes on this host, then what the cluster knows (:meth:`cluster_predecessors`)."""
        local = local_predecessors(namespace, job_id)
        return local + self.cluster_predecessors(spark_hook, namespace, job_id, tag, known_ids)

    def cluster_predecessors(
        self, spark_hook: Any, namespace: str, job_id: str, tag: str, known_ids: Sequence[str] = ()
    ) -> list[Predecessor]:
        """Live applications or drivers of earlier attempts that the cluster manager knows, each with
        the mode's way to stop it (none in local mode). Raises when the cluster cannot be asked:
        unknown is not "none"."""
        return []

    def before_resubmit(self, intent: Any) -> None:
        """Raise when a predecessor that recorded no id may still run (nothing is submitted then)."""

    def reported_candidates(self, spark_hook: Any) -> tuple[Any, ...]:
        """What the provider's hook parsed from spark-submit's output so far, any of which may be an id."""
        reported = provider.reported_ids(spark_hook)
        return (
            reported.yarn_application_id,
            reported.driver_id,
            reported.kubernetes_application_id,
            reported.kubernetes_driver_pod,
        )

    def submission(self, spark_hook: Any) -> tuple[int | None, str | None]:
        """(spark-submit pid, application or driver id) as the provider's hook parsed them so far.

        The id is returned only when it has the shape of an id of this mode
        (:meth:`application_id`); anything else is not stored."""
        process = provider.submit_process(spark_hook)
        candidates = self.reported_candidates(spark_hook)
        app_id = next((v for v in (self.application_id(c) for c in candidates) if v), None)
        return (process.pid if process is not None else None), app_id
