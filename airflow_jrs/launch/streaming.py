"""The launcher's side of a streaming job (FLIP-45): stable locations, stop-then-cancel, STOPPED/CANCELED.

``JrsSparkSubmitOperator(streaming=True, stop_timeout=...)`` wraps its spark-submit launcher in a
:class:`StreamingLauncher`, which adds a stream's four points to the launch it wraps:

1. before submit (:func:`prepare`): the stream's folders are per job, not per fence
   (:func:`airflow_jrs.domain.paths.stream_root`), so every attempt and every run of the job resumes
   from the same checkpoint and appends to the same exactly-once file sink; a request left by
   an earlier attempt is dropped;
2. when spark-submit ended well (:meth:`StreamAttempt.result_after_exit`): the driver's
   ``ended-fence-N-<nonce>.json`` says ``finished`` (SUCCEEDED, with the checkpoint) or ``stopped``
   (STOPPED: recorded, and the task fails without retries: someone asked for the stop);
3. when spark-submit failed: a cancel requested for this fence records CANCELED (not FAILED);
4. ``on_kill`` / ``execution_timeout`` (:meth:`StreamAttempt.stop_then_cancel`): request a
   stop through the one stop path (:mod:`airflow_jrs.store.stop_requests`: the supervisor
   forwards it to the driver), wait up to ``stop_timeout`` for spark-submit to exit, then
   cancel (request + kill);
   a second kill while the stop waits cancels at once. The outcome is recorded (STOPPED when
   the driver confirmed the stop, else CANCELED) under the attempt's fence on a fresh
   connection, before the lease is revoked; the task still fails (invariant 5).

Neither STOPPED nor CANCELED is a success: the decision table runs the job again and the new
result supersedes them (they stay in the job's history).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_jrs.domain.paths import checkpoint_path, control_path, stream_output_path
from airflow_jrs.exceptions import JobEndedOnRequestError
from airflow_jrs.protocol.launcher import Ended, Failure, Launch, Launcher, Predecessor
from airflow_jrs.protocol.run import JobRun
from airflow_jrs.protocol.stopping import record_unless_succeeded
from airflow_jrs.spark.conf import streaming_conf
from airflow_jrs.spark.control import CANCEL, FINISHED, STOP, STOPPED, clear_request, read_outcome, requested_kind
from airflow_jrs.spark.control import write_request as _write_request
from airflow_jrs.store import JobResult, JobStatus
from airflow_jrs.store.stop_requests import StopRequest

if TYPE_CHECKING:
    from airflow_jrs.launch.spark_launcher import SparkSubmitLauncher
    from airflow_jrs.store.intents import Intent

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StreamPaths:
    checkpoint: str
    output: str
    control: str

    @classmethod
    def of(cls, output_root: str, namespace: str, job_id: str) -> StreamPaths:
        return cls(
            checkpoint_path(output_root, namespace, job_id),
            stream_output_path(output_root, namespace, job_id),
            control_path(output_root, namespace, job_id),
        )

    def conf(self) -> dict[str, str]:
        return streaming_conf(checkpoint_dir=self.checkpoint, control_dir=self.control)


def prepare(output_root: str, namespace: str, job_id: str) -> StreamPaths:
    """The stream's stable folders; drops a request an earlier attempt left behind."""
    paths = StreamPaths.of(output_root, namespace, job_id)
    clear_request(paths.control)
    return paths


def stopped_or_canceled_result(
    run: JobRun, paths: StreamPaths, fence: int, *, status: JobStatus, outcome: dict[str, Any] | None, why: str
) -> JobResult:
    """The STOPPED or CANCELED result of this attempt: where to resume, and what was committed."""
    metrics: dict[str, Any] = {}
    if outcome is not None:
        metrics = {"last_batch_id": outcome.get("last_batch_id"), "boundary": outcome.get("boundary")}
    return JobResult(
        job_id=run.job_id,
        status=status,
        application_id=(outcome or {}).get("application_id"),
        outputs={"output": paths.output},
        metrics=metrics,
        checkpoint_location=paths.checkpoint,
        fingerprint=run.fingerprint,
        end_time=datetime.now(UTC),
        attempt=run.attempt,
        error=why,
    )


