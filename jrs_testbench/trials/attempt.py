"""A simulated task attempt: the operator's protocol, step by step, on the real store, lease and
intent, with :mod:`.standin` in place of spark-submit.

It follows ``JrsSparkSubmitOperator.execute`` (read -> decide -> lease -> re-read under the lease
-> recover from a predecessor's intent -> record the intent -> launch -> fenced dirty result that
drops the intent -> release) so that thousands of trials test the *protocol* in seconds instead of
JVM starts. Where it differs, on purpose:

* no Airflow: the decision table is restated in :func:`_done` (SUCCEEDED for the same fingerprint
  skips), the intent's pid is amended once from a thread after a random delay (the operator's
  ``SubmissionRecorder`` polls every 0.25 s: same window in which a successor must scan);
* waits are shorter (lease poll 50 ms instead of 0.5 s, predecessor poll 50 ms instead of 1 s) to
  fit thousands of trials; the lease is the real :class:`~airflow_jrs.lease.JobLease` (TTL >= 1 s);
* a predecessor is found by scanning command lines for the operator's ``--conf spark.jrs.*``
  markers, as ``recovery.find_spark_submit_processes`` does, and also by the pid in its intent.

Kept faithfully, because faults must be able to find them: the order of the steps; ``on_lost``
only stops a stand-in that exists *at that moment* (the operator's ``_stop_spark`` finds no
``_submit_sp`` before ``Popen`` returns) and the main thread re-checks ``killed`` only before the
launch and after the stand-in ends; ``launch_latency`` stands for what happens between the last
lease check and ``Popen`` in the operator (building the Spark hook, resolving the connection).
``Protocol.launch_guard`` models a fix of that window (see :class:`Protocol`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace

import psutil
import redis as redis_lib

from airflow_jrs.exceptions import (
    JobResultEntryAlreadyExistsError,
    LeaseHeldError,
    LeaseLostError,
    StoreUnavailableError,
)
from airflow_jrs.intent import Intent, IntentStore
from airflow_jrs.lease import JobLease
from airflow_jrs.spark.commit import read_commit_marker
from airflow_jrs.store import Attempt, JobResult, JobResultEntry, JobStatus, RedisJobResultStore, scripts
from jrs_testbench.trials import standin
from jrs_testbench.trials.config import (
    CRASHED,
    DONE,
    NOT_DONE,
    STORE_DOWN,
    AttemptPlan,
    Bench,
    Protocol,
    unfenced_create_script,
)
from jrs_testbench.trials.history import HistoryLog
from jrs_testbench.trials.processes import alive, find_standins


class SimulatedAttempt:
    def __init__(self, bench: Bench, protocol: Protocol, plan: AttemptPlan) -> None:
        self.bench, self.protocol, self.plan = bench, protocol, plan
        self.rng = random.Random(plan.seed)
        self.log = HistoryLog(bench.log_path, trial=plan.trial, job=plan.job_id)
        if not protocol.fenced_result:
            scripts.CREATE_DIRTY_RESULT = unfenced_create_script()  # this process only
        self.client = redis_lib.Redis.from_url(bench.redis_url)
        self.store = RedisJobResultStore(self.client, bench.namespace)
        self.intents = IntentStore(self.client, bench.namespace, bench.spec_root)
        self.killed = False
        self.standin: subprocess.Popen[bytes] | None = None
        self._guard = threading.RLock()

    # -- the attempt ---------------------------------------------------------------------------
    def run(self) -> int:
        plan = self.plan
        self.log.log("attempt_start", index=plan.index, finisher=plan.finisher, predecessor=plan.predecessor)
        if _done(self.store.get_entry(plan.job_id), self.bench.fingerprint):
            self.log.log("skipped")
            return DONE
        lease = self._acquire()
        if lease is None:
            return NOT_DONE
        try:
            entry = self.store.get_entry(plan.job_id)
            self.log.log("reread", found=entry.result.status.value if entry else None)
            if _done(entry, self.bench.fingerprint):
                self.log.log("skipped_under_lease")
                return DONE
            supersede = entry is not None
            adopted = self._recover(lease, supersede)
            if adopted is not None:
                return adopted
            return self._submit(lease, supersede)
        finally:
            try:
                self.log.log("lease_released", released=lease.release())
            except Exception as exc:  # the TTL frees it
                self.log.log("lease_release_error", error=type(exc).__name__)

    def _acquire(self) -> JobLease | None:
        plan = self.plan
        deadline = time.monotonic() + plan.lease_wait
        owner = {"host": socket.gethostname(), "pid": os.getpid(), "trial": plan.trial, "attempt": plan.index}
        while True:
            lease = JobLease(
                self.client, self.bench.namespace, plan.job_id, ttl=self.protocol.lease_ttl, owner=owner,
                on_lost=self._on_lost,
            )  # fmt: skip
            try:
                token = lease.acquire()
            except LeaseHeldError:
                if time.monotonic() >= deadline:
                    self.log.log("lease_wait_timeout")
                    return None
                time.sleep(self.protocol.lease_poll)
                continue
            self.log.fence = token
            self.log.log("lease_acquired")
            lease.start_renewal()
            return lease

    def _recover(self, lease: JobLease, supersede: bool) -> int | None:
        """A predecessor's intent: never run beside its stand-in, never redo finished work."""
        job_id = self.plan.job_id
        stale = self.intents.get(job_id)
        if stale is None:
            return None
        self.log.log("recovering", from_fence=stale.fence, submit_pid=stale.submit_pid)
        found = find_standins(self.bench.namespace, job_id, stale.submit_pid)
        if found:
            pids = [p.pid for p in found]
            if self.plan.predecessor == "stop":
                for proc in found:
                    try:
                        proc.terminate()
                    except psutil.NoSuchProcess:
                        pass
                self.log.log("predecessor_stopped", pids=pids)
            self.log.log("predecessor_wait", pids=pids)
            while True:
                lease.check()
                found = [p for p in found if alive(p)]
                if not found:
                    break
                time.sleep(self.protocol.predecessor_poll)
            self.log.log("predecessor_gone")
        try:
            marker = read_commit_marker(stale.staging)
        except ValueError:
            self.log.log("marker_unreadable", from_fence=stale.fence)
            marker = None
        if marker is None or (stale.fingerprint and stale.fingerprint != self.bench.fingerprint):
            self.log.log("resubmit", from_fence=stale.fence)
            return None
        token = lease.check()
        result = self._result(stale.staging, marker)
        outcome = self._write(result, token, supersede, adopted_from=stale.fence)
        if outcome == DONE:
            IntentStore.delete_spec(stale.spec_uri)
        return outcome

    def _submit(self, lease: JobLease, supersede: bool) -> int:
        plan, bench = self.plan, self.bench
        token = lease.check()
        staging = bench.staging(plan.job_id, token)
        intent = Intent(
            job_id=plan.job_id, fence=token, spec_uri=self.intents.spec_uri(plan.job_id, token), staging=staging,
            app_name=f"jrs-{bench.namespace}-{plan.job_id}-f{token}", host=socket.gethostname(), pid=os.getpid(),
            started_at=time.time(), fingerprint=bench.fingerprint,
        )  # fmt: skip
        spec = {"application": "standin.py", "chunks": plan.chunks, "fingerprint": bench.fingerprint}
        try:
            self.intents.record(intent, spec)
        except LeaseLostError:
            self.log.log("intent_refused")
            return NOT_DONE
        self.log.log("intent_recorded", staging=staging)
        self._step("after_intent")
        if self.killed:
            self.log.log("killed_before_launch")
            return NOT_DONE
        lease.check()
        cmd = standin.command(
            python=sys.executable, job_id=plan.job_id, namespace=bench.namespace, fence=token, staging=staging,
            lock=bench.work_lock(plan.job_id), log=bench.log_path, trial=plan.trial, startup=plan.startup,
            chunks=plan.chunks, delay=plan.chunk_delay, fail=plan.fail_work,
        )  # fmt: skip
        time.sleep(self.rng.uniform(*self.protocol.launch_latency))
        if not self._launch(lease, cmd):
            return NOT_DONE
        assert self.standin is not None
        done = threading.Event()
        recorder = threading.Thread(target=self._record_submission, args=(intent, self.standin.pid, done), daemon=True)
        recorder.start()
        rc = self.standin.wait()
        done.set()
        recorder.join(timeout=5)
        self.log.log("standin_exit", rc=rc)
        if self.killed:
            self.log.log("killed_no_result")
            return NOT_DONE
        if rc != 0:
            self._record_failure(lease)
            return NOT_DONE
        token = lease.check()
        marker = read_commit_marker(staging)
        result = self._result(staging, marker)
        self._step("before_result")
        outcome = self._write(result, token, supersede)
        if outcome == DONE:
            IntentStore.delete_spec(intent.spec_uri)
        return outcome

    def _launch(self, lease: JobLease, cmd: list[str]) -> bool:
        if self.protocol.launch_guard:
            with self._guard:  # reentrant: a failed renew() calls _on_lost on this thread
                if self.killed or not lease.renew():
                    self.log.log("killed_before_launch", guarded=True)
                    return False
                self.log.log("launch")
                self.standin = subprocess.Popen(cmd)
                # Confirm: a stall between the renew above and Popen is noticed one round trip
                # after the launch (renew() -> on_lost stops the stand-in), before it can start.
                with contextlib.suppress(StoreUnavailableError):  # then the renewer decides
                    lease.renew()
        else:
            self.log.log("launch")  # before Popen: a lower bound of when the stand-in exists
            self.standin = subprocess.Popen(cmd)
        self.log.log("launched", standin_pid=self.standin.pid)
        return True

    def _record_submission(self, intent: Intent, pid: int, done: threading.Event) -> None:
        """The operator's SubmissionRecorder: amend the intent with the pid, a little later."""
        if done.wait(self.rng.uniform(0.0, 0.25)):
            return
        try:
            amended = self.intents.amend(replace(intent, submit_pid=pid))
            self.log.log("intent_amended", amended=amended)
        except LeaseLostError:
            return
        except Exception as exc:  # best effort, as in the operator
            self.log.log("intent_amend_error", error=type(exc).__name__)

    def _record_failure(self, lease: JobLease) -> None:
        """Spark failed: drop the intent, or on the last try record FAILED (fenced either way)."""
        try:
            token = lease.check()
            if self.plan.last_try:
                failed = JobResult(
                    job_id=self.plan.job_id, status=JobStatus.FAILED, fingerprint=self.bench.fingerprint,
                    error="stand-in failed", attempt=self._attempt(),
                )  # fmt: skip
                self.log.log("result_write_begin", status="FAILED")
                self.store.create_dirty_result(failed, fence=token, supersede=True)
                self.log.log("result_written", status="FAILED")
            else:
                self.intents.clear(self.plan.job_id, token)
                self.log.log("intent_cleared")
        except Exception as exc:
            self.log.log("failure_not_recorded", error=type(exc).__name__)

    def _result(self, staging: str, marker: dict | None) -> JobResult:
        metrics = (marker or {}).get("metrics") or {}
        return JobResult(
            job_id=self.plan.job_id,
            status=JobStatus.SUCCEEDED,
            application_id=(marker or {}).get("application_id"),
            outputs={"output": staging},
            metrics=metrics if isinstance(metrics, dict) else {"value": metrics},
            fingerprint=self.bench.fingerprint,
            attempt=self._attempt(),
        )

    def _attempt(self) -> Attempt:
        return Attempt(dag_id="trials", task_id="submit", run_id=f"trial-{self.plan.trial}", try_number=self.plan.index)

    def _write(self, result: JobResult, token: int, supersede: bool, adopted_from: int | None = None) -> int:
        extra = {} if adopted_from is None else {"adopted_from": adopted_from}
        self.log.log("result_write_begin", status=result.status.value, staging=result.outputs["output"], **extra)
        try:
            self.store.create_dirty_result(result, fence=token, supersede=supersede)
        except LeaseLostError:
            self.log.log("result_refused", reason="LeaseLost")
            return NOT_DONE
        except JobResultEntryAlreadyExistsError:
            self.log.log("result_refused", reason="exists")
            return NOT_DONE
        self.log.log("result_written", status=result.status.value, staging=result.outputs["output"], **extra)
        if adopted_from is not None:
            self.log.log("adopted", from_fence=adopted_from)
        return DONE

    def _step(self, step: str) -> None:
        """A pause the runner resumes once the lease is gone: a stall at an exact step."""
        if self.plan.pause_at == step:
            self.log.log("paused", step=step)
            os.kill(os.getpid(), signal.SIGSTOP)
            self.log.log("resumed", step=step)

    # -- kill ----------------------------------------------------------------------------------
    def _on_lost(self, lease: JobLease) -> None:
        """The operator's ``_on_lease_lost``: stop the stand-in *if it exists now*."""
        self.log.log("lease_lost")
        if self.protocol.launch_guard:
            with self._guard:
                self.killed = True
                self._stop_standin()
        else:
            self.killed = True
            self._stop_standin()

    def _stop_standin(self) -> None:
        proc = self.standin
        if proc is not None and proc.poll() is None:
            proc.kill()
            self.log.log("standin_stopped", standin_pid=proc.pid)


