"""JrsSparkSubmitOperator: the Spark provider's operator, guarded by the job result store.

One attempt, in order (each step is one atomic store call; see DESIGN.md section 3):

1. derive the job id and fingerprint; read the job's entry (one round trip) and
   :func:`~airflow_jrs.decision.decide`; a SUCCEEDED result ends the task here, no JVM;
2. take the job's fenced lease (a live holder: wait, bounded, then fail naming it);
3. recover from a predecessor that died mid-flight (its intent is still there): wait for
   its spark-submit if it still runs, adopt its output if its commit marker says it
   finished, else resubmit;
4. persist the spec and record the intent (fenced), then run spark-submit exactly as the
   parent class does, writing to a staging folder unique to the fencing token;
5. write the dirty SUCCEEDED result (fenced; drops the intent in the same script);
6. release the lease. Cleanup (``JrsCleanupOperator``) later marks the result clean.

Killed attempts (SIGTERM, mark-failed, execution_timeout) never succeed: ``on_kill`` kills
spark-submit and revokes the lease on its own connection, so the fenced result write fails
even if ``execute`` carries on afterwards (apache/airflow#73006); ``execute`` then raises.

``durable`` (the parent's ResumableJobMixin, on by default in Airflow 3.3) is forced off, and
``durable=True`` is refused with :class:`~airflow_jrs.exceptions.JrsConfigError`: its reattach
reads an id from the task's state store, not from the job's intent, so a retry under a new
fence would reattach to (or report "already succeeded" for) the previous fence's driver and we
would publish the new fence's empty folder. The intent does that job for every deploy mode:
it records the driver or application id under the fence that owns it, and the next attempt
waits for that driver and adopts its output (:mod:`.recovery`).

Cluster deploy modes (the driver runs in the cluster; see docs/recovery.md, "Deploy modes"):
whatever the parent's ``execute`` raises (a lost status poll, a master or ResourceManager
failover), the driver may still run, so the intent is kept unless the cluster says the driver
ended without a commit marker; and SUCCEEDED is recorded only for output whose commit marker
(:mod:`airflow_jrs.spark.commit`) names this job and fence. The master and deploy mode come
from the Spark connection and the operator's arguments (:mod:`.spark_target`), which also
refuses configurations that cannot be made safe.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import (
    AirflowException,
    AirflowFailException,
    AirflowSkipException,
    AirflowTaskTerminated,
    AirflowTaskTimeout,
)

from airflow_jrs import recompute
from airflow_jrs.decision import decide
from airflow_jrs.exceptions import JobKilledError, JrsConfigError, LeaseHeldError, StoreUnavailableError
from airflow_jrs.hooks.jrs import JrsHook
from airflow_jrs.hooks.store_failures import airflow_failures
from airflow_jrs.identity import application_fingerprint, default_job_id
from airflow_jrs.intent import Intent, IntentStore
from airflow_jrs.lease import JobLease
from airflow_jrs.operators import cluster_outcome as cluster
from airflow_jrs.operators.attempt import JobRun, attempt_from_context, record_failure, succeeded_result
from airflow_jrs.operators.cluster_outcome import committed_marker, missing_marker_message
from airflow_jrs.operators.deploy_mode_choice import deploy_mode_for
from airflow_jrs.operators.deploy_modes import DeployMode
from airflow_jrs.operators.links import JobResultLink, SparkApplicationLink
from airflow_jrs.operators.recovery import PREDECESSOR_POLICIES, recover
from airflow_jrs.operators.spark_target import SparkTarget, refuse_unsafe, resolve_target
from airflow_jrs.operators.steps import reached
from airflow_jrs.operators.stopping import asked_to_end, cancel_on_kill, end_on_request, stop_cluster_driver_on_kill
from airflow_jrs.operators.streaming import DEFAULT_STOP_TIMEOUT, StreamAttempt
from airflow_jrs.operators.streaming import prepare as prepare_stream
from airflow_jrs.operators.submission import OutputTail, SubmissionRecorder, Supervision, failure_summary
from airflow_jrs.operators.takeover import refusal, take_over_if_dead
from airflow_jrs.operators.unguarded import run_unguarded
from airflow_jrs.paths import app_name, job_tag, staging_path
from airflow_jrs.payload import SKIPPED_RESULT_KEY, entry_payload, result_payload
from airflow_jrs.spark.commit import read_commit_marker
from airflow_jrs.spark.conf import PLACEHOLDERS, fill_placeholders, job_conf
from airflow_jrs.store import Attempt, EntryState, JobResultEntry, JobStatus
from airflow_jrs.store.model import Actor, HistoryReason
from airflow_jrs.store.requests import RecomputeRequests, RequestSeen

__all__ = ["PLACEHOLDERS", "JrsSparkSubmitOperator"]


class JrsSparkSubmitOperator(SparkSubmitOperator):
    """Submit a Spark application once per job; later attempts reuse the stored result.

    :param job_id: the job's id (templated). Default: ``{dag_id}.{task_id}.{date or partition}``,
        stable across scheduled, backfill and cleared runs of one data interval.
    :param jrs_conn_id: the job result store connection (default ``[jrs] conn_id``, ``jrs_default``)
    :param jrs_namespace: overrides the connection's/config's namespace
    :param job_version: bump it to recompute although code and arguments are unchanged
    :param accept_changed_fingerprint: skip on any SUCCEEDED result, even for other code/arguments
    :param skip_when_done: raise ``AirflowSkipException`` instead of succeeding when skipping
    :param outputs: logical output name -> sub-path of the staging folder recorded in the result
        (default ``{"output": ""}``: the staging folder itself)
    :param output_root: where staging folders live (default ``[jrs] output_root``)
    :param lease_ttl: seconds (default ``[jrs] lease_ttl``)
    :param lease_wait_timeout: how long to wait for another attempt's lease before failing
    :param predecessor: what to do with a predecessor's spark-submit that still runs:
        ``"wait"`` (default: its work may finish and be adopted) or ``"stop"``
    :param streaming: a Structured Streaming application (:func:`airflow_jrs.spark.streaming_job`):
        its checkpoint and output are stable across attempts and runs of the job (resume, no
        rewind), ``on_kill`` stops it at a batch boundary before it cancels, and a stop or cancel
        records STOPPED or CANCELED (see :mod:`airflow_jrs.operators.streaming`, docs/streaming.md)
    :param stop_timeout: streaming only: seconds ``on_kill`` waits for the stop before it cancels;
        keep it below Airflow's ``[core] killed_task_cleanup_time``
    :param durable: must be left unset or ``False``: the parent's reattach-on-retry is replaced by
        the job's intent (module docstring); ``True`` raises :class:`~airflow_jrs.exceptions.JrsConfigError`

    ``application_args`` may use ``{jrs_output}``, ``{jrs_job_id}`` and ``{jrs_fence}``; the
    same values reach the application as Spark conf ``spark.jrs.output_dir``, ``spark.jrs.job_id``
    and ``spark.jrs.fence`` (see :mod:`airflow_jrs.spark`).
    """

    template_fields: Sequence[str] = (
        *SparkSubmitOperator.template_fields,
        "job_id",
        "job_version",
        "output_root",
        "outputs",
    )
    ui_color = "#fdd9b5"
    operator_extra_links = (JobResultLink(), SparkApplicationLink())

    def __init__(
        self,
        *,
        job_id: str | None = None,
        jrs_conn_id: str | None = None,
        jrs_namespace: str | None = None,
        job_version: str | None = None,
        accept_changed_fingerprint: bool = False,
        skip_when_done: bool = False,
        outputs: dict[str, str] | None = None,
        output_root: str | None = None,
        lease_ttl: float | None = None,
        lease_wait_timeout: float = 0.0,
        predecessor: str = "wait",
        streaming: bool = False,
        stop_timeout: float = DEFAULT_STOP_TIMEOUT,
        durable: bool | None = None,
        **kwargs: Any,
    ) -> None:
        if durable or kwargs.get("reconnect_on_retry"):
            raise JrsConfigError(
                f"{kwargs.get('task_id')}: JrsSparkSubmitOperator does not support durable=True (or "
                "reconnect_on_retry=True): the provider's reattach reads a driver id from the task's state, not "
                "from the job's intent, and could publish a new attempt's empty folder for a previous attempt's "
                "driver. Leave durable unset: the job's intent already makes a retry wait for, and adopt, a "
                "driver that still runs (docs/recovery.md, 'Deploy modes')."
            )
        kwargs.pop("reconnect_on_retry", None)
        super().__init__(durable=False, **kwargs)
        #: the Spark connection and deploy mode as the user gave them (not the hook's private copies)
        self.spark_conn_id: str = kwargs.get("conn_id", "spark_default")
        self.spark_deploy_mode: str | None = kwargs.get("deploy_mode")
        self._jrs_tracking = {
            "yarn_track_via_rm_api": bool(kwargs.get("yarn_track_via_rm_api", False)),
            "track_driver_via_k8s_api": bool(kwargs.get("track_driver_via_k8s_api", False)),
        }
        if predecessor not in PREDECESSOR_POLICIES:
            raise JrsConfigError(
                f"{self.task_id}: predecessor must be one of {list(PREDECESSOR_POLICIES)}, got {predecessor!r}"
            )
        self.job_id = job_id
        self.jrs_conn_id = jrs_conn_id
        self.jrs_namespace = jrs_namespace
        self.job_version = job_version
        self.accept_changed_fingerprint = accept_changed_fingerprint
        self.skip_when_done = skip_when_done
        self.outputs = outputs
        self.output_root = output_root
        self.lease_ttl = lease_ttl
        self.lease_wait_timeout = lease_wait_timeout
        self.predecessor = predecessor
        self.streaming = streaming
        self.stop_timeout = stop_timeout
        self._stream: StreamAttempt | None = None
        self._killed = False
        self._lease: JobLease | None = None

    # -- helpers ----------------------------------------------------------------------------
    def _jrs_hook(self) -> JrsHook:
        return JrsHook(
            self.jrs_conn_id,
            namespace=self.jrs_namespace,
            lease_ttl=self.lease_ttl,
            output_root=self.output_root,
        )

    def _done(self, context: Any, job_id: str, entry: JobResultEntry, reason: str) -> dict[str, Any]:
        self.log.info("%s (%s)", recompute.describe_reuse(job_id, entry), reason)
        payload = entry_payload(entry, skipped=True)
        if self.skip_when_done:
            context["ti"].xcom_push(key=SKIPPED_RESULT_KEY, value=payload)
            raise AirflowSkipException(f"job {job_id} already has a SUCCEEDED result ({entry.state.value})")
        return payload

    # -- the attempt --------------------------------------------------------------------------
    def execute(self, context: Any) -> dict[str, Any]:  # type: ignore[override]
        hook = self._jrs_hook()
        self._guarded = False  # True once this attempt holds the job's lease
        try:
            with airflow_failures(hook):  # one clear line; no retries for what needs a person
                return self._execute_guarded(context, hook)
        except StoreUnavailableError as exc:
            # Only before the lease: from then on the attempt always fails closed.
            if self._guarded or hook.settings.on_store_unavailable != "run":
                raise
            return run_unguarded(self, context, hook, exc)

    def _execute_guarded(self, context: Any, hook: JrsHook) -> dict[str, Any]:
        self._killed = False
        store = hook.get_store()
        job_id = self.job_id or default_job_id(context)
        self.job_id = job_id
        fp = application_fingerprint(self.application, self.application_args, self.job_version)
        decision = decide(store.get_entry(job_id), fp, accept_changed_fingerprint=self.accept_changed_fingerprint)
        request, first_seen = self._recompute_request(context, store, job_id)
        if decision.skip and decision.entry is not None and not self._recompute(request, first_seen, decision.entry):
            return self._done(context, job_id, decision.entry, decision.reason)
        self.log.info("Job %s: %s; taking the lease to run it.", job_id, decision.reason)

        attempt = attempt_from_context(context)
        lease = self._acquire_lease(hook, job_id, attempt)
        self._guarded = True
        reached("after_lease")
        try:
            # Someone may have finished the job between our read and our lease: read again.
            decision = decide(store.get_entry(job_id), fp, accept_changed_fingerprint=self.accept_changed_fingerprint)
            if decision.skip and decision.entry is not None:
                if not self._recompute(request, first_seen, decision.entry):
                    return self._done(context, job_id, decision.entry, decision.reason + " (found under lease)")
                store.forget_result(  # fenced: a holder whose lease was taken over forgets nothing
                    job_id, expected=decision.entry, fence=lease.check(), reason=HistoryReason.RECOMPUTED,
                    actor=Actor.task(attempt),
                )  # fmt: skip
                self.log.warning(
                    "Job %s: recomputing on request (DAG run conf %r); the result of run %s moved to the job's "
                    "history.", job_id, recompute.RECOMPUTE_KEY,
                    decision.entry.result.attempt.run_id if decision.entry.result.attempt else "?",
                )  # fmt: skip
            intents = IntentStore(hook.get_conn(), hook.namespace, hook.settings.spec_root)
            outputs = self.outputs or {"output": ""}
            run = JobRun(hook, store, intents, lease, job_id, fp, attempt, decision.supersede, outputs)
            adopted = recover(
                run, spark_hook=self._checked_spark_hook, predecessor=self.predecessor, log=self.log,
                mode=self._spark_target()[1],
            )  # fmt: skip
            if adopted is not None:
                return adopted
            return self._run(context, run)
        finally:
            self._lease = None
            try:
                lease.release()
            except Exception as exc:  # never mask Spark's error or a written result; the TTL frees it
                self.log.warning("Job %s: could not release the lease (it expires by its TTL): %s", job_id, exc)

    def _acquire_lease(self, hook: JrsHook, job_id: str, attempt: Attempt) -> JobLease:
        deadline = time.monotonic() + self.lease_wait_timeout
        while True:
            lease = hook.get_lease(
                job_id, dag_id=attempt.dag_id, task_id=attempt.task_id, run_id=attempt.run_id,
                try_number=attempt.try_number,
            )  # fmt: skip
            lease.on_lost = self._on_lease_lost
            try:
                lease.acquire()
            except LeaseHeldError as exc:
                taken, waiting_for = take_over_if_dead(hook, lease, self.log)
                if not taken:
                    if not waiting_for:  # the lease changed hands or went free meanwhile
                        continue
                    if time.monotonic() >= deadline:
                        raise AirflowException(
                            refusal(job_id, waiting_for, try_number=attempt.try_number,
                                    retries=int(self.retries or 0), lease_wait_timeout=self.lease_wait_timeout)
                        ) from exc  # fmt: skip
                    self.log.info("Job %s: waiting for %s.", job_id, waiting_for)
                    time.sleep(min(0.5, max(0.05, deadline - time.monotonic())))
                    continue
            self._lease = lease
            lease.start_renewal()
            return lease

    def _recompute_request(
        self, context: Any, store: Any, job_id: str
    ) -> tuple[recompute.Request | None, RequestSeen | None]:
        """The run's recompute request for this job, and when it first met the job (recorded
        now if this is the first time: before Spark can start, so what this run computes is
        never older than its request)."""
        request = recompute.read_request(context)
        if request is None or not request.names_job(self.task_id, job_id) or request.at is not None:
            return request, None
        return request, RecomputeRequests(store.client, store.namespace).first_seen(job_id, context["run_id"])

    def _recompute(
        self, request: recompute.Request | None, first_seen: RequestSeen | None, entry: JobResultEntry
    ) -> bool:
        """Recompute a done job because this run's conf asks for it (:func:`.recompute.verdict`)."""
        verdict = recompute.verdict(
            request, task_id=self.task_id, job_id=entry.job_id, entry=entry, first_seen=first_seen
        )
        if request is not None and request.names_job(self.task_id, entry.job_id) and not verdict.recompute:
            self.log.info("Job %s: %s. %s", entry.job_id, verdict.reason, recompute.how_to_recompute(entry.job_id))
        return verdict.recompute

    def _spark_target(self) -> tuple[SparkTarget, DeployMode]:
        """Where this attempt's Spark goes, from the connection and the operator's arguments (never
        the hook's private state); refuses what cannot be made safe (:mod:`.spark_target`)."""
        target = resolve_target(self.spark_conn_id, deploy_mode=self.spark_deploy_mode, conf=self.conf)
        refuse_unsafe(target, self.conf, task_id=self.task_id, **self._jrs_tracking)
        if getattr(self, "durable", False):  # set after construction (partial, a mutated task)
            raise JrsConfigError(f"{self.task_id}: durable=True is not supported (see the operator's docs)")
        return target, deploy_mode_for(target)

    def _get_hook(self) -> Any:
        """The provider's hook, prepared by this attempt's deploy mode (it may read spark-submit's output)."""
        hook = super()._get_hook()
        mode = getattr(self, "_jrs_deploy_mode", None)
        if mode is not None:
            mode.prepare(hook)
        supervision = getattr(self, "_jrs_supervision", None)
        if supervision is not None:
            supervision.wrap(hook)
        tail = getattr(self, "_jrs_output_tail", None)
        if tail is not None:
            tail.wrap(hook)
        return hook

    def _checked_spark_hook(self) -> Any:
        """The provider's SparkSubmitHook, for a Spark connection that exists (see above)."""
        self._spark_target()
        return self._get_hook()

    def _run(self, context: Any, run: JobRun) -> dict[str, Any]:
        hook, store, intents, lease, job_id, fp = (
            run.hook, run.store, run.intents, run.lease, run.job_id, run.fingerprint,
        )  # fmt: skip
        _, mode = self._spark_target()
        self._jrs_deploy_mode = mode
        token = lease.check()
        self._jrs_supervision = Supervision.for_attempt(hook, job_id, token, self.log)
        self._jrs_run, self._jrs_fence = run, token  # on_kill asks through the one stop path
        self._jrs_output_tail = OutputTail()
        staging = staging_path(hook.settings.output_root, hook.namespace, job_id, token)
        stream_paths = None
        if self.streaming:  # one checkpoint and output for every attempt: resume, never rewind
            stream_paths = prepare_stream(hook.settings.output_root, hook.namespace, job_id)
            staging = stream_paths.output
        name = app_name(hook.namespace, job_id, token)
        args = self.application_args = fill_placeholders(
            self.application_args, output=staging, job_id=job_id, fence=token
        )
        self.name = name
        user_conf = dict(self.conf or {})
        self.conf = {
            **user_conf,
            **job_conf(job_id=job_id, namespace=hook.namespace, fence=token, output_dir=staging),
            **mode.submission_conf(job_tag(hook.namespace, job_id), token, user_conf),
            **(stream_paths.conf() if stream_paths is not None else {}),
        }
        self._hook = None  # rebuilt by the parent from the settings above
        intent = Intent(
            job_id=job_id, fence=token, spec_uri=intents.spec_uri(job_id, token), staging=staging,
            app_name=name, host=socket.gethostname(), pid=os.getpid(), started_at=time.time(),
            fingerprint=fp,
        )  # fmt: skip
        spec = {
            "application": self.application,
            "application_args": args,
            "conf": self.conf,
            "fingerprint": fp,
            "attempt": run.attempt.__dict__,
            "spark_conn_id": self.spark_conn_id,
        }
        intents.record(intent, spec)
        reached("after_intent")
        started = datetime.now(UTC)
        if self._killed:  # on_kill or a lost lease before submit: on_kill had no process to stop
            raise JobKilledError(
                f"job {job_id}: attempt was killed before Spark was submitted; nothing recorded",
                job_id=job_id,
                fence=token,
            )
        lease.check()
        if stream_paths is not None:
            self._stream = StreamAttempt(
                run, stream_paths, token, self.stop_timeout, alive=self._spark_submit_alive, kill=self._stop_spark
            )
        recorder = SubmissionRecorder(intents, intent, lambda: self._hook, self.log, mode)
        recorder.start()
        try:
            super().execute(context)
        except (AirflowTaskTimeout, AirflowTaskTerminated, KeyboardInterrupt):
            # Killed inside execute (execution_timeout): stop Spark *before* the lease is
            # released in execute's finally, so no successor ever runs beside it. The intent
            # stays: the next attempt finds no commit marker and resubmits.
            self._killed = True
            if self._stream is not None:
                self._stream.stop_then_cancel(by="execution_timeout")
            self._stop_spark()
            raise
        except BaseException as exc:
            if self._stream is not None and not self._killed and self._stream.cancel_requested():
                self._stream.record(JobStatus.CANCELED, None, "canceled on request (airflow-jrs cancel)", fresh=False)
                raise AirflowFailException(
                    f"job {job_id}: streaming application canceled on request; recorded CANCELED. The next run "
                    "resumes from its checkpoint."
                ) from None
            if self._stream is None and not self._killed and (asked := asked_to_end(run, token)) is not None:
                app_id = cluster.recorded_app_id(mode, self._hook, recorder)  # its supervisor ended spark-submit
                end_on_request(run, token, asked, mode=mode, spark_hook=self._hook, staging=staging, app_id=app_id,
                               log=self.log)  # fmt: skip
            if self._killed:
                raise JobKilledError(
                    f"job {job_id}: attempt was killed; nothing recorded", job_id=job_id, fence=token
                ) from None
            outcome, app_id = self._cluster_outcome(mode, recorder, run, token, staging)
            if outcome == cluster.RUNS:  # the intent stays: the next attempt finds the driver (cluster_outcome)
                last_try = self._last_try(context)
                raise AirflowException(
                    cluster.driver_still_runs_message(job_id, mode, app_id, last_try=last_try)
                ) from exc
            if outcome != cluster.COMMITTED:  # COMMITTED: the driver finished its output; published below
                self._record_failure(context, run, exc)
                raise
        finally:
            recorder.stop()  # before a SUCCEEDED result (a failure path may write first: SET XX covers it)
        if self._killed:
            raise JobKilledError(
                f"job {job_id}: attempt was killed after Spark finished; nothing recorded", job_id=job_id, fence=token
            )
        reached("after_spark")
        token = lease.check()
        if self._stream is not None and (stopped := self._stream.stopped_outcome()) is not None:
            self._stream.record(JobStatus.STOPPED, stopped, "stopped on request (airflow-jrs stop)", fresh=False)
            raise AirflowFailException(
                f"job {job_id}: streaming application stopped on request at batch {stopped.get('last_batch_id')}; "
                "recorded STOPPED. The next run resumes from its checkpoint."
            )
        marker = None if self._stream is not None else read_commit_marker(staging)
        _, reported_id = mode.submission(self._hook)
        if mode.cluster and self._stream is None and committed_marker(staging, job_id, token) is None:
            outcome, app_id = self._cluster_outcome(mode, recorder, run, token, staging)
            if outcome == cluster.RUNS:
                last_try = self._last_try(context)
                raise AirflowException(cluster.driver_still_runs_message(job_id, mode, app_id, last_try=last_try))
            if outcome == cluster.ENDED:
                message = missing_marker_message(job_id, mode, staging, reported_id)
                last_try = self._last_try(context)
                record_failure(run, last_try=last_try, log=self.log, error=message, application_id=reported_id)
                raise AirflowException(message)
            marker = read_commit_marker(staging)  # committed since
        result = succeeded_result(run, staging, marker, started=started, application_id=reported_id)
        if self._stream is not None:
            result = self._stream.finished_result(result)
        store.create_dirty_result(result, fence=token, supersede=run.supersede)
        reached("after_result")
        IntentStore.delete_spec(intent.spec_uri)
        self.log.info("Job %s: SUCCEEDED, result written dirty (fence %s): %s", job_id, token, result.outputs)
        return result_payload(result, EntryState.DIRTY, skipped=False)

    def _cluster_outcome(self, mode: DeployMode, recorder: Any, run: JobRun, fence: int, staging: str) -> Any:
        return cluster.outcome_after_submit(mode, self._hook, recorder, namespace=run.store.namespace,
                                            job_id=run.job_id, fence=fence, staging=staging, log=self.log)  # fmt: skip

    def _last_try(self, context: Any) -> bool:
        return int(getattr(context["ti"], "try_number", 1) or 1) > int(self.retries or 0)

    def _record_failure(self, context: Any, run: JobRun, error: BaseException) -> None:
        """Say why Spark failed in the task log (every try) and in the FAILED result (last try)."""
        summary, application_id = "spark-submit failed", None
        try:  # never mask Spark's own error
            process = getattr(self._hook, "_submit_sp", None)
            exit_code = process.returncode if process is not None else None
            tail = self._jrs_output_tail
            _, application_id = self._jrs_deploy_mode.submission(self._hook) if self._hook else (None, None)
            application_id = application_id or tail.application_id
            summary = failure_summary(exit_code, application_id, tail.text(), error)
        except Exception as exc:
            self.log.warning("Job %s: could not summarise the failure: %s", run.job_id, exc)
        self.log.error("Job %s: %s", run.job_id, summary)
        last_try = self._last_try(context)
        record_failure(run, last_try=last_try, log=self.log, error=summary, application_id=application_id)

    # -- kill ---------------------------------------------------------------------------------
    def _spark_submit_alive(self) -> bool:
        process = getattr(self._hook, "_submit_sp", None) if self._hook is not None else None
        return process is not None and process.poll() is None

    def _stop_spark(self) -> None:
        if self._hook is None:
            return
        try:
            super().on_kill()
        except Exception as exc:
            self.log.warning("Could not stop spark-submit: %s", exc)

    def _on_lease_lost(self, lease: JobLease) -> None:
        self.log.error("Job %s: lease lost (fence %s); stopping Spark.", lease.job_id, lease.token)
        self._killed = True
        self._stop_spark()

    def on_kill(self) -> None:
        """Kill Spark and revoke the lease so that no result can be written after this point.

        Runs inside a signal handler on the thread that is executing: it must not raise
        (an exception would surface in ``execute`` before Spark is stopped) and must not
        reuse a pooled connection the interrupted code may hold."""
        self._killed = True
        if self._stream is not None:  # stop at a batch boundary, then cancel; records the outcome
            self._stream.stop_then_cancel(by="on_kill")
        else:  # a batch job: its driver in the cluster first, then its supervisor ends spark-submit
            stop_cluster_driver_on_kill(getattr(self, "_jrs_deploy_mode", None), self._hook,
                                        getattr(self, "_jrs_run", None), self.log)  # fmt: skip
            cancel_on_kill(getattr(self, "_jrs_run", None), getattr(self, "_jrs_fence", None),
                           self._spark_submit_alive, self.log)  # fmt: skip
        self._stop_spark()
        lease = self._lease
        if lease is not None and lease.token is not None:
            lease.revoke()