@dataclass
class StreamAttempt:
    """One attempt of a streaming job, as the operator and its ``on_kill`` see it.

    :param alive: is spark-submit still running?
    :param kill: kill spark-submit (the provider's ``on_kill``); never raises
    """

    run: JobRun
    paths: StreamPaths
    fence: int
    stop_timeout: float
    alive: Callable[[], bool]
    kill: Callable[[], None]
    #: what ``on_kill`` recorded (STOPPED or CANCELED), so execute() writes nothing more
    recorded: JobStatus | None = None
    _stopping: bool = False
    _cancel_now: bool = field(default=False, repr=False)

    # -- after spark-submit -----------------------------------------------------------------
    def finished_result(self, result: JobResult) -> JobResult:
        """A SUCCEEDED result (``Trigger.AvailableNow`` ended on its own) gains the checkpoint."""
        outcome = read_outcome(self.paths.control, self.fence) or {}
        metrics = {**result.metrics, "last_batch_id": outcome.get("last_batch_id")}
        return replace(result, checkpoint_location=self.paths.checkpoint, metrics=metrics)

    def stopped_outcome(self) -> dict[str, Any] | None:
        """The driver's outcome when it stopped on request (exit 0 but not finished)."""
        outcome = read_outcome(self.paths.control, self.fence)
        return outcome if outcome is not None and outcome.get("ended") == STOPPED else None

    def finished(self) -> bool:
        outcome = read_outcome(self.paths.control, self.fence)
        return outcome is not None and outcome.get("ended") == FINISHED

    def request_in_force(self) -> StopRequest | None:
        """The stop or cancel request for this attempt (:mod:`airflow_jrs.store.stop_requests`)."""
        try:
            return self.run.jobs.stop_requests.get(self.run.job_id, self.fence)
        except Exception:
            return None

    def ended_words(self, fallback: str, *, fresh: bool = False) -> str:
        """Why the stream ended, in its request's own words (:meth:`StopRequest.describe`): a stop
        asked from the UI or a successor's cancel is recorded as such, not as the CLI's.
        ``fallback`` when no request of this fence can be read (an unsupervised attempt's control
        file, a lost store). ``fresh``: on a connection of its own (inside ``on_kill``)."""
        try:
            jobs = self.run.jobs.fresh() if fresh else self.run.jobs
            try:
                request = jobs.stop_requests.get(self.run.job_id, self.fence)
            finally:
                if fresh:
                    jobs.close()
        except Exception:
            return fallback
        return request.describe() if request is not None else fallback

    def cancel_requested(self) -> bool:
        request = self.request_in_force()
        if request is not None:
            return request.cancel
        try:  # an unsupervised attempt: the request went to the control file only
            return requested_kind(self.paths.control, self.fence) == CANCEL
        except Exception:
            return False

    def record(self, status: JobStatus, outcome: dict[str, Any] | None, why: str, *, fresh: bool) -> None:
        """Write the STOPPED/CANCELED result under this attempt's fence (it supersedes an
        unsuccessful entry; a SUCCEEDED one is never replaced). ``fresh``: on a connection of its
        own (inside ``on_kill``, the interrupted thread may be using the pooled one)."""
        result = stopped_or_canceled_result(self.run, self.paths, self.fence, status=status, outcome=outcome, why=why)
        jobs = self.run.jobs.fresh() if fresh else self.run.jobs  # the configured durability and limits
        try:
            if not record_unless_succeeded(jobs.results, result, self.fence):  # done is done
                log.warning(
                    "Job %s: a SUCCEEDED result is kept (of another fingerprint); %s not recorded. The intent "
                    "stays for the next attempt's recovery.",
                    self.run.job_id,
                    status.value,
                )
                return
            self.recorded = status
        finally:
            if fresh:
                jobs.close()

    # -- kill -----------------------------------------------------------------------------------
    def request(self, kind: str, by: str) -> None:
        """Ask through the one stop path (the supervisor forwards a stop to the driver); on a
        connection of its own (this runs inside ``on_kill``). An attempt without a running
        supervisor gets the request in its control file directly."""
        job_id = self.run.job_id
        supervised = False
        try:
            jobs = self.run.jobs.fresh()
            try:
                jobs.stop_requests.ask(
                    job_id, self.fence, kind, by=by, reason="the task was killed", stop_timeout=self.stop_timeout
                )
                beat = jobs.heartbeats.get(job_id)
                supervised = beat is not None and beat.running and beat.fence == self.fence
            finally:
                jobs.close()
        except Exception as exc:  # the control file below, and the kill, still end the attempt
            log.warning("Job %s: could not record the %s request in the store: %s", job_id, kind, exc)
        if supervised:
            return
        try:
            _write_request(self.paths.control, kind, self.fence, by=by)
        except Exception as exc:  # the kill below still ends the attempt
            log.warning("Job %s: could not write the %s request: %s", job_id, kind, exc)

    def stop_then_cancel(self, by: str) -> None:
        """Stop at a batch boundary within ``stop_timeout``, else cancel; record the outcome.

        Re-entrant: a second call while the first waits (a second SIGTERM) cancels at once.
        Never raises (it runs in a signal handler)."""
        job_id = self.run.job_id
        if self._stopping:
            log.warning("Job %s: second kill while stopping: canceling now.", job_id)
            self._cancel_now = True
            self.request(CANCEL, by)
            self.kill()
            return
        self._stopping = True
        try:
            if self.alive():
                log.warning("Job %s: stop requested at the next batch boundary (up to %ss)", job_id, self.stop_timeout)
                self.request(STOP, by)
                deadline = time.monotonic() + self.stop_timeout
                while self.alive() and not self._cancel_now and time.monotonic() < deadline:
                    time.sleep(0.2)
            outcome = self.stopped_outcome()
            if outcome is None and self.alive():
                log.warning("Job %s: no stop within %ss: canceling.", job_id, self.stop_timeout)
                self.request(CANCEL, by)
            self.kill()  # no-op when spark-submit is gone already
            if outcome is None and not self.finished():
                why = self.ended_words(f"canceled by {by}", fresh=True)
                self.record(JobStatus.CANCELED, None, why, fresh=True)
            elif outcome is not None:
                self.record(JobStatus.STOPPED, outcome, self.ended_words(f"stopped by {by}", fresh=True), fresh=True)
            # finished on its own just before the kill: nothing recorded; the killed task
            # never writes SUCCEEDED, and the next run finds the stream's work in its checkpoint.
        except Exception as exc:
            log.warning("Job %s: stop/cancel could not complete cleanly: %s", job_id, exc)
            try:
                self.kill()
            except Exception:
                pass


