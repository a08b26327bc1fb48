"""Which session an in-process operator may build: one rule for ``JrsPySparkOperator`` and ``JrsSparkSqlOperator``.

Both hand :class:`~.session_launcher.SessionLauncher` a master and a Spark conf. What makes
their attempts safe is the same for both: the driver must live in the task process, so that it
dies with it and the lease alone fences it. So the refusals (Spark Connect, YARN, Kubernetes,
cluster deploy mode) live here once; a second copy would drift into a session that outlives
its task.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.providers.common.compat.sdk import BaseHook

from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.launch.deploy_modes.registry import kind_of

#: Deploy modes (their ``kind``) whose driver lives in the task process when a session is built
#: on their master: the only ones the session launcher runs.
IN_PROCESS_KINDS = ("local", "standalone")


def in_process_session(
    *,
    task_id: str,
    operator: str,
    conn_id: str | None,
    conf: Mapping[str, Any] | None,
    app_name: str,
    master: str | None = None,
    extras_as_conf: bool = True,
) -> tuple[str, dict[str, str]]:
    """(master, conf) as the Spark provider resolves them: ``local[*]`` without a connection,
    else the connection's ``host:port`` or host (its extras as Spark conf when
    ``extras_as_conf``: the PySpark connection's are, the ``spark_sql`` one's are not), then
    ``conf``; ``spark.master`` in it wins, ``master`` wins over all.

    Raises :class:`JrsConfigError` for what the session launcher cannot make safe."""
    merged: dict[str, str] = {"spark.app.name": app_name}
    url = "local[*]"
    if conn_id:
        conn = BaseHook.get_connection(conn_id)
        if conn.conn_type == "spark_connect":
            url = "sc://"
        elif conn.port:
            url = f"{conn.host}:{conn.port}"
        elif conn.host:
            url = conn.host
        if extras_as_conf:
            merged.update({str(k): str(v) for k, v in conn.extra_dejson.items()})
    merged.update({str(k): str(v) for k, v in (conf or {}).items()})
    chosen = master or merged.pop("spark.master", None) or url
    merged.pop("spark.master", None)
    if url.startswith("sc://") or merged.get("spark.remote") or chosen.startswith("sc://"):
        raise JrsConfigError(
            f"{task_id}: Spark Connect (connection {conn_id!r}) is not supported by {operator} yet: a Connect "
            "server keeps running a dead client's queries, which needs the Connect launcher. Use a local or "
            "spark:// master, or JrsSparkSubmitOperator."
        )
    if kind_of(chosen) not in IN_PROCESS_KINDS or merged.get("spark.submit.deployMode") == "cluster":
        raise JrsConfigError(
            f"{task_id}: master {chosen!r} (connection {conn_id!r}) is not supported by {operator}: only "
            "local[...] and spark://host:port, whose driver lives in the task process and dies with it, are "
            "guarded by the lease alone. Use JrsSparkSubmitOperator for YARN and Kubernetes."
        )
    return chosen, merged
