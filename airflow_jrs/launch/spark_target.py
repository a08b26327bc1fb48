"""Where a submission goes (master and deploy mode), resolved once from public inputs, and the
configurations airflow-jrs refuses because no result it could record for them would be true.

The Spark provider's hook resolves the same things into private attributes
(``_connection['deploy_mode']``, ``_conn_id``) that change between provider releases; reading them
made the guarded operator fail where the provider's own operator succeeds. This module resolves
them from the Spark connection and the operator's arguments, with the provider's precedence
(operator argument > connection extra), and reads ``spark.submit.deployMode`` from the conf, which
spark-submit honours when no ``--deploy-mode`` is passed but the provider never looks at.

Refused, with :class:`~airflow_jrs.exceptions.JrsConfigError` (see docs/recovery.md, "Deploy modes"):

* ``spark.submit.deployMode=cluster`` in the conf without a cluster deploy mode on the connection or
  the operator: the provider would not track the driver, so spark-submit would return at
  submission and an empty folder would be published;
* YARN cluster mode with ``spark.yarn.submit.waitAppCompletion=false`` unless
  ``yarn_track_via_rm_api=True``, and Kubernetes cluster mode with
  ``spark.kubernetes.submission.waitAppCompletion=false`` unless ``track_driver_via_k8s_api=True``:
  spark-submit returns when the application is accepted and nothing would wait for its end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.protocol.application_ids import application_id_of


@dataclass(frozen=True)
class SparkTarget:
    """The master and deploy mode one submission goes to.

    :param kind: ``local`` (``local[...]``), ``standalone`` (``spark://``), ``yarn``, ``kubernetes``
        (``k8s://``) or ``other``
    :param masters: for standalone, every ``host:port`` of the master list (HA: ``spark://h1:7077,h2:7077``)
    """

    conn_id: str
    master: str
    deploy_mode: str | None
    kind: str
    extra: Mapping[str, Any] = field(default_factory=dict)
    k8s_namespace: str | None = None
    masters: tuple[str, ...] = ()

    @property
    def cluster(self) -> bool:
        """The driver runs in the cluster: spark-submit's exit says little about the application."""
        return self.deploy_mode == "cluster" and self.kind != "local"

    def application_id(self, value: object) -> str | None:
        """``value`` if it is an application or driver id of this target (:func:`application_id_of`)."""
        return application_id_of(self.kind, value)


def _master_url(conn: Any) -> str:
    """The master URL from an Airflow connection, as the Spark provider builds it."""
    if conn.conn_type == "spark" and conn.host and ("://" in conn.host or not conn.port):
        master = str(conn.host)
    else:
        master = f"{conn.conn_type}://{conn.host or ''}"
    return f"{master}:{conn.port}" if conn.port else master


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
    master = _master_url(conn)
    mode = deploy_mode or extra.get("deploy-mode") or None
    conf = dict(conf or {})
    if master.startswith("local"):
        kind = "local"
    elif master.startswith("spark://"):
        kind = "standalone"
    elif master.startswith("yarn"):
        kind = "yarn"
    elif master.startswith("k8s://"):
        kind = "kubernetes"
    else:
        kind = "other"
    masters = tuple(m.strip() for m in master.removeprefix("spark://").split(",")) if kind == "standalone" else ()
    namespace = conf.get("spark.kubernetes.namespace") or extra.get("namespace")
    return SparkTarget(conn_id, master, mode, kind, extra, namespace, masters)


def _false(value: object) -> bool:
    return str(value).strip().lower() == "false"


def refuse_unsafe(
    target: SparkTarget,
    conf: Mapping[str, Any] | None,
    *,
    task_id: str,
    yarn_track_via_rm_api: bool = False,
    track_driver_via_k8s_api: bool = False,
) -> None:
    """Raise :class:`JrsConfigError` for a configuration whose result could not be trusted."""
    conf = dict(conf or {})
    conf_mode = str(conf.get("spark.submit.deployMode") or "").strip().lower()
    if conf_mode == "cluster" and target.deploy_mode is None and target.kind != "local":
        raise JrsConfigError(
            f"{task_id}: conf spark.submit.deployMode=cluster, but neither the operator's deploy_mode nor "
            f"connection {target.conn_id!r}'s extra 'deploy-mode' says cluster: the Spark provider would not "
            "track the driver and spark-submit returns at submission. Set deploy_mode='cluster' on the "
            "operator (or the connection extra) and drop the conf entry."
        )
    if target.kind == "yarn" and target.cluster and not yarn_track_via_rm_api:
        if _false(conf.get("spark.yarn.submit.waitAppCompletion", "true")):
            raise JrsConfigError(
                f"{task_id}: spark.yarn.submit.waitAppCompletion=false makes spark-submit return when YARN "
                "accepts the application, before it ran; nothing would wait for its end. Remove the conf "
                "entry, or set yarn_track_via_rm_api=True (the provider then polls the ResourceManager)."
            )
    if target.kind == "kubernetes" and target.cluster and not track_driver_via_k8s_api:
        if _false(conf.get("spark.kubernetes.submission.waitAppCompletion", "true")):
            raise JrsConfigError(
                f"{task_id}: spark.kubernetes.submission.waitAppCompletion=false makes spark-submit return "
                "when the driver pod is created; nothing would wait for its end. Remove the conf entry, or "
                "set track_driver_via_k8s_api=True (the provider then watches the driver pod)."
            )