class StreamingLauncher(Launcher):
    """A stream around a spark-submit launcher: the launch is the wrapped one's, in the stream's
    stable folders (the protocol writes there: :attr:`streaming`), and ending it is a stream's
    (stop at a batch boundary, then cancel; STOPPED or CANCELED recorded). Everything else (where
    a predecessor runs, what the cluster says, how a failure reads) is the wrapped launcher's."""

    streaming = True

    def __init__(self, inner: SparkSubmitLauncher, stop_timeout: float) -> None:
        self.inner, self.stop_timeout = inner, stop_timeout
        self.paths: StreamPaths | None = None
        #: this attempt's stream, once it runs: from then on a kill stops it at a batch boundary
        self.stream: StreamAttempt | None = None

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.inner.name

    @property
    def cluster(self) -> bool:  # type: ignore[override]
        return self.inner.cluster

    def prepare(self, launch: Launch) -> dict[str, Any]:
        # one checkpoint and output for every attempt: resume, never rewind
        self.paths = prepare(launch.run.jobs.settings.output_root, launch.namespace, launch.job_id)
        self.inner.stream_conf = self.paths.conf()
        return self.inner.prepare(launch)

    def run(self, launch: Launch) -> None:
        assert self.paths is not None, "prepare() comes first"
        inner = self.inner
        self.stream = StreamAttempt(launch.run, self.paths, launch.fence, self.stop_timeout, alive=inner.alive,
                                    kill=inner.stop)  # fmt: skip
        inner.run(launch)

    def submission(self) -> tuple[int | None, str | None]:
        return self.inner.submission()

    def stop(self) -> None:
        self.inner.stop()

    def kill(self, run: JobRun | None, fence: int | None, *, by: str = "on_kill") -> None:
        if self.stream is None:  # not launched yet: nothing of a stream to stop
            self.inner.kill(run, fence, by=by)
            return
        self.stream.stop_then_cancel(by=by)  # stop at a batch boundary, then cancel; records the outcome
        self.inner.stop()

    def predecessors_of(self, namespace: str, stale: Intent) -> list[Predecessor]:
        return self.inner.predecessors_of(namespace, stale)

    def before_resubmit(self, stale: Intent) -> None:
        self.inner.before_resubmit(stale)

    def outcome(self, launch: Launch, recorder: Any, *, failed: bool) -> Ended:
        return self.inner.outcome(launch, recorder, failed=failed)

    def failure(self, error: BaseException) -> Failure:
        return self.inner.failure(error)

    def check_ended_on_request(self, launch: Launch, recorder: Any) -> None:
        stream = self.stream
        if stream is None:
            self.inner.check_ended_on_request(launch, recorder)
        elif stream.cancel_requested():
            why = stream.ended_words("canceled on request (airflow-jrs cancel)")
            stream.record(JobStatus.CANCELED, None, why, fresh=False)
            raise JobEndedOnRequestError(
                f"job {launch.job_id}: streaming application canceled on request; recorded CANCELED. The next "
                "run resumes from its checkpoint.",
                job_id=launch.job_id,
                fence=launch.fence,
            ) from None

    def finish(self, launch: Launch, result: JobResult) -> JobResult:
        """SUCCEEDED with the checkpoint when the stream ended on its own (``AvailableNow``);
        STOPPED recorded, and the task failed without retries, when it stopped on request."""
        stream = self.stream
        if stream is None:
            return self.inner.finish(launch, result)
        if (stopped := stream.stopped_outcome()) is not None:
            why = stream.ended_words("stopped on request (airflow-jrs stop)")
            stream.record(JobStatus.STOPPED, stopped, why, fresh=False)
            raise JobEndedOnRequestError(
                f"job {launch.job_id}: streaming application stopped on request at batch "
                f"{stopped.get('last_batch_id')}; recorded STOPPED. The next run resumes from its checkpoint.",
                job_id=launch.job_id,
                fence=launch.fence,
            )
        return stream.finished_result(self.inner.finish(launch, result))
