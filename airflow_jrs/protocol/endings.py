"""What an attempt says when its launch ended without a SUCCEEDED result, worded from facts.

A launcher answers with facts (:class:`~.launcher.Ended`, :class:`~.launcher.Failure`: an
application id, whether it runs in a cluster, an exit code, the error); the protocol
(:mod:`.attempt`) words the message the task log, the exception and the FAILED result carry, so
that each case reads the same whichever launcher ran it.
"""

from __future__ import annotations

from airflow_jrs.protocol.launcher import Ended, Failure
from airflow_jrs.spark.commit import marker_path
from airflow_jrs.store.stop_requests import StopRequest


def still_runs(job_id: str, launcher: str, *, cluster: bool, ended: Ended, last_try: bool) -> str:
    """What the attempt says when something of its launch may still run: the intent stays,
    nothing is recorded (:class:`~airflow_jrs.exceptions.DriverMayStillRunError`)."""
    app_id = ended.application_id
    if ended.lingering is not None:
        return (
            f"job {job_id}: Spark tasks of the Spark Connect {app_id} may still run on the server: "
            f"{ended.lingering} Nothing was recorded and the intent stays: the next attempt waits for them (or "
            "interrupts them again) before it starts."
        )
    if not cluster:
        return f"job {job_id}: the application {app_id or ''} may still run; the intent stays"
    driver = f"the {launcher} driver {app_id or '(id unknown: see the intent)'}"
    if not last_try:
        return (
            f"job {job_id}: spark-submit ended but {driver} may still run: the intent stays and nothing is recorded; "
            "the next try finds the driver, waits for it (or stops it, predecessor='stop') and adopts its output "
            "if it commits."
        )
    return (
        f"job {job_id}: spark-submit ended but {driver} may still run, and this was the last try: the intent stays "
        "(`airflow-jrs intents` shows it) and nothing is recorded. Clear the task once the driver ended (the next "
        "attempt adopts its output if it commits), or kill it in the cluster by that id first."
    )


def missing_marker(job_id: str, launcher: str, staging: str, app_id: str | None) -> str:
    """What the task log and the FAILED result say when a cluster driver ended without a complete
    commit marker of this attempt."""
    return (
        f"job {job_id}: Spark reported the {launcher} application {app_id or '(id unknown)'} finished, but "
        f"its commit marker {marker_path(staging)} is missing or names another job or fence. In cluster "
        "deploy modes airflow-jrs records SUCCEEDED only for output with a complete marker: make the "
        "application call airflow_jrs.spark.write_commit_marker(...) (or commit_output) last. Nothing was "
        "recorded as succeeded."
    )


def committed_before_the_end(job_id: str, staging: str, request: StopRequest | None) -> str:
    """What the task log says when a launch failed or was ended after its application wrote this
    attempt's commit marker: the output is published, not thrown away."""
    ended = f"the {request.describe()} came" if request is not None else "the launch failed"
    return (
        f"job {job_id}: {ended} after the application wrote this attempt's commit marker "
        f"{marker_path(staging)}: its output is complete, so it is recorded SUCCEEDED rather than "
        f"{'CANCELED' if request is not None else 'FAILED'} and computed again."
    )


def failure_message(failure: Failure) -> str:
    """What the FAILED result records and the task log shows for a failed run."""
    if failure.output is not None:
        return failure_summary(failure.exit_code, failure.application_id, failure.output, failure.error,
                               process=failure.process or "the application")  # fmt: skip
    if failure.process is None:  # the error says what failed (a launcher's own exception)
        return str(failure.error)
    return f"{failure.process} failed: {failure.error}"


def failure_summary(
    exit_code: int | None, application_id: str | None, tail: str, error: BaseException, *, process: str = "spark-submit"
) -> str:
    """A failed process whose output was kept: exit code, application, the tail of its output."""
    if exit_code is None:  # it never ran, or the provider failed after it (no driver id, ...)
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        head = f"{process} failed: {first[:300]}"
    else:
        head = f"{process} exited with code {exit_code}"
    if application_id:
        head += f"; application {application_id}"
    if not tail:
        return head + "; it printed nothing besides Spark's INFO logging"
    return f"{head}; last lines of its output:\n{tail}"
