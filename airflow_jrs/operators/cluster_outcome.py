"""What an attempt may conclude when its driver runs in the cluster (cluster deploy modes).

In local and client mode the application lives and dies with spark-submit, so spark-submit's
exit is the application's outcome. In cluster mode (standalone, YARN, Kubernetes) it is not:

* spark-submit or the provider's status polling can fail while the driver runs on (a lost
  REST poll, a master or ResourceManager failover, a network partition). Dropping the intent
  then would let the next attempt submit a second driver beside the first.
  :func:`driver_may_still_run` asks the cluster manager; the intent is kept unless the cluster
  says the driver ended and left no commit marker. The next attempt finds the driver by the id
  the intent recorded, waits for it (or stops it, ``predecessor="stop"``) and adopts its
  output (:mod:`.recovery`).
* "the driver finished" can be reported without the output being complete (spark-submit that
  returns at submission, an application that never writes the marker). :func:`committed_marker`
  accepts only a commit marker that names this job and fence; without it nothing is recorded
  as SUCCEEDED.
"""

from __future__ import annotations

from typing import Any

from airflow_jrs.exceptions import CorruptCommitMarkerError
from airflow_jrs.operators.deploy_modes import DeployMode
from airflow_jrs.paths import job_tag
from airflow_jrs.spark.commit import marker_path, read_commit_marker


def committed_marker(staging: str, job_id: str, fence: int) -> dict[str, Any] | None:
    """The commit marker in ``staging`` if it is complete and names this job and fence, else ``None``.

    A marker that names another job or fence was not written by this attempt's application (a
    reattached or misconfigured driver): its output is not this attempt's to publish."""
    try:
        marker = read_commit_marker(staging)
    except CorruptCommitMarkerError:
        return None
    if marker is None:
        return None
    if marker.get("job_id") not in (None, job_id) or marker.get("fence") not in (None, fence, str(fence)):
        return None
    return marker


def missing_marker_message(job_id: str, mode: DeployMode, staging: str, app_id: str | None) -> str:
    """What the task log and the FAILED result say when a cluster driver left no commit marker."""
    return (
        f"job {job_id}: Spark reported the {mode.name} application {app_id or '(id unknown)'} finished, but "
        f"its commit marker {marker_path(staging)} is missing or names another job or fence. In cluster "
        "deploy modes airflow-jrs records SUCCEEDED only for output with a complete marker: make the "
        "application call airflow_jrs.spark.write_commit_marker(...) (or commit_output) last. Nothing was "
        "recorded as succeeded."
    )


def driver_may_still_run(
    mode: DeployMode, spark_hook: Any, *, namespace: str, job_id: str, staging: str, app_id: str | None, log: Any
) -> bool:
    """After the provider's ``execute`` failed in a cluster deploy mode: must the intent stay?

    ``True`` when the cluster lists the driver as live, when it cannot be asked (unknown is
    not "ended"), or when the driver ended and left a complete commit marker (the next attempt
    adopts it). ``False`` only when the cluster says nothing of this attempt runs and the folder
    has no marker: then the failure is recorded as in client mode."""
    if not mode.cluster:
        return False
    known = [app_id] if app_id else []
    try:
        live = mode.cluster_predecessors(spark_hook, namespace, job_id, job_tag(namespace, job_id), known)
    except Exception as exc:
        log.error(
            "Job %s: the %s driver %s may still run and the cluster cannot be asked (%s): the intent stays, so "
            "the next attempt looks for the driver again before it submits; nothing is recorded as failed.",
            job_id, mode.name, app_id or "(id unknown)", exc,
        )  # fmt: skip
        return True
    if live:
        log.error(
            "Job %s: the provider failed, but %s still runs: the intent stays; the next attempt waits for it "
            "(predecessor='wait') or stops it ('stop') and adopts its output if it commits; nothing is "
            "recorded as failed.",
            job_id, ", ".join(p.description for p in live),
        )  # fmt: skip
        return True
    try:
        marker = read_commit_marker(staging)
    except CorruptCommitMarkerError:
        marker = None
    if marker is not None:
        log.warning(
            "Job %s: the provider failed, but the driver ended with a commit marker in %s: the intent stays "
            "and the next attempt adopts that output.",
            job_id, staging,
        )  # fmt: skip
        return True
    return False
