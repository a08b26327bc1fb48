"""One attempt of a job, from the decision to the released lease, without Airflow.

Every way into Spark runs this one sequence (docs/architecture.md, "Invariants"); each step is one atomic
store call:

1. read the job's entry (one round trip) and :func:`~airflow_jrs.domain.decision.decide`; a
   SUCCEEDED result ends the attempt here, nothing is launched (unless a recompute request
   says this result is older than the request: :func:`airflow_jrs.domain.recompute.verdict`);
2. take the job's fenced lease (a holder provably dead, or an earlier try of this same task
   instance, is taken over at once: :mod:`.takeover`; any other live one is waited for within
   ``lease_wait_timeout``); read the entry again under the lease;
3. recover from a predecessor that died mid-flight (:mod:`.recovery`): wait for or stop its
   application, adopt its output when its commit marker says it finished, else launch anew;
4. record the intent (fenced; the spec goes to the state backend), then launch through the
   :class:`~.launcher.Launcher`, writing to a staging folder unique to the fence;
5. write the dirty SUCCEEDED result (fenced; drops the intent in the same script);
6. release the lease. Cleanup (:mod:`.cleanup`) later marks the result clean.

A killed attempt (:meth:`JobAttempt.kill`, from ``on_kill``) never succeeds: it stops the
application and revokes the lease on a connection of its own, so the fenced result write fails
even if :meth:`JobAttempt.run` carries on afterwards. A lost lease stops the application from
the renewer's thread the same way.

The Airflow operator (:class:`airflow_jrs.operators.JrsSparkSubmitOperator`) calls this with
its context turned into an :class:`~airflow_jrs.store.Attempt` and a spark-submit launcher; the
fault trials (:mod:`jrs_testbench.trials`) call it with a stand-in launcher in thousands of
processes, so what they prove is proved of this code.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from datetime import UTC, datetime
from typing import Any

from airflow_jrs.domain import recompute, signals
from airflow_jrs.domain.model import Actor, HistoryReason
from airflow_jrs.domain.paths import app_name, staging_path, stream_output_path
from airflow_jrs.domain.recompute import RequestSeen
from airflow_jrs.exceptions import (
    ApplicationFailedError,
    DriverMayStillRunError,
    JobKilledError,
    JobNotStartedError,
    LeaseHeldError,
)
from airflow_jrs.protocol import endings
from airflow_jrs.protocol.launcher import COMMITTED, RUNS, Ended, Launch, Launcher
from airflow_jrs.protocol.markers import committed_marker
from airflow_jrs.protocol.recovery import PREDECESSOR_POLICIES, recover
from airflow_jrs.protocol.run import JobRun, record_failure, succeeded_result
from airflow_jrs.protocol.steps import reached
from airflow_jrs.protocol.stopping import asked_to_end
from airflow_jrs.protocol.submission import SubmissionRecorder
from airflow_jrs.protocol.takeover import refusal, take_over_if_dead
from airflow_jrs.protocol.terms import ADOPTED, COMPUTED, SKIPPED, AttemptPolicy, JobSpec, Outcome
from airflow_jrs.spark.commit import read_commit_marker
from airflow_jrs.store import Attempt, JobResult, JobResultEntry
from airflow_jrs.store.intents import Intent, IntentStore
from airflow_jrs.store.leases.lease import JobLease
from airflow_jrs.store.namespace import JobNamespace


class JobAttempt:
    """One attempt of one job; :meth:`run` once, :meth:`kill` from anywhere at any time."""

    def __init__(
        self,
        jobs: JobNamespace,
        job: JobSpec,
        attempt: Attempt,
        launcher: Launcher,
        *,
        policy: AttemptPolicy | None = None,
        log: Any = None,
    ) -> None:
        self.jobs, self.job, self.attempt, self.launcher = jobs, job, attempt, launcher
        self.policy = policy or AttemptPolicy()
        if self.policy.predecessor not in PREDECESSOR_POLICIES:
            raise ValueError(
                f"predecessor must be one of {list(PREDECESSOR_POLICIES)}, got {self.policy.predecessor!r}"
            )
        self.log = log or logging.getLogger("airflow_jrs.protocol")
        #: set by kill() or a lost lease: this attempt must not launch or record a success
        self.killed = False
        #: True once this attempt holds the job's lease (from then on it fails closed)
        self.guarded = False
        self.lease: JobLease | None = None
        self.job_run: JobRun | None = None
        self.fence: int | None = None

    # -- the attempt ---------------------------------------------------------------------------
    def run(self) -> Outcome:
        """Decide, lease, recover or launch, record. Raises what the caller must report: a
        :class:`~airflow_jrs.exceptions.JrsError` subclass or the launcher's own failure. Once per
        attempt: a :meth:`kill` that came before it (the task was killed while preparing) holds."""
        store, job_id = self.jobs.results, self.job.job_id
        entry = store.get_entry(job_id)
        first_seen = self._first_seen()
        choice = self._choose(entry, first_seen)
        if choice.reuse and choice.decision.entry is not None:
            return self._skipped(choice.decision.entry, choice.decision.reason)
        self.log.info("Job %s: %s; taking the lease to run it.", job_id, choice.decision.reason)
        lease = self._acquire_lease()
        self.guarded = True
        reached("after_lease")
        try:
            # Someone may have finished the job between our read and our lease: read again.
            choice = self._choose(store.get_entry(job_id), first_seen)
            decision = choice.decision
            if choice.reuse and decision.entry is not None:
                return self._skipped(decision.entry, decision.reason + " (found under lease)")
            if choice.recompute and decision.entry is not None:
                store.forget_result(  # fenced: a holder whose lease was taken over forgets nothing
                    job_id, expected=decision.entry, fence=lease.check(), reason=HistoryReason.RECOMPUTED,
                    actor=Actor.task(self.attempt),
                )  # fmt: skip
                self.log.warning(
                    "Job %s: recomputing on request (DAG run conf %r); the result of run %s moved to the job's "
                    "history.", job_id, recompute.RECOMPUTE_KEY,
                    decision.entry.result.attempt.run_id if decision.entry.result.attempt else "?",
                )  # fmt: skip
            run = JobRun(
                self.jobs, store, self.jobs.intents, lease, job_id, self.job.fingerprint, self.attempt,
                decision.supersede, self.job.outputs,
            )  # fmt: skip
            self.job_run = run
            adopted = recover(run, launcher=self.launcher, predecessor=self.policy.predecessor, log=self.log)
            if adopted is not None:
                result, from_fence = adopted
                return Outcome(ADOPTED, job_id, result, adopted_from=from_fence, fence=lease.token)
            return self._launch(run)
        finally:
            self.lease = None
            try:
                lease.release()
            except Exception as exc:  # never mask the application's error or a written result
                self.log.warning("Job %s: could not release the lease (it expires by its TTL): %s", job_id, exc)

    def _skipped(self, entry: JobResultEntry, reason: str) -> Outcome:
        # The decision read a summary when the entry is a clean reference; what the task returns
        # (outputs, metrics, attempt) is in its result document: one read, and an error naming
        # the document when it is missing, never a result without its outputs.
        entry = self.jobs.results.full_entry(entry)
        self.log.info("%s (%s)", recompute.describe_reuse(entry.job_id, entry), reason)
        self._decided(signals.SKIPPED, reused=entry.result)
        return Outcome(SKIPPED, entry.job_id, entry.result, entry=entry, reason=reason)

    def _decided(self, decision: str, reused: JobResult | None = None) -> None:
        """Tell the namespace's signals (:mod:`.signals`: Airflow's metrics on a worker) what was decided."""
        jobs, a = self.jobs, self.attempt
        signals.tell(lambda: jobs.signals.decided(decision, dag_id=a.dag_id, task_id=a.task_id, reused=reused))

    def _first_seen(self) -> RequestSeen | None:
        """When this run first met its recompute request for the job (recorded now if this is the
        first time: before anything launches, so what the run computes is never older than it)."""
        request = self.policy.recompute
        if request is None or not request.names_job(self.attempt.task_id, self.job.job_id) or request.at is not None:
            return None
        return self.jobs.recompute_requests.first_seen(self.job.job_id, self.attempt.run_id)

    def _choose(self, entry: JobResultEntry | None, first_seen: RequestSeen | None) -> recompute.Choice:
        """The one policy (:func:`airflow_jrs.domain.recompute.choose`); says why a request that names
        the job does not act, with the way to recompute."""
        request = self.policy.recompute
        choice = recompute.choose(
            entry, self.job.fingerprint, accept_changed_fingerprint=self.policy.accept_changed_fingerprint,
            request=request, task_id=self.attempt.task_id, first_seen=first_seen,
        )  # fmt: skip
        if choice.reuse and choice.verdict is not None and choice.decision.entry is not None:
            job_id = choice.decision.entry.job_id
            if request is not None and request.names_job(self.attempt.task_id, job_id):
                self.log.info("Job %s: %s. %s", job_id, choice.verdict.reason, recompute.how_to_recompute(job_id))
        return choice

    def _acquire_lease(self) -> JobLease:
        policy, job_id = self.policy, self.job.job_id
        deadline = time.monotonic() + policy.lease_wait_timeout
        a = self.attempt
        while True:
            lease = self.jobs.lease(  # the task instance and try: a retry takes over from its own earlier try
                job_id, dag_id=a.dag_id, task_id=a.task_id, run_id=a.run_id, map_index=a.map_index,
                try_number=a.try_number,
            )  # fmt: skip
            lease.on_lost = self._on_lease_lost
            try:
                lease.acquire()
            except LeaseHeldError as exc:
                taken, waiting_for = take_over_if_dead(self.jobs, lease, self.log)
                if not taken:
                    if not waiting_for:  # the lease changed hands or went free meanwhile
                        continue
                    if time.monotonic() >= deadline:
                        message = refusal(job_id, waiting_for, try_number=a.try_number, retries=policy.retries,
                                          lease_wait_timeout=policy.lease_wait_timeout)  # fmt: skip
                        raise JobNotStartedError(message, job_id=job_id) from exc
                    self.log.info("Job %s: waiting for %s.", job_id, waiting_for)
                    time.sleep(min(policy.lease_poll, max(0.05, deadline - time.monotonic())))
                    continue
            self.lease = lease
            lease.start_renewal()
            return lease

    def _launch(self, run: JobRun) -> Outcome:
        launcher, intents, job_id = self.launcher, run.intents, run.job_id
        token = run.lease.check()
        self.fence = token
        namespace, root = self.jobs.namespace, self.jobs.settings.output_root
        # a stream resumes in one folder across attempts (its checkpoint), a batch job writes under its fence
        staging = stream_output_path(root, namespace, job_id) if launcher.streaming else staging_path(
            root, namespace, job_id, token
        )  # fmt: skip
        launch = Launch(run, token, staging, app_name(namespace, job_id, token))
        spec = launcher.prepare(launch)
        intent = Intent(
            job_id=job_id, fence=token, spec_uri=intents.spec_uri(job_id, token), staging=staging,
            app_name=launch.app_name, host=socket.gethostname(), pid=os.getpid(), started_at=time.time(),
            fingerprint=run.fingerprint, session_id=spec.get("session_id"),
        )  # fmt: skip
        intents.record(intent, {**spec, "fingerprint": run.fingerprint, "attempt": run.attempt.__dict__})
        reached("after_intent")
        started = datetime.now(UTC)
        if self.killed:  # kill() or a lost lease before the launch: there was no process to stop
            raise JobKilledError(
                f"job {job_id}: attempt was killed before the application was launched; nothing recorded",
                job_id=job_id,
                fence=token,
            )
        run.lease.check()
        self._decided(signals.LAUNCHED)
        recorder = SubmissionRecorder(intents, intent, launcher.submission, self.log)
        recorder.start()
        try:
            launcher.run(launch)
        except KeyboardInterrupt:
            self._interrupted()
            raise
        except BaseException as exc:
            if self._is_interrupt(exc):
                self._interrupted()
                raise
            self._after_failure(launch, recorder, exc)
        finally:
            recorder.stop()  # before a SUCCEEDED result (a failure path may write first: SET XX covers it)
        if self.killed:
            raise JobKilledError(
                f"job {job_id}: attempt was killed after the application finished; nothing recorded",
                job_id=job_id,
                fence=token,
            )
        reached("after_spark")
        token = run.lease.check()
        marker = None if launcher.streaming else read_commit_marker(staging)  # a stream commits per batch
        _, reported_id = launcher.submission()
        if launcher.cluster and not launcher.streaming and committed_marker(staging, job_id, token) is None:
            ended = Ended(*launcher.outcome(launch, recorder, failed=False))
            if ended.state == RUNS:
                raise DriverMayStillRunError(self._still_runs(ended), job_id=job_id, fence=token)
            if ended.state != COMMITTED:
                message = endings.missing_marker(job_id, launcher.name, staging, reported_id)
                record_failure(run, last_try=self.policy.last_try, log=self.log, error=message,
                               application_id=reported_id)  # fmt: skip
                raise ApplicationFailedError(message, job_id=job_id, fence=token)
            marker = read_commit_marker(staging)  # committed since
        result = succeeded_result(run, staging, marker, started=started, application_id=reported_id)
        result = launcher.finish(launch, result)  # may raise: a stream stopped on request records STOPPED
        run.store.create_dirty_result(result, fence=token, supersede=run.supersede)
        reached("after_result")
        IntentStore.delete_spec(intent.spec_uri)
        self.log.info("Job %s: SUCCEEDED, result written dirty (fence %s): %s", job_id, token, result.outputs)
        return Outcome(COMPUTED, job_id, result, fence=token)

    def _after_failure(self, launch: Launch, recorder: SubmissionRecorder, exc: BaseException) -> None:
        """The launch raised: find out what may be concluded, record it, raise."""
        launcher, run, token = self.launcher, launch.run, launch.fence
        if not self.killed and self._committed_before_the_end(launch):
            return  # its output is complete: published by the caller's success path
        if not self.killed:
            launcher.check_ended_on_request(launch, recorder)  # records and raises JobEndedOnRequestError
        if self.killed:
            raise JobKilledError(
                f"job {run.job_id}: attempt was killed; nothing recorded", job_id=run.job_id, fence=token
            ) from None
        ended = Ended(*launcher.outcome(launch, recorder, failed=True))
        if ended.state == RUNS:  # the intent stays: the next attempt finds the driver
            raise DriverMayStillRunError(self._still_runs(ended), job_id=run.job_id, fence=token) from exc
        if ended.state == COMMITTED:  # the driver finished its output: published by the caller's success path
            return
        summary, application_id = "the application failed", None
        try:  # never mask the application's own error
            failure = launcher.failure(exc)
            summary, application_id = endings.failure_message(failure), failure.application_id
        except Exception as error:
            self.log.warning("Job %s: could not summarise the failure: %s", run.job_id, error)
        self.log.error("Job %s: %s", run.job_id, summary)
        record_failure(run, last_try=self.policy.last_try, log=self.log, error=summary, application_id=application_id)
        raise exc

    def _committed_before_the_end(self, launch: Launch) -> bool:
        """Had the application written this attempt's commit marker when its launch failed or was
        ended (a stop or cancel that came as it finished, a non-zero exit after the marker)? The
        marker is written last, so the output is complete: it is published, whatever the exit
        code, never recorded CANCELED or FAILED and computed again (recovery adopts such output
        from a dead attempt by the same rule). A stream commits per batch: it has no marker."""
        if self.launcher.streaming:
            return False
        try:
            if committed_marker(launch.staging, launch.job_id, launch.fence) is None:
                return False
        except Exception as exc:  # never mask the launch's own failure
            self.log.warning("Job %s: could not read the commit marker in %s: %s", launch.job_id, launch.staging, exc)
            return False
        self.log.warning(
            endings.committed_before_the_end(launch.job_id, launch.staging, asked_to_end(launch.run, launch.fence))
        )
        return True

    def _still_runs(self, ended: Ended) -> str:
        launcher = self.launcher
        return endings.still_runs(self.job.job_id, launcher.name, cluster=launcher.cluster, ended=ended,
                                  last_try=self.policy.last_try)  # fmt: skip

    # -- kill ----------------------------------------------------------------------------------
    #: exception types that mean "the task is being interrupted" (the operator adds Airflow's)
    interrupts: tuple[type[BaseException], ...] = ()

    def _is_interrupt(self, exc: BaseException) -> bool:
        return isinstance(exc, self.interrupts)

    def _interrupted(self) -> None:
        """Interrupted inside the launch (a timeout): stop the application *before* the lease is
        released in :meth:`run`'s finally, so no successor ever runs beside it. The intent stays:
        the next attempt finds no commit marker and launches again."""
        self.killed = True
        self.launcher.kill(None, None, by="execution_timeout")

    def _on_lease_lost(self, lease: JobLease) -> None:
        self.log.error("Job %s: lease lost (fence %s); stopping the application.", lease.job_id, lease.token)
        self.killed = True
        self.launcher.stop()

    def kill(self) -> None:
        """Stop the application and revoke the lease so that no result can be written after this.

        Runs inside a signal handler on the thread that is executing: it must not raise and must
        not reuse a pooled connection the interrupted code may hold."""
        self.killed = True
        self.launcher.kill(self.job_run, self.fence)
        lease = self.lease
        if lease is not None and lease.token is not None:
            lease.revoke()
