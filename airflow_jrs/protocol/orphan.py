"""What is recorded when a stop or cancel ended an attempt whose task is gone (an orphan).

The supervisor (:mod:`airflow_jrs.launch.supervisor`) relays a stop or cancel to spark-submit.
When the task process is alive it records the outcome; when the task is gone (its worker was
SIGKILLed) nobody else would, so the supervisor calls :func:`record_orphan_outcome`, which
records STOPPED or CANCELED under the job's lease. Results are written by the protocol only:
the supervisor brings the facts (the request, its exit code, which ids name a cluster driver),
the rules here decide. What it must never do (docs/concepts/stop-and-cancel.md): take a
successor's lease (identities compared, not tokens: :class:`~airflow_jrs.spark.fence.Fence`'s ``==``),
replace a SUCCEEDED result, say "run again" while a cluster-mode driver may still run, or
record CANCELED over output that was completed and committed (the one marker rule:
:func:`~airflow_jrs.protocol.markers.committed_marker`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from airflow_jrs.protocol.markers import committed_marker
from airflow_jrs.protocol.stopping import record_unless_succeeded
from airflow_jrs.spark.control import STOPPED, read_outcome
from airflow_jrs.store import Attempt, JobResult, JobStatus
from airflow_jrs.store.intents import IntentStore
from airflow_jrs.store.recoveries import RECORDED, RecoveryStep
from airflow_jrs.store.stop_requests import StopRequest

if TYPE_CHECKING:
    from airflow_jrs.store.namespace import JobNamespace

#: How the caller says a line (the supervisor prints it on its stderr; it runs as ``__main__``).
Say = Callable[[str], None]


def record_orphan_outcome(
    jobs: JobNamespace,
    job_id: str,
    fence: int,
    request: StopRequest,
    control_dir: str | None,
    ttl: float,
    code: int,
    *,
    cluster_driver: Callable[[str | None], bool],
    say: Say,
) -> None:
    """Record STOPPED or CANCELED for an attempt whose task is gone (the supervisor's parent
    died), so that a stop or cancel always ends with a result. Never raises.

    The task process would have recorded it; with the task gone, nobody else will. The
    supervisor takes the job's lease for that: it takes over its own fence's lease (its holder,
    the task, is provably dead: it was the supervisor's parent) or acquires a free one; when a
    successor holds the lease, the successor decides and nothing is written here. The result
    supersedes only an unsuccessful entry (a SUCCEEDED one, of any fingerprint, stays: done is
    done) and drops the intent, under the new fence.

    It writes nothing, and leaves the intent to the next attempt's recovery, when

    * the intent names a **cluster-mode application** (``cluster_driver(id)``, the launch
      layer's fact: ``driver-...``, ``application_...``, a Kubernetes driver): ending
      spark-submit ended only the client, the driver may still run, and the supervisor does not
      know the deploy mode's cluster API to stop it or to ask whether it ended; the next
      attempt's recovery finds the driver by that id and stops or adopts it. CANCELED here would
      say "run again" while the driver runs: two drivers at once;
    * the staging folder holds **the commit marker of this job and fence**, whatever spark-submit's
      exit code (the request may have ended it after the application wrote the marker, which it
      writes last, while Spark was shutting down): the output is complete, the request came too
      late; recovery adopts it."""
    try:
        intent = jobs.intents.get(job_id)
        if intent is None or intent.fence != fence:
            return  # recorded already (the task wrote its result before it died) or another attempt's
        if cluster_driver(intent.application_id):
            say(
                f"job {job_id}: its {request.kind} ended spark-submit, but driver {intent.application_id} runs in "
                "the cluster and may still run; no result recorded, the intent stays: the next attempt's "
                f"recovery stops or adopts it (or kill {intent.application_id} in the cluster, then clear the task)"
            )
            return
        if _committed(intent.staging, job_id, fence, say):
            say(
                f"job {job_id}: the application wrote its commit marker in {intent.staging} before the "
                f"{request.kind} took effect (spark-submit exit code {code}); no result recorded, the intent stays: "
                "the next attempt adopts the output"
            )
            return
        outcome = read_outcome(control_dir, fence) if control_dir is not None else None
        stopped = outcome is not None and outcome.get("ended") == STOPPED
        lease = jobs.lease(job_id, ttl=ttl, role="supervisor", fence=fence)
        holder = lease.peek()
        if holder is not None and holder.fence != fence:  # identities: a token can repeat
            say(f"job {job_id}: fence {holder.fence.identity} holds the job now; it records the outcome")
            return
        token = lease.take_over(holder) if holder is not None else lease.acquire()
        if token is None:
            token = lease.acquire()
        try:
            attempt = None
            with contextlib.suppress(Exception):
                attempt = Attempt(**IntentStore.read_spec(intent.spec_uri)["attempt"])
            checkpoint = (outcome or {}).get("checkpoint_location")
            if checkpoint is None and control_dir is not None:  # <stream root>/{checkpoint,control}
                checkpoint = f"{control_dir.rstrip('/').rsplit('/', 1)[0]}/checkpoint"
            metrics = {} if outcome is None else {k: outcome.get(k) for k in ("last_batch_id", "boundary")}
            result = JobResult(
                job_id=job_id,
                status=JobStatus.STOPPED if stopped else JobStatus.CANCELED,
                application_id=(outcome or {}).get("application_id") or intent.application_id,
                outputs={"output": intent.staging},
                metrics=metrics,
                checkpoint_location=checkpoint,
                fingerprint=intent.fingerprint,
                attempt=attempt,
                error=f"{request.describe()}; the task was gone, so its supervisor recorded it (exit code {code})",
            )
            if not record_unless_succeeded(jobs.results, result, token):
                say(f"job {job_id}: a SUCCEEDED result is kept (done is done); {result.status.value} not recorded")
                return
            with contextlib.suppress(Exception):
                IntentStore.delete_spec(intent.spec_uri)
            say(f"job {job_id}: the task was gone; recorded {result.status.value} under fence {token}")
            _note_recorded(jobs, job_id, token, fence, result.status.value, request, code, say)
        finally:
            lease.release()
    except Exception as exc:  # a successor recovers from the intent, as after any crash
        say(f"job {job_id}: could not record the outcome of the {request.kind} ({exc}); a successor recovers it")


def _note_recorded(
    jobs: JobNamespace, job_id: str, token: int, fence: int, status: str, request: StopRequest, code: int, say: Say
) -> None:
    """Put the outcome in the job's recovery log (:mod:`airflow_jrs.store.recoveries`): the job page
    and ``show`` then say that the task was gone and who ended its spark-submit. Best effort."""
    step = RecoveryStep(
        RECORDED,
        f"the task of fence {int(fence)} was gone; its supervisor ended spark-submit ({request.describe()}, "
        f"exit code {code}) and recorded {status}",
        predecessor=int(fence),
        facts={"status": status, "kind": request.kind, "by": request.by, "exit_code": code},
    )
    try:
        jobs.recoveries.record(job_id, token, step)
    except Exception as exc:
        say(f"job {job_id}: could not record the outcome in the recovery log ({exc})")


def _committed(staging: str, job_id: str, fence: int, say: Say) -> bool:
    """Does ``staging`` hold the commit marker of this job and fence (the protocol's one rule,
    :func:`~airflow_jrs.protocol.markers.committed_marker`)? A marker that cannot be read counts
    as none here: recovery, not this process, quarantines and reports it."""
    try:
        return committed_marker(staging, job_id, fence) is not None
    except Exception as exc:
        say(f"job {job_id}: could not read the commit marker in {staging} ({exc})")
        return False
