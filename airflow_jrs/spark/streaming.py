"""The driver side of a streaming job: stable locations, stop at a batch boundary, cancel at once.

In a PySpark Structured Streaming application submitted by
``JrsSparkSubmitOperator(streaming=True)``::

    from airflow_jrs.spark import streaming_job

    job = streaming_job(spark)
    query = (df.writeStream.format("parquet")
             .option("checkpointLocation", job.checkpoint_location)
             .option("path", job.output_dir)
             .trigger(processingTime="10 seconds")       # or availableNow=True
             .start())
    outcome = job.run(query)        # blocks until the query ends, or a stop/cancel request
    spark.stop()

``job.run`` watches the job's control folder (:mod:`airflow_jrs.spark.control`) through the
driver JVM's Hadoop FileSystem, so it works in any deploy mode and for any scheme Spark writes:

* **stop**: the micro-batch in flight commits (its ``commits/N`` file exists), no other starts,
  then the query stops (see :meth:`StreamingJob._stop_at_boundary`), so a restart replays
  nothing; ``boundary`` confirms it from the checkpoint (offsets and commits logs agree). Then
  ``ended-fence-<N>-<nonce>.json`` says ``stopped``, with the last committed batch id.
* **cancel**: exit the driver process at once (exit code 143) from the watcher thread, even
  while a stop is stuck. The restart replays at most the batch that was in flight.
* the query ends on its own (``Trigger.AvailableNow``): ``finished`` is written.
* the query fails: its exception propagates; nothing is written.

Standard library and pyspark only (pyspark reached through the objects passed in).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from airflow_jrs.spark.commit import job_context
from airflow_jrs.spark.conf import CONF_CHECKPOINT_DIR, CONF_CONTROL_DIR, CONF_FENCE_NONCE
from airflow_jrs.spark.control import (
    CANCEL,
    CANCEL_EXIT_CODE,
    CONTROL_VERSION,
    FINISHED,
    STOP,
    STOPPED,
    applies_to,
    outcome_path,
    request_path,
)
from airflow_jrs.spark.fence import Fence

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StreamOutcome:
    """How :meth:`StreamingJob.run` ended: ``stopped`` (on request) or ``finished`` (on its own)."""

    ended: str
    last_batch_id: int | None
    checkpoint_location: str
    #: every started batch had committed when the query stopped (no batch was interrupted)
    boundary: bool

    @property
    def stopped(self) -> bool:
        return self.ended == STOPPED


class _HadoopFiles:
    """The few file operations the driver needs, through the running JVM's Hadoop FileSystem."""

    def __init__(self, spark: Any) -> None:
        self.jvm = self._jvm = spark._jvm
        self._conf = spark._jsc.hadoopConfiguration()

    def _fs(self, url: str) -> tuple[Any, Any]:
        path = self._jvm.org.apache.hadoop.fs.Path(url)
        return path.getFileSystem(self._conf), path

    def read_json(self, url: str) -> dict[str, Any] | None:
        fs, path = self._fs(url)
        if not fs.exists(path):
            return None
        stream = fs.open(path)
        try:
            reader = self._jvm.java.io.BufferedReader(self._jvm.java.io.InputStreamReader(stream, "UTF-8"))
            lines = []
            while (line := reader.readLine()) is not None:
                lines.append(line)
        finally:
            stream.close()
        try:
            doc = json.loads("\n".join(lines))
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None

    def write_json(self, url: str, doc: dict[str, Any]) -> None:
        payload = json.dumps(doc, sort_keys=True).encode("utf-8")
        fs, path = self._fs(url)
        out = fs.create(path, True)
        try:
            out.write(bytearray(payload))
        finally:
            out.close()

    def batch_ids(self, folder: str) -> list[int]:
        fs, path = self._fs(folder)
        if not fs.exists(path):
            return []
        names = [status.getPath().getName() for status in fs.listStatus(path)]
        return sorted(int(n) for n in names if n.isdigit())


