"""The attempt's side of the one stop path: who asked, and what is recorded when it ends so.

A stop or cancel of a running job (``airflow-jrs stop|cancel``, the Job results page, a
successor with ``predecessor="stop"``, ``on_kill``) goes to the job's control hash
(:mod:`airflow_jrs.store.stop_requests`); the supervisor beside the launched process relays it
(a stream's stop to its driver's control file, anything else as SIGTERM then SIGKILL). The
attempt that sees its launch end on such a request records CANCELED (who asked, when, why) and
fails without retries, instead of FAILED and a retry that would undo what was asked. Cluster
deploy modes stop their driver first (:mod:`airflow_jrs.launch.spark_stopping`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from airflow_jrs.exceptions import JobEndedOnRequestError, JobResultEntryAlreadyExistsError
from airflow_jrs.protocol.run import JobRun
from airflow_jrs.spark.control import CANCEL
from airflow_jrs.store import JobResult, JobStatus
from airflow_jrs.store.results.base import UNSUCCESSFUL_ONLY, JobResultStore
from airflow_jrs.store.stop_requests import StopRequest

#: Seconds ``on_kill`` lets the supervisor terminate the launched process (SIGTERM, then SIGKILL)
#: before it kills the supervisor itself.
ON_KILL_GRACE = 3.0


def asked_to_end(run: JobRun, fence: int) -> StopRequest | None:
    """The stop or cancel request for this attempt, if one was made (``None`` when unreadable)."""
    try:
        return run.jobs.stop_requests.get(run.job_id, fence)
    except Exception:
        return None


def record_ended_on_request(run: JobRun, fence: int, request: StopRequest) -> None:
    """CANCELED under this attempt's fence, naming who asked (it supersedes only an unsuccessful
    entry; drops the intent)."""
    result = JobResult(
        job_id=run.job_id,
        status=JobStatus.CANCELED,
        fingerprint=run.fingerprint,
        attempt=run.attempt,
        end_time=datetime.now(UTC),
        error=f"{request.describe()} at {datetime.fromtimestamp(request.at, UTC).isoformat()}; spark-submit "
        "was terminated (a batch job has no batch boundary to stop at)",
    )
    run.store.create_dirty_result(result, fence=fence, supersede=UNSUCCESSFUL_ONLY)


def record_unless_succeeded(results: JobResultStore, result: JobResult, fence: int) -> bool:
    """Write a STOPPED or CANCELED ``result`` under ``fence``, superseding only an unsuccessful
    entry; ``False`` when a SUCCEEDED result (of any fingerprint) is kept instead: done is done.
    The one write of an ending that was asked for, wherever it is noticed (a stream's stop or
    cancel in the task, the supervisor of a task that is gone: :mod:`.orphan`)."""
    try:
        results.create_dirty_result(result, fence=fence, supersede=UNSUCCESSFUL_ONLY)
    except JobResultEntryAlreadyExistsError:
        return False
    return True


def cancel_on_kill(run: JobRun | None, fence: int | None, alive: Callable[[], bool], log: Any) -> None:
    """``on_kill`` of a batch job: ask through the one path (so the request says who asked), let
    the supervisor terminate spark-submit within :data:`ON_KILL_GRACE`; the caller then kills
    whatever is left. On a connection of its own (a signal handler); never raises."""
    if run is None or fence is None or not alive():
        return
    try:
        jobs = run.jobs.fresh()
        try:
            asked = jobs.stop_requests.ask(run.job_id, fence, CANCEL, by="on_kill", reason="the task was killed")
        finally:
            jobs.close()
    except Exception as exc:
        log.warning("Job %s: could not record the cancel request: %s", run.job_id, exc)
        return
    deadline = time.monotonic() + ON_KILL_GRACE
    while asked is not None and alive() and time.monotonic() < deadline:
        time.sleep(0.1)


def end_on_request(run: JobRun, fence: int, request: StopRequest) -> None:
    """The launch ended on a stop or cancel request: record CANCELED and raise (no retry)."""
    record_ended_on_request(run, fence, request)
    raise JobEndedOnRequestError(
        f"job {run.job_id}: {request.describe()}; the application was terminated and CANCELED recorded (no "
        "retry: someone asked for it). Clear the task to run the job again.",
        job_id=run.job_id,
        fence=fence,
    ) from None
