"""Which application ids name a driver that runs in the cluster, not in spark-submit.

Ending spark-submit does not end such a driver: the supervisor of a task that is gone hands
this rule to :func:`airflow_jrs.protocol.orphan.record_orphan_outcome`, which then records
nothing and leaves the driver to the next attempt's recovery. Kept apart from the deploy modes
so that the supervisor (``python -m``) imports no Airflow.
"""

from __future__ import annotations

import re

#: Ids of drivers that run in the cluster, not in spark-submit (the cluster-mode shapes of
#: launch/spark_target.py ``_IDS``: standalone ``driver-...``, YARN ``application_...``,
#: Kubernetes ``spark-<hex>`` or ``<pod>-driver``).
_CLUSTER_DRIVER = re.compile(
    r"driver-\d{14}-\d{4,}|application_\d+_\d+|spark-[0-9a-f]{32}|[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?-driver"
)


def names_cluster_driver(application_id: str | None) -> bool:
    """Does ``application_id`` name a driver that runs in the cluster (which ending spark-submit
    does not end)? A YARN application id counts even in client mode: waiting is the safe side."""
    return application_id is not None and _CLUSTER_DRIVER.fullmatch(application_id) is not None
