"""One attempt of a job: what it carries from step to step, and the result it writes.

An attempt that runs (or recovers) a job holds the job's lease and talks to the store and
the intent under its fence; recovery (:mod:`.recovery`) and the attempt (:mod:`.attempt`)
both pass a :class:`JobRun` around and build the SUCCEEDED result the same way
(:func:`succeeded_result`), whether the application ran in this attempt or in a predecessor
whose finished output is adopted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_jrs.exceptions import JobResultEntryAlreadyExistsError
from airflow_jrs.store import Attempt, JobResult, JobResultEntry, JobResultStore, JobStatus
from airflow_jrs.store.intents import IntentStore
from airflow_jrs.store.leases.lease import JobLease
from airflow_jrs.store.results.base import UNSUCCESSFUL_ONLY

if TYPE_CHECKING:
    from airflow_jrs.store.namespace import JobNamespace

#: What the protocol stores as an application id: one token of an id's characters, never a path,
#: a ``namespace:pod`` reference or a log line. The exact shapes are the deploy modes'
#: (:mod:`airflow_jrs.launch.deploy_modes`, a layer above), which check what spark-submit
#: reported before it reaches the protocol; a commit marker is written by user code, in any mode.
_ID_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")


def id_token(value: object) -> str | None:
    """``value`` if it is one id-like token (:data:`_ID_TOKEN`), else ``None``."""
    return value if isinstance(value, str) and _ID_TOKEN.fullmatch(value) else None


@dataclass
class JobRun:
    """What one attempt that runs (or recovers) a job carries from step to step."""

    jobs: JobNamespace
    store: JobResultStore
    intents: IntentStore
    lease: JobLease
    job_id: str
    fingerprint: str
    attempt: Attempt
    supersede: bool
    #: logical output name -> sub-path of the staging folder ("" is the folder itself)
    outputs: Mapping[str, str]


def succeeded_result(
    run: JobRun,
    staging: str,
    marker: Mapping[str, Any] | None,
    *,
    started: datetime | None,
    application_id: str | None,
) -> JobResult:
    """The SUCCEEDED result of output in ``staging`` (its commit marker may add the
    application id and the application's metrics). An id is kept only if it is one token
    (:func:`id_token`): the marker is written by user code."""
    outputs = {name: (f"{staging}/{sub}".rstrip("/") if sub else staging) for name, sub in run.outputs.items()}
    metrics = (marker or {}).get("metrics") or {}
    return JobResult(
        job_id=run.job_id,
        status=JobStatus.SUCCEEDED,
        application_id=id_token((marker or {}).get("application_id")) or id_token(application_id),
        outputs=outputs,
        metrics=metrics if isinstance(metrics, dict) else {"value": metrics},
        fingerprint=run.fingerprint,
        start_time=started,
        end_time=datetime.now(UTC),
        attempt=run.attempt,
    )


def record_failure(
    run: JobRun,
    *,
    last_try: bool,
    log: Any,
    error: str = "spark-submit failed",
    application_id: str | None = None,
) -> None:
    """Spark failed: drop the intent; on the last try also record FAILED (sensors fail fast).

    ``error`` is what the on-call engineer reads first (``airflow-jrs show``, the UI): the exit
    code and the end of the application's error output (:func:`.endings.failure_message`).
    A FAILED result never makes a later attempt skip: the next one supersedes it. Never raises:
    Spark's own error is what the task reports.

    FAILED supersedes only an unsuccessful entry (:data:`~airflow_jrs.store.UNSUCCESSFUL_ONLY`,
    as a stop or cancel does), never a SUCCEEDED one of another fingerprint: a run of changed
    code that fails must not throw out the old code's committed result ("done is done"; a
    rollback to the old code would compute it again). The failure then stays visible where the
    user looks first, the task's log and its failed state, and the SUCCEEDED result stays the
    job's; the intent is dropped all the same (nothing of this attempt is left to recover)."""
    try:
        token = run.lease.check()
        if last_try:
            failed = JobResult(
                job_id=run.job_id, status=JobStatus.FAILED, fingerprint=run.fingerprint, attempt=run.attempt,
                end_time=datetime.now(UTC), error=error, application_id=application_id,
            )  # fmt: skip
            try:
                run.store.create_dirty_result(failed, fence=token, supersede=UNSUCCESSFUL_ONLY)
                return
            except JobResultEntryAlreadyExistsError:
                kept = run.store.get_entry(run.job_id)
                log.warning(
                    "Job %s: FAILED is not recorded: the job keeps its SUCCEEDED result%s (done is done: a "
                    "failed run of changed code never replaces it). This failure is in this log only; the "
                    "next run of this code computes the job again. To drop the old result on purpose, use "
                    "`airflow-jrs forget %s`.",
                    run.job_id, _describe_kept(kept), run.job_id,
                )  # fmt: skip
        run.intents.clear(run.job_id, token)
    except Exception as exc:
        log.warning("Job %s: could not record the failure: %s", run.job_id, exc)


def _describe_kept(entry: JobResultEntry | None) -> str:
    """`` (fingerprint ..., run ..., dirty)`` of the entry a failure did not replace."""
    if entry is None:
        return ""
    result = entry.result
    run_id = result.attempt.run_id if result.attempt else "?"
    fingerprint = (result.fingerprint or "none")[:12]
    return f" (fingerprint {fingerprint}, run {run_id}, {entry.state.value})"