class StreamingJob:
    """The job context of a streaming application and the loop that honours stop/cancel requests.

    Attributes: ``job_id``, ``fence``, ``namespace``, ``checkpoint_location`` (stable across
    attempts: resume from it), ``output_dir`` (stable too: the file sink's exactly-once log lives
    there), ``control_dir``.
    """

    def __init__(
        self,
        spark: Any,
        *,
        checkpoint_location: str | None = None,
        output_dir: str | None = None,
        control_dir: str | None = None,
        poll_interval: float = 0.5,
    ) -> None:
        ctx = job_context(spark)
        conf = spark.conf
        self.spark = spark
        self.job_id: str | None = ctx["job_id"]
        # the whole fence identity (token and owner nonce): it names this driver's control files
        nonce = conf.get(CONF_FENCE_NONCE, None)
        token = ctx["fence"] if isinstance(ctx["fence"], int) else None
        self.fence: int | None = None if token is None else Fence(token, str(nonce) if nonce else None)
        self.namespace: str | None = ctx["namespace"]
        checkpoint = checkpoint_location or conf.get(CONF_CHECKPOINT_DIR, None)
        if not checkpoint:
            raise ValueError(
                f"no checkpoint location: submit with JrsSparkSubmitOperator(streaming=True) (it sets "
                f"{CONF_CHECKPOINT_DIR}), or pass checkpoint_location="
            )
        self.checkpoint_location = str(checkpoint)
        self.output_dir: str | None = output_dir or ctx["output_dir"]
        control = control_dir or conf.get(CONF_CONTROL_DIR, None)
        self.control_dir = str(control) if control else f"{self.checkpoint_location.rstrip('/')}_control"
        self.poll_interval = poll_interval
        self._files = _HadoopFiles(spark)
        self._requested: str | None = None
        self._done = threading.Event()

    # -- requests --------------------------------------------------------------------------
    def requested(self) -> str | None:
        """``"stop"``, ``"cancel"`` or None: the request for this attempt seen so far."""
        return self._requested

    def _poll_once(self) -> None:
        try:
            kind = applies_to(self._files.read_json(request_path(self.control_dir)), self.fence)
        except Exception as exc:  # a flaky read must not end the stream; the next poll retries
            log.warning("Could not read the stop/cancel request: %s", exc)
            return
        if kind == CANCEL:
            self._requested = CANCEL
            self._cancel_now()
        elif kind == STOP and self._requested is None:
            log.warning("Stop requested for job %s (fence %s): at the next batch boundary", self.job_id, self.fence)
            self._requested = STOP

    def _watch(self) -> None:
        while not self._done.wait(self.poll_interval):
            self._poll_once()

    def _cancel_now(self) -> None:
        """Hard exit of the driver: the JVM (spark-submit, or the cluster's driver) follows."""
        log.error("Cancel requested for job %s (fence %s): exiting at once", self.job_id, self.fence)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(CANCEL_EXIT_CODE)

    # -- the loop --------------------------------------------------------------------------
    def run(self, query: Any, *, check_interval: float = 0.2) -> StreamOutcome:
        """Block until ``query`` ends or a request arrives; see the module docstring.

        Raises the query's exception when it fails (nothing is recorded as stopped then)."""
        watcher = threading.Thread(target=self._watch, name="jrs-stream-control", daemon=True)
        self._poll_once()  # a request written before the query started is honoured at once
        watcher.start()
        try:
            while self._requested != STOP:
                if query.awaitTermination(check_interval):
                    exc = query.exception()
                    if exc is not None:
                        raise exc
                    return self._ended(FINISHED, boundary=True)
            boundary = self._stop_at_boundary(query)
            return self._ended(STOPPED, boundary=boundary)
        finally:
            self._done.set()

    def _stop_at_boundary(self, query: Any) -> bool:
        """Let the batch in flight commit, start no other, then stop; True when nothing was cut.

        Spark has no public "stop after this batch". Its micro-batch loop checks the query's
        state before each trigger and ends cleanly, after the batch in flight committed, once
        the state is TERMINATED; ``query.stop()`` sets that state too, but also interrupts the
        batch. So the state is set alone first (through the JVM object), and ``stop()`` only
        follows once no trigger is active (then none can start any more). Where the state
        cannot be reached (another Spark version), the fallback waits for a moment without an
        active trigger, which in a busy stream may never come before the queue of data ends.
        """
        # Seen with Spark 4.3.0: the state change aborts a batch that is still planning (its
        # thread is interrupted while it broadcasts its reader's configuration), most often the
        # *first* batch of a run, whose planning is longest, and any batch on a loaded machine
        # (a stop just after batch 3's offsets were logged cut batch 3 in 1 of 6 runs). So a stop that
        # arrives during the first batch lets it commit, and ends the query after the next one
        # at most; during a later batch, it waits until that batch's Spark job runs.
        while query.lastProgress is None and self._in_flight() is not None and query.exception() is None:
            if query.awaitTermination(0.05):
                break
        self._wait_past_planning(query)
        terminated = self._terminate_after_this_batch(query, self._files.jvm)
        if terminated:
            # query.isActive and awaitTermination() read the state we just set: watch the
            # trigger instead (a trigger that passed its state check just before is visible
            # after a moment) and the execution thread.
            # The loop then ends by itself after the batch in flight; stop() early only when the
            # checkpoint shows no batch in flight and no trigger runs (an idle stream would
            # otherwise wait for its next trigger time).
            time.sleep(0.1)
            thread = query._jsq.streamingQuery().queryExecutionThread()
            while thread.isAlive():
                if not query.status.get("isTriggerActive") and self._in_flight() is None:
                    break
                time.sleep(0.05)
        else:
            while query.isActive and query.status.get("isTriggerActive"):
                time.sleep(0.01)
        query.stop()
        return self._in_flight() is None

    def _wait_past_planning(self, query: Any, *, at_most: float = 60.0) -> None:
        """Wait while a batch is in flight and none of the driver's Spark jobs runs yet.

        A batch's write job is submitted once its plan is broadcast, so a running job means the
        batch is past the phase the state change interrupts. Bounded: a batch that runs no job
        (or a driver whose other jobs keep the tracker busy) only costs the old behaviour.
        """
        tracker = self.spark.sparkContext.statusTracker()
        deadline = time.monotonic() + at_most
        while time.monotonic() < deadline and query.exception() is None:
            if self._in_flight() is None or tracker.getActiveJobsIds():
                return
            if query.awaitTermination(0.05):
                return
        if query.exception() is None:
            log.warning(
                "Stop for job %s (fence %s): batch %s ran no Spark job within %.0f s; ending the query after it anyway",
                self.job_id,
                self.fence,
                self._in_flight(),
                at_most,
            )

    def _in_flight(self) -> int | None:
        """The batch whose offsets are logged but not committed, per the checkpoint, or None."""
        offsets = self._files.batch_ids(f"{self.checkpoint_location.rstrip('/')}/offsets")
        commits = self._files.batch_ids(f"{self.checkpoint_location.rstrip('/')}/commits")
        last_offset, last_commit = (offsets[-1] if offsets else None), (commits[-1] if commits else None)
        return None if last_offset == last_commit else last_offset

    @staticmethod
    def _terminate_after_this_batch(query: Any, jvm: Any) -> bool:
        """Set the query's state to TERMINATED without interrupting it; False when not possible."""
        try:
            state = query._jsq.streamingQuery().state()
            current = state.get().getClass()
            name = current.getName().rsplit(".", 1)[0] + ".TERMINATED$"
            terminated = jvm.java.lang.Class.forName(name, True, current.getClassLoader()).getField("MODULE$").get(None)
            state.set(terminated)
            return True
        except Exception as exc:
            log.warning("Cannot end the query after its current batch (%s); waiting for an idle moment", exc)
            return False

    def _ended(self, ended: str, *, boundary: bool) -> StreamOutcome:
        commits = self._files.batch_ids(f"{self.checkpoint_location.rstrip('/')}/commits")
        outcome = StreamOutcome(ended, commits[-1] if commits else None, self.checkpoint_location, boundary)
        if self.fence is not None:
            self._files.write_json(
                outcome_path(self.control_dir, self.fence),
                {
                    "v": CONTROL_VERSION,
                    "ended": ended,
                    "fence": self.fence,
                    "job_id": self.job_id,
                    "last_batch_id": outcome.last_batch_id,
                    "checkpoint_location": self.checkpoint_location,
                    "boundary": boundary,
                    "application_id": self.spark.sparkContext.applicationId,
                    "at": datetime.now(UTC).isoformat(),
                },
            )
        log.warning("Job %s (fence %s): stream %s at batch %s", self.job_id, self.fence, ended, outcome.last_batch_id)
        return outcome


def streaming_job(spark: Any, **kwargs: Any) -> StreamingJob:
    """The streaming job context of this application (see :class:`StreamingJob`)."""
    return StreamingJob(spark, **kwargs)