def _done(entry: JobResultEntry | None, fingerprint: str) -> bool:
    """The decision table's skip rows: a SUCCEEDED result for the same fingerprint is final."""
    if entry is None or entry.result.status is not JobStatus.SUCCEEDED:
        return False
    return entry.result.fingerprint in (None, fingerprint)


def run_attempt(bench: Bench, protocol: Protocol, plan: AttemptPlan) -> int:
    """Body of a forked attempt process; returns its exit code (never raises)."""
    logging.getLogger("airflow_jrs").setLevel(logging.CRITICAL)  # the history log says it all
    attempt = None
    try:
        attempt = SimulatedAttempt(bench, protocol, plan)
        code = attempt.run()
        attempt.log.log("attempt_end", code=code)
        return code
    except StoreUnavailableError:
        if attempt is not None:
            attempt.log.log("attempt_end", code=STORE_DOWN, error="StoreUnavailableError")
        return STORE_DOWN
    except LeaseLostError:
        if attempt is not None:
            attempt.log.log("attempt_end", code=NOT_DONE, error="LeaseLostError")
        return NOT_DONE
    except BaseException as exc:
        if attempt is not None:
            attempt.log.log("attempt_end", code=CRASHED, error=f"{type(exc).__name__}: {exc}"[:300])
        return CRASHED
