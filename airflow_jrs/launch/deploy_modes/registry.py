"""The deploy modes, and how a Spark connection picks one.

:data:`MODES` lists the mode classes: a new deploy mode is a module of this package (a
:class:`~.base.DeployMode` subclass with its master prefix, id shapes, submit conf, predecessor
lookup and stop) plus one line here. Everything else asks this module: where a submission goes
(:func:`resolve_target`, :func:`deploy_mode_for`), what is refused (:func:`refuse_unsafe`), and
what an id looks like (:func:`application_id_of`, :func:`names_cluster_driver`,
:func:`printed_id_pattern`), so the id shapes have one home: the modes.

Where a submission goes is resolved once from public inputs. The Spark provider's hook resolves
the same things into private attributes (``_connection['deploy_mode']``, ``_conn_id``) that change
between provider releases; reading them made the guarded operator fail where the provider's own
operator succeeds. :func:`resolve_target` reads the Spark connection and the operator's
arguments, with the provider's precedence (operator argument > connection extra).

Refused, with :class:`~airflow_jrs.exceptions.JrsConfigError` (see docs/recovery.md, "Deploy
modes"): ``spark.submit.deployMode=cluster`` in the conf without a cluster deploy mode on the
connection or the operator (the provider would not track the driver, so spark-submit would
return at submission and an empty folder would be published; spark-submit honours the conf, the
provider never looks at it), and what each mode refuses (:meth:`~.base.DeployMode.refuse_unsafe`).

Importing this module imports no Airflow: the supervisor (``python -m``) asks
:func:`names_cluster_driver`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import Any

from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.launch.deploy_modes.base import DeployMode, SparkTarget
from airflow_jrs.launch.deploy_modes.kubernetes import KubernetesClusterMode
from airflow_jrs.launch.deploy_modes.local import LocalMode
from airflow_jrs.launch.deploy_modes.standalone import StandaloneMode
from airflow_jrs.launch.deploy_modes.yarn import YarnClusterMode

#: Every deploy mode, by master family; the first whose master prefix a master URL has is chosen.
MODES: tuple[type[DeployMode], ...] = (
    LocalMode,
    StandaloneMode,
    YarnClusterMode,
    KubernetesClusterMode,
)
#: The kind of a master no mode claims: it runs as a local master does (spark-submit on this host).
OTHER = "other"


def mode_class(kind: str) -> type[DeployMode] | None:
    """The mode class of a :attr:`SparkTarget.kind` (``None`` for :data:`OTHER`)."""
    return next((m for m in MODES if m.kind == kind), None)


def kind_of(master: str) -> str:
    """The kind of the mode whose master prefix ``master`` has, else :data:`OTHER`."""
    return next((m.kind for m in MODES if m.claims(master)), OTHER)


def _master_url(conn: Any) -> str:
    """The master URL from an Airflow connection, as the Spark provider builds it."""
    if conn.conn_type == "spark" and conn.host and ("://" in conn.host or not conn.port):
        master = str(conn.host)
    else:
        master = f"{conn.conn_type}://{conn.host or ''}"
    return f"{master}:{conn.port}" if conn.port else master


def target_of(
    conn_id: str, master: str, *, deploy_mode: str | None = None, extra: Mapping[str, Any] | None = None,
    conf: Mapping[str, Any] | None = None,
) -> SparkTarget:  # fmt: skip
    """The target of a master URL (``deploy_mode``: the operator's argument, else the extra's ``deploy-mode``)."""
    extra = dict(extra or {})
    mode = deploy_mode or extra.get("deploy-mode") or None
    kind = kind_of(master)
    cls = mode_class(kind)
    cluster = mode == "cluster" and (cls.cluster_capable if cls is not None else True)
    return SparkTarget(conn_id, master, mode, kind, cluster, extra, dict(conf or {}))


def resolve_target(
    conn_id: str, *, deploy_mode: str | None = None, conf: Mapping[str, Any] | None = None
) -> SparkTarget:
    """The target of ``conn_id`` (which must exist: the provider would silently submit to yarn)."""
    from airflow.sdk import BaseHook

    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception as exc:
        raise JrsConfigError(
            f"Spark connection {conn_id!r} is not defined (the Spark provider would silently submit to "
            f'yarn). Define it, e.g. AIRFLOW_CONN_{conn_id.upper()}=\'{{"conn_type": "spark", "host": "local[2]"}}\''
        ) from exc
    extra = dict(conn.extra_dejson or {})
    return target_of(conn_id, _master_url(conn), deploy_mode=deploy_mode, extra=extra, conf=conf)


def deploy_mode_for(target: SparkTarget | None) -> DeployMode:
    """The deploy mode of a resolved Spark target (``None``, or a master no mode claims: local processes only)."""
    cls = mode_class(target.kind) if target is not None else None
    if target is None or cls is None:
        return LocalMode()
    return cls.for_target(target)


def refuse_unsafe(target: SparkTarget, conf: Mapping[str, Any] | None, *, task_id: str, **options: Any) -> None:
    """Raise :class:`JrsConfigError` for a configuration whose result could not be trusted
    (``options``: the operator's ``yarn_track_via_rm_api``, ``track_driver_via_k8s_api``, ``durable``)."""
    conf = dict(conf or {})
    conf_mode = str(conf.get("spark.submit.deployMode") or "").strip().lower()
    cls = mode_class(target.kind)
    if conf_mode == "cluster" and target.deploy_mode is None and (cls is None or cls.cluster_capable):
        raise JrsConfigError(
            f"{task_id}: conf spark.submit.deployMode=cluster, but neither the operator's deploy_mode nor "
            f"connection {target.conn_id!r}'s extra 'deploy-mode' says cluster: the Spark provider would not "
            "track the driver and spark-submit returns at submission. Set deploy_mode='cluster' on the "
            "operator (or the connection extra) and drop the conf entry."
        )
    if cls is not None:
        cls.refuse_unsafe(target, conf, task_id=task_id, options=options)


def application_id_of(kind: str, value: object) -> str | None:
    """``value`` if it has the shape of an application or driver id of a ``kind`` target (any
    mode's for ``""`` or :data:`OTHER`), else ``None``: what the provider's hook parsed, or what an
    application wrote in its commit marker, is stored only when it is an id."""
    if not isinstance(value, str):
        return None
    cls = mode_class(kind)
    shapes = cls.ids if cls is not None else tuple(s for m in MODES for s in m.ids)
    return value if any(s.regex.fullmatch(value) for s in shapes) else None


@cache
def _cluster_driver(modes: tuple[type[DeployMode], ...]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{s.pattern})" for m in modes for s in m.ids if s.cluster_driver))


def names_cluster_driver(application_id: str | None) -> bool:
    """Does ``application_id`` name a driver that runs in the cluster (which ending spark-submit
    does not end)? Any mode's cluster-driver shape counts, whatever the deploy mode of the
    attempt (a YARN application id even in client mode): waiting is the safe side."""
    return application_id is not None and _cluster_driver(MODES).fullmatch(application_id) is not None


@cache
def _printed(modes: tuple[type[DeployMode], ...]) -> re.Pattern[str]:
    shapes = dict.fromkeys(s.pattern for m in modes for s in m.ids if s.printed)
    return re.compile("(" + "|".join(shapes) + r")(?![\w-])")


def printed_id_pattern() -> re.Pattern[str]:
    """Application and driver ids as Spark prints them, to find the first in spark-submit's output
    (group 1); shapes too loose to search for in free text are left out."""
    return _printed(MODES)
