"""A local master (``local``, ``local[N]``, ``local[*]``): the application lives in spark-submit.

============  ===============================  ==========================================
deploy mode   tag on the submission            a predecessor is found as
============  ===============================  ==========================================
local         ``spark.jrs.*`` conf on the       its spark-submit process on this host
              spark-submit command line        (psutil, by command line)
============  ===============================  ==========================================

Client deploy mode on a YARN or Kubernetes master behaves the same (the driver is spark-submit,
on this host), so those modes answer with this one outside cluster mode.
"""

from __future__ import annotations

from airflow_jrs.launch.deploy_modes.base import DeployMode, IdShape

#: ``SparkContext.applicationId`` of a local master (``local-<epoch millis>``).
LOCAL_ID = IdShape(r"local-\d{10,}")


class LocalMode(DeployMode):
    """Local master or client deploy mode: the application lives in spark-submit, on this host."""

    name = "local"
    kind = "local"
    master_prefixes = ("local",)
    ids = (LOCAL_ID,)
    cluster_capable = False
