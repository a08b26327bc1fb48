"""What an attempt may conclude when its driver runs in the cluster (cluster deploy modes).

In local and client mode the application lives and dies with spark-submit, so spark-submit's
exit is the application's outcome. In cluster mode (standalone, YARN, Kubernetes) it is not:

* spark-submit or the provider's status polling can fail while the driver runs on (a lost
  REST poll, a master or ResourceManager failover, a network partition). Dropping the intent
  then would let the next attempt submit a second driver beside the first.
  :func:`driver_outcome` asks the cluster manager; the intent is kept while the driver runs or
  the cluster cannot be asked. The next attempt finds the driver by the id the intent recorded,
  waits for it (or stops it, ``predecessor="stop"``) and adopts its output (:mod:`.recovery`); on
  the last try the task says so and names the driver, since no attempt follows by itself. A
  driver that ended with this attempt's complete commit marker is published at once.
* "the driver finished" can be reported without the output being complete (spark-submit that
  returns at submission, an application that never writes the marker). :func:`committed_marker`
  accepts only a commit marker that names this job and fence; without it nothing is recorded
  as SUCCEEDED.
"""

from __future__ import annotations

from typing import Any

from airflow_jrs.domain.paths import job_tag
from airflow_jrs.launch.deploy_modes.base import DeployMode
from airflow_jrs.protocol.launcher import COMMITTED, ENDED, RUNS
from airflow_jrs.protocol.markers import committed_marker


def driver_outcome(
    mode: DeployMode, spark_hook: Any, *, namespace: str, job_id: str, fence: int, staging: str, app_id: str | None,
    log: Any,
) -> str:  # fmt: skip
    """After spark-submit ended in a cluster deploy mode, what may the attempt conclude?

    :data:`RUNS` when the cluster lists the driver as live or cannot be asked (unknown is not
    "ended"): the intent must stay. :data:`COMMITTED` when nothing runs and the folder holds a
    complete commit marker of this job and fence: the output is done and is published now.
    :data:`ENDED` when nothing runs and there is no such marker: the failure is recorded as in
    client mode."""
    if not mode.cluster:
        return ENDED
    known = [app_id] if app_id else []
    try:
        live = mode.cluster_predecessors(spark_hook, namespace, job_id, job_tag(namespace, job_id), known)
    except Exception as exc:
        log.error(
            "Job %s: the %s driver %s may still run and the cluster cannot be asked (%s): the intent stays; "
            "nothing is recorded as failed.",
            job_id, mode.name, app_id or "(id unknown)", exc,
        )  # fmt: skip
        return RUNS
    if live:
        log.error("Job %s: %s still runs: the intent stays; nothing is recorded as failed.", job_id,
                  ", ".join(p.description for p in live))  # fmt: skip
        return RUNS
    if committed_marker(staging, job_id, fence) is not None:
        log.warning("Job %s: the driver ended with a complete commit marker in %s: its output is published.",
                    job_id, staging)  # fmt: skip
        return COMMITTED
    return ENDED


def recorded_app_id(mode: DeployMode, spark_hook: Any, recorder: Any) -> str | None:
    """The driver or application id spark-submit reported, recorded in the intent now (``recorder``:
    the attempt's :class:`~.submission.SubmissionRecorder`)."""
    recorder.stop()
    recorder.amend_now()
    return mode.submission(spark_hook)[1] if spark_hook is not None else None


def outcome_after_submit(
    mode: DeployMode, spark_hook: Any, recorder: Any, *, namespace: str, job_id: str, fence: int, staging: str,
    log: Any,
) -> tuple[str, str | None]:  # fmt: skip
    """(:func:`driver_outcome`, driver id) once spark-submit ended, the id recorded in the intent
    first (local and client mode: ``ENDED``)."""
    if not mode.cluster:
        return ENDED, None
    app_id = recorded_app_id(mode, spark_hook, recorder)
    outcome = driver_outcome(mode, spark_hook, namespace=namespace, job_id=job_id, fence=fence, staging=staging,
                             app_id=app_id, log=log)  # fmt: skip
    return outcome, app_id
