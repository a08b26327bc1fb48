"""The spark-submit launcher's side of the one stop path for a batch job (a stream's is :mod:`.streaming`).

A stop or cancel of a running batch job (``airflow-jrs stop|cancel``, the Job results page, a
successor with ``predecessor="stop"``, ``on_kill``) goes to the job's control hash
(:mod:`airflow_jrs.store.stop_requests`); the supervisor beside spark-submit terminates it
(SIGTERM, then SIGKILL after a grace period). A batch job has no batch boundary, so a stop and a
cancel end it alike: the task that sees spark-submit end on such a request records CANCELED
(who asked, when, why) and fails without retries, instead of FAILED and a retry that would
undo what was asked.

In cluster deploy modes (standalone, YARN, Kubernetes) terminating spark-submit ends only the
client: the driver runs on in the cluster. :func:`end_on_request` therefore stops the driver
through the deploy mode and records CANCELED only once the cluster says it ended; when it cannot
tell (or the driver outlives the stop) the intent stays and nothing is recorded, so a cleared
task finds the driver first instead of submitting a second one beside it. ``on_kill`` stops the
driver the same way before it asks the supervisor (:func:`stop_cluster_driver`): the provider's
own YARN kill only runs while spark-submit lives, and the supervisor has ended it by then.

Output whose commit marker is there is never recorded CANCELED, in any deploy mode: the attempt
looks for its marker before it asks here (the protocol's one rule, whatever the exit code), and a
cluster driver that wrote it while it was being stopped is published by the attempt too.
"""

from __future__ import annotations

import time
from typing import Any

from airflow_jrs.domain.paths import job_tag
from airflow_jrs.exceptions import JobEndedOnRequestError
from airflow_jrs.launch.cluster_outcome import driver_outcome
from airflow_jrs.launch.deploy_modes.base import DeployMode
from airflow_jrs.protocol.launcher import COMMITTED, ENDED, RUNS
from airflow_jrs.protocol.run import JobRun
from airflow_jrs.protocol.stopping import record_ended_on_request
from airflow_jrs.store.stop_requests import StopRequest

#: Seconds a stop or cancel waits for the cluster to report a stopped driver ended.
CLUSTER_STOP_WAIT = 60.0


def stop_cluster_driver(
    mode: DeployMode, spark_hook: Any, *, namespace: str, job_id: str, app_id: str | None, log: Any,
    wait: float = 0.0,
) -> bool:  # fmt: skip
    """Stop this job's driver in the cluster (cluster deploy modes; no-op otherwise) and wait up to
    ``wait`` seconds for the cluster to report it ended. ``True``: the cluster lists nothing of the
    job as live any more. Never raises (it runs from ``on_kill`` as well): unknown is ``False``."""
    if not mode.cluster:
        return True
    try:
        live = mode.cluster_predecessors(spark_hook, namespace, job_id, job_tag(namespace, job_id),
                                         [app_id] if app_id else [])  # fmt: skip
        for driver in live:
            log.warning("Job %s: stopping %s (spark-submit's end does not end a cluster driver).", job_id,
                        driver.description)  # fmt: skip
            driver.stop()
        deadline = time.monotonic() + wait
        while live:
            live = [d for d in live if d.alive()]
            if not live or time.monotonic() >= deadline:
                break
            time.sleep(0.5)
    except Exception as exc:
        log.error("Job %s: could not stop the %s driver %s (%s).", job_id, mode.name, app_id or "(id unknown)", exc)
        return False
    return not live


def end_on_request(
    run: JobRun, fence: int, request: StopRequest, *, mode: DeployMode, spark_hook: Any, staging: str,
    app_id: str | None, log: Any,
) -> None:  # fmt: skip
    """spark-submit ended on a stop or cancel request: record CANCELED and raise (no retry).

    In cluster deploy modes the driver is stopped first; CANCELED (after which a cleared task
    submits anew) is recorded only when the cluster says nothing of the attempt runs and left no
    commit marker. A driver that ended with this attempt's commit marker (it finished while it
    was being stopped) records nothing and raises nothing here: the attempt's outcome step finds
    the marker and publishes the output. Otherwise the intent stays and nothing is recorded: the
    next attempt finds the driver by the id the intent holds (``airflow-jrs intents`` shows it)
    before it submits."""
    job_id = run.job_id
    ended = stop_cluster_driver(mode, spark_hook, namespace=run.store.namespace, job_id=job_id, app_id=app_id,
                                log=log, wait=CLUSTER_STOP_WAIT)  # fmt: skip
    outcome = ENDED if not mode.cluster else RUNS if not ended else driver_outcome(
        mode, spark_hook, namespace=run.store.namespace, job_id=job_id, fence=fence, staging=staging, app_id=app_id,
        log=log,
    )  # fmt: skip
    if outcome == COMMITTED:
        log.warning("Job %s: the %s driver %s finished with this attempt's commit marker before the %s took "
                    "effect: its output is published, not recorded CANCELED.", job_id, mode.name, app_id or "",
                    request.kind)  # fmt: skip
        return
    if outcome == RUNS:
        raise JobEndedOnRequestError(
            f"job {job_id}: {request.describe()}; spark-submit was terminated, but the {mode.name} driver "
            f"{app_id or '(id unknown)'} could not be confirmed ended, so nothing was recorded and the intent stays "
            "(`airflow-jrs intents` shows it). Make sure the driver ended (kill it in the cluster by that id), "
            "then clear the task: the next attempt looks for the driver before it submits.",
            job_id=job_id,
            fence=fence,
        ) from None
    record_ended_on_request(run, fence, request)
    raise JobEndedOnRequestError(
        f"job {job_id}: {request.describe()}; spark-submit was terminated"
        + (f" and the {mode.name} driver {app_id or ''} stopped" if mode.cluster else "")
        + " and CANCELED recorded (no retry: someone asked for it). Clear the task to run the job again.",
        job_id=job_id,
        fence=fence,
    ) from None


def stop_cluster_driver_on_kill(mode: DeployMode | None, spark_hook: Any, run: JobRun | None, log: Any) -> None:
    """``on_kill`` in a cluster deploy mode, *before* the supervisor is asked to end spark-submit:
    stop the driver through the deploy mode; when that cannot be done (no ResourceManager web
    address, no cluster API access), run the provider's own kill while spark-submit still lives
    (its ``yarn application -kill`` and driver pod deletion run only then). Never raises."""
    if mode is None or not mode.cluster or spark_hook is None or run is None:
        return
    try:
        app_id = mode.submission(spark_hook)[1]
    except Exception:
        app_id = None
    if stop_cluster_driver(mode, spark_hook, namespace=run.store.namespace, job_id=run.job_id, app_id=app_id, log=log):
        return
    log.warning("Job %s: falling back to the Spark provider's kill of the %s driver %s.", run.job_id, mode.name,
                app_id or "(id unknown)")  # fmt: skip
    try:
        spark_hook.on_kill()
    except Exception as exc:
        log.error(
            "Job %s: could not kill the %s driver %s (%s): it may still run; kill it in the cluster by that id "
            "(the intent stays, so the next attempt looks for it before it submits).",
            run.job_id, mode.name, app_id or "(id unknown)", exc,
        )  # fmt: skip
