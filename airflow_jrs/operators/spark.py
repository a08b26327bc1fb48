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

``durable`` (the parent's ResumableJobMixin) is left as it is: it reattaches *within one task
instance* in cluster deploy modes and runs inside our lease, so it never submits a second
copy; the lease, intent and result store cover what it does not: other runs of the same
date, local/client mode, and the crash window between submit and its state write.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import redis as redis_lib
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import (
    AirflowException,
    AirflowSkipException,
    AirflowTaskTerminated,
    AirflowTaskTimeout,
)

from airflow_jrs.decision import decide
from airflow_jrs.exceptions import JobKilledError, JrsConfigError, LeaseHeldError
from airflow_jrs.faults import crash_point
from airflow_jrs.hooks.jrs import JrsHook
from airflow_jrs.intent import Intent, IntentStore
from airflow_jrs.lease import JobLease
from airflow_jrs.operators.identity import application_fingerprint, default_job_id
from airflow_jrs.operators.recovery import SubmissionRecorder, find_predecessors, job_tag, wait_for
from airflow_jrs.spark.commit import read_commit_marker
from airflow_jrs.store import Attempt, JobResult, JobResultEntry, JobStatus, RedisJobResultStore, scripts
from airflow_jrs.store.serde import result_to_dict


@dataclass
class _JobRun:
    """What one attempt that runs (or recovers) a job carries from step to step."""

    hook: JrsHook
    store: RedisJobResultStore
    intents: IntentStore
    lease: JobLease
    job_id: str
    fingerprint: str
    attempt: Attempt
    supersede: bool


#: Placeholders replaced in ``application_args`` at run time (single braces survive Jinja).
PLACEHOLDERS = ("{jrs_output}", "{jrs_job_id}", "{jrs_fence}")


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
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if predecessor not in ("wait", "stop"):
            raise ValueError(f"predecessor must be 'wait' or 'stop', got {predecessor!r}")
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

    def _attempt(self, context: Any) -> Attempt:
        ti = context["ti"]
        return Attempt(
            dag_id=ti.dag_id,
            task_id=ti.task_id,
            run_id=context["run_id"],
            try_number=int(getattr(ti, "try_number", 0) or 0),
            map_index=int(getattr(ti, "map_index", -1) if getattr(ti, "map_index", -1) is not None else -1),
        )

    def _done(self, context: Any, job_id: str, entry: JobResultEntry, reason: str) -> dict[str, Any]:
        self.log.info("Job %s: %s; Spark is not started.", job_id, reason)
        payload = {**result_to_dict(entry.result), "state": entry.state.value, "skipped": True}
        if self.skip_when_done:
            context["ti"].xcom_push(key="jrs_result", value=payload)
            raise AirflowSkipException(f"job {job_id} already has a SUCCEEDED result ({entry.state.value})")
        return payload

    # -- the attempt --------------------------------------------------------------------------
    def execute(self, context: Any) -> dict[str, Any]:  # type: ignore[override]
        self._killed = False
        hook = self._jrs_hook()
        store = hook.get_store()
        job_id = self.job_id or default_job_id(context)
        self.job_id = job_id
        fp = application_fingerprint(self.application, self.application_args, self.job_version)
        decision = decide(store.get_entry(job_id), fp, accept_changed_fingerprint=self.accept_changed_fingerprint)
        if decision.skip and decision.entry is not None:
            return self._done(context, job_id, decision.entry, decision.reason)
        self.log.info("Job %s: %s; taking the lease to run it.", job_id, decision.reason)

        attempt = self._attempt(context)
        lease = self._acquire_lease(hook, job_id, attempt)
        crash_point("after_lease")
        try:
            # Someone may have finished the job between our read and our lease: read again.
            decision = decide(store.get_entry(job_id), fp, accept_changed_fingerprint=self.accept_changed_fingerprint)
            if decision.skip and decision.entry is not None:
                return self._done(context, job_id, decision.entry, decision.reason + " (found under lease)")
            intents = IntentStore(hook.get_conn(), hook.namespace, hook.settings.spec_root)
            run = _JobRun(hook, store, intents, lease, job_id, fp, attempt, decision.supersede)
            adopted = self._recover(run)
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
                if time.monotonic() >= deadline:
                    raise AirflowException(
                        f"{exc} Airflow will retry this task; raise lease_wait_timeout to wait longer."
                    ) from exc
                time.sleep(min(0.5, max(0.05, deadline - time.monotonic())))
                continue
            self._lease = lease
            lease.start_renewal()
            return lease

    def _require_spark_connection(self) -> None:
        """The Spark hook turns an unknown connection into ``yarn`` silently; we refuse instead."""
        try:
            BaseHook.get_connection(self._conn_id)
        except Exception as exc:
            raise JrsConfigError(
                f"Spark connection {self._conn_id!r} is not defined (the Spark provider would silently "
                "submit to yarn). Define it, e.g. "
                f'AIRFLOW_CONN_{self._conn_id.upper()}=\'{{"conn_type": "spark", "host": "local[2]"}}\''
            ) from exc

    def _staging(self, hook: JrsHook, job_id: str, fence: int) -> str:
        root = hook.settings.output_root.rstrip("/")
        return f"{root}/{hook.namespace}/{job_id.replace('/', '_')}/fence-{fence}"

    def _app_name(self, namespace: str, job_id: str, fence: int) -> str:
        return f"jrs-{namespace}-{job_id}-f{fence}"

    def _recover(self, run: _JobRun) -> dict[str, Any] | None:
        """A predecessor's intent means it died mid-flight: never run beside it, never redo its work."""
        store, intents, lease, job_id, fp = run.store, run.intents, run.lease, run.job_id, run.fingerprint
        stale = intents.get(job_id)
        if stale is None:
            return None
        self.log.warning(
            "Job %s: attempt with fence %s (pid %s on %s; spark-submit pid %s, application %s) left an "
            "intent; recovering.",
            job_id, stale.fence, stale.pid, stale.host, stale.submit_pid, stale.application_id,
        )  # fmt: skip
        self._require_spark_connection()
        predecessors = find_predecessors(self._get_hook(), store.namespace, job_id)
        if predecessors:
            names = [p.description for p in predecessors]
            if self.predecessor == "stop":
                self.log.warning("Stopping the predecessor's application: %s", names)
                for p in predecessors:
                    p.stop()
            else:
                self.log.warning("Waiting for the predecessor's application to end: %s", names)
            wait_for(predecessors, check=lease.check)
        elif stale.host != socket.gethostname() and stale.application_id is None:
            # Local and client mode: a spark-submit on another worker cannot be seen from here.
            # Its output stays in its own fence's staging and is never published, but it may
            # still be computing: say where, so the engineer on call can stop it.
            self.log.warning(
                "Job %s: the predecessor ran on host %s (spark-submit pid %s), which cannot be checked "
                "from %s; if it still runs there, stop it (its output will never be published).",
                job_id, stale.host, stale.submit_pid, socket.gethostname(),
            )  # fmt: skip
        try:
            marker = read_commit_marker(stale.staging)
        except ValueError as exc:  # half-written marker: the output cannot be trusted
            self.log.warning("Job %s: predecessor's commit marker is unreadable (%s); recomputing.", job_id, exc)
            marker = None
        if marker is None or (stale.fingerprint and stale.fingerprint != fp):
            self.log.info("Job %s: predecessor left no complete output; resubmitting.", job_id)
            return None
        token = lease.check()
        result = self._result(run, stale.staging, marker, None)
        store.create_dirty_result(result, fence=token, supersede=run.supersede)
        IntentStore.delete_spec(stale.spec_uri)
        self.log.info("Job %s: adopted the finished output of fence %s without re-running.", job_id, stale.fence)
        return {**result_to_dict(result), "state": "dirty", "skipped": False, "adopted_from": stale.fence}

    def _result(self, run: _JobRun, staging: str, marker: dict[str, Any] | None, started: datetime | None) -> JobResult:
        outputs = {
            name: (f"{staging}/{sub}".rstrip("/") if sub else staging)
            for name, sub in (self.outputs or {"output": ""}).items()
        }
        hook = self._hook
        app_id = (marker or {}).get("application_id") or (
            getattr(hook, "_yarn_application_id", None) or getattr(hook, "_driver_id", None) if hook else None
        )
        metrics = (marker or {}).get("metrics") or {}
        return JobResult(
            job_id=run.job_id,
            status=JobStatus.SUCCEEDED,
            application_id=app_id,
            outputs=outputs,
            metrics=metrics if isinstance(metrics, dict) else {"value": metrics},
            fingerprint=run.fingerprint,
            start_time=started,
            end_time=datetime.now(UTC),
            attempt=run.attempt,
        )

    def _run(self, context: Any, run: _JobRun) -> dict[str, Any]:
        hook, store, intents, lease, job_id, fp = (
            run.hook, run.store, run.intents, run.lease, run.job_id, run.fingerprint,
        )  # fmt: skip
        self._require_spark_connection()
        token = lease.check()
        staging = self._staging(hook, job_id, token)
        app_name = self._app_name(hook.namespace, job_id, token)
        tag = job_tag(hook.namespace, job_id)
        values = {"{jrs_output}": staging, "{jrs_job_id}": job_id, "{jrs_fence}": str(token)}
        args = list(self.application_args or [])
        for i, arg in enumerate(args):
            if isinstance(arg, str):
                for placeholder, value in values.items():
                    arg = arg.replace(placeholder, value)
                args[i] = arg
        self.application_args = args
        self.name = app_name
        user_tags = (self.conf or {}).get("spark.yarn.tags")
        self.conf = {
            **(self.conf or {}),
            "spark.jrs.job_id": job_id,
            "spark.jrs.namespace": hook.namespace,
            "spark.jrs.fence": str(token),
            "spark.jrs.output_dir": staging,
            "spark.yarn.tags": ",".join(filter(None, [user_tags, f"jrs-{tag}", f"jrs-fence-{token}"])),
            "spark.kubernetes.driver.label.jrs-job": tag,
            "spark.kubernetes.driver.label.jrs-fence": str(token),
        }
        self._hook = None  # rebuilt by the parent from the settings above
        intent = Intent(
            job_id=job_id, fence=token, spec_uri=intents.spec_uri(job_id, token), staging=staging,
            app_name=app_name, host=socket.gethostname(), pid=os.getpid(), started_at=time.time(),
            fingerprint=fp,
        )  # fmt: skip
        spec = {
            "application": self.application,
            "application_args": args,
            "conf": self.conf,
            "fingerprint": fp,
            "attempt": run.attempt.__dict__,
            "spark_conn_id": self._conn_id,
        }
        intents.record(intent, spec)
        crash_point("after_intent")
        started = datetime.now(UTC)
        if self._killed:  # on_kill or a lost lease before submit: on_kill had no process to stop
            raise JobKilledError(f"job {job_id}: attempt was killed before Spark was submitted; nothing recorded")
        lease.check()
        recorder = SubmissionRecorder(intents, intent, lambda: self._hook, self.log)
        recorder.start()
        try:
            super().execute(context)
        except (AirflowTaskTimeout, AirflowTaskTerminated, KeyboardInterrupt):
            # Killed inside execute (execution_timeout): stop Spark *before* the lease is
            # released in execute's finally, so no successor ever runs beside it. The intent
            # stays: the next attempt finds no commit marker and resubmits.
            self._killed = True
            self._stop_spark()
            raise
        except BaseException:
            if self._killed:
                raise JobKilledError(f"job {job_id}: attempt was killed; nothing recorded") from None
            self._record_failure(context, run)
            raise
        finally:
            recorder.stop()  # before a SUCCEEDED result (a failure path may write first: SET XX covers it)
        if self._killed:
            raise JobKilledError(f"job {job_id}: attempt was killed after Spark finished; nothing recorded")
        crash_point("after_spark")
        token = lease.check()
        marker = read_commit_marker(staging)
        result = self._result(run, staging, marker, started)
        store.create_dirty_result(result, fence=token, supersede=run.supersede)
        crash_point("after_result")
        IntentStore.delete_spec(intent.spec_uri)
        self.log.info("Job %s: SUCCEEDED, result written dirty (fence %s): %s", job_id, token, result.outputs)
        return {**result_to_dict(result), "state": "dirty", "skipped": False}

    def _record_failure(self, context: Any, run: _JobRun) -> None:
        """Spark failed: drop the intent; on the last try also record FAILED (sensors fail fast).

        A FAILED result never makes a later attempt skip: the next one supersedes it."""
        job_id = run.job_id
        try:
            token = run.lease.check()
            ti = context["ti"]
            last_try = int(getattr(ti, "try_number", 1) or 1) > int(self.retries or 0)
            if last_try:
                failed = JobResult(
                    job_id=job_id, status=JobStatus.FAILED, fingerprint=run.fingerprint, attempt=run.attempt,
                    end_time=datetime.now(UTC), error="spark-submit failed",
                )  # fmt: skip
                run.store.create_dirty_result(failed, fence=token, supersede=True)
            else:
                run.intents.clear(job_id, token)
        except Exception as exc:  # never mask Spark's own error
            self.log.warning("Job %s: could not record the failure: %s", job_id, exc)

    # -- kill ---------------------------------------------------------------------------------
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
        self._stop_spark()
        lease = self._lease
        if lease is None or lease.token is None:
            return
        try:
            lease.stop_renewal()
            pool = lease.client.connection_pool
            fresh = pool.__class__(connection_class=pool.connection_class, **pool.connection_kwargs)
            client = redis_lib.Redis(connection_pool=fresh)
            try:
                client.eval(scripts.RELEASE_LEASE, 1, lease.keys.lease(lease.job_id), lease.token)
            finally:
                client.close()
                fresh.disconnect()
        except Exception as exc:
            self.log.warning("Could not revoke the lease of job %s: %s", lease.job_id, exc)
