"""Recovery: a predecessor's intent means it died mid-flight; never run beside it, never redo its work.

The attempt that takes over a job's lease and finds an intent (FLINK-2354's "job graph
still referenced") knows an earlier attempt submitted Spark and never wrote a result. In
order, it

1. finds the predecessor's live application: through the heartbeat its supervisor keeps (on
   any host), then through the launcher (:meth:`.launcher.Launcher.find_predecessors`: a
   local spark-submit, a YARN application, a Kubernetes driver pod, a standalone driver) and
   waits for it to end (``predecessor="wait"``:
   its work may finish and be adopted) or stops it (``"stop"``), checking its own lease
   between polls;
2. reads the predecessor's commit marker: a marker that names the job and the predecessor's
   fence (for the same fingerprint) means the output is complete, so it is *adopted*: the
   SUCCEEDED result is written under the successor's fence, with no recompute;
3. otherwise returns ``None``, and the caller submits anew.

In local and client mode a spark-submit left on *another* worker cannot be seen from here:
the successor names that host and pid in its log (its output stays in its own fence's
staging and is never published).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

from airflow_jrs.exceptions import CorruptCommitMarkerError
from airflow_jrs.protocol.launcher import Launcher, Predecessor
from airflow_jrs.protocol.markers import names_attempt
from airflow_jrs.protocol.run import JobRun, succeeded_result
from airflow_jrs.spark.commit import read_commit_marker
from airflow_jrs.store import JobResult
from airflow_jrs.store.intent import Heartbeat, IntentStore
from airflow_jrs.store.stop_requests import DEFAULT_STOP_TIMEOUT, STOP

#: What a successor does with a predecessor's application that still runs.
PREDECESSOR_POLICIES = ("wait", "stop")
#: Seconds between two reads of a predecessor's heartbeat.
HEARTBEAT_POLL = 0.5


def wait_for(predecessors: list[Predecessor], check: Callable[[], object], poll: float = 1.0) -> None:
    """Wait until every predecessor ended, calling ``check`` (the lease check) between polls."""
    alive = list(predecessors)
    while alive:
        check()
        alive = [p for p in alive if p.alive()]
        if alive:
            time.sleep(poll)


def _settle_supervised_predecessor(run: JobRun, fence: int, predecessor: str, log: Any) -> Heartbeat | None:
    """Wait for, or stop, the predecessor's supervised spark-submit, wherever it runs.

    Acts on the heartbeat its supervisor keeps (:mod:`airflow_jrs.store.intent`), not on a process
    list of this host: it returns once the heartbeat says ``ended`` or has expired. Returns the
    heartbeat first seen (``None``: there was none running)."""
    heartbeats = run.jobs.heartbeats
    beat = heartbeats.get(run.job_id)
    if beat is None or not beat.running or beat.fence != fence:
        return None
    if predecessor == "stop":  # the one stop path: a stream stops at a batch boundary, a batch job is terminated
        run.jobs.stop_requests.ask(
            run.job_id, fence, STOP, by=f"the successor attempt (fence {int(run.lease.token or 0)})",
            reason='predecessor="stop"', stop_timeout=DEFAULT_STOP_TIMEOUT,
        )  # fmt: skip
        log.warning(
            "Job %s: asked the supervisor of fence %s on host %s (pid %s) to stop its spark-submit (pid %s): a "
            "stream stops at its next batch boundary (killed after its stop_timeout), a batch job is terminated.",
            run.job_id, fence, beat.host, beat.pid, beat.child,
        )  # fmt: skip
    else:
        log.warning(
            "Job %s: the predecessor's spark-submit still runs on host %s (supervisor pid %s, spark-submit "
            "pid %s); waiting for it to end (its output is adopted when it finished).",
            run.job_id, beat.host, beat.pid, beat.child,
        )  # fmt: skip
    while True:
        run.lease.check()
        current = heartbeats.get(run.job_id)
        if current is None or not current.running or current.fence != fence:
            ended = "expired" if current is None else f"ended with exit code {current.exit_code}"
            log.info("Job %s: the predecessor's supervisor %s.", run.job_id, ended)
            return beat
        time.sleep(HEARTBEAT_POLL)


def recover(run: JobRun, *, launcher: Launcher, predecessor: str, log: Any) -> tuple[JobResult, int] | None:
    """Recover from a predecessor that died mid-flight; returns the adopted result and the fence
    it was adopted from, or ``None`` when there is nothing to adopt and the caller must launch."""
    job_id, lease = run.job_id, run.lease
    stale = run.intents.get(job_id)
    if stale is None:
        return None
    log.warning(
        "Job %s: attempt with fence %s (pid %s on %s; spark-submit pid %s, application %s) left an "
        "intent; recovering.",
        job_id, stale.fence, stale.pid, stale.host, stale.submit_pid, stale.application_id,
    )  # fmt: skip
    beat = _settle_supervised_predecessor(run, stale.fence, predecessor, log)
    predecessors = launcher.predecessors_of(run.jobs.namespace, stale)
    if predecessors:
        names = [p.description for p in predecessors]
        if predecessor == "stop":
            log.warning("Stopping the predecessor's application: %s", names)
            for p in predecessors:
                p.stop()
        else:
            log.warning("Waiting for the predecessor's application to end: %s", names)
        wait_for(predecessors, check=lease.check)
    elif beat is None and stale.host != socket.gethostname() and stale.application_id is None:
        log.warning(
            "Job %s: the predecessor ran on host %s (spark-submit pid %s) and left no heartbeat: its "
            "supervisor ended or expired, so nothing of it runs (a bare spark-submit of an older "
            "airflow-jrs could not be checked from %s).",
            job_id, stale.host, stale.submit_pid, socket.gethostname(),
        )  # fmt: skip
    try:
        marker = read_commit_marker(stale.staging)
    except CorruptCommitMarkerError as exc:  # half-written marker: the output cannot be trusted
        log.warning("Job %s: predecessor's commit marker is unreadable (%s); recomputing.", job_id, exc)
        marker = None
    if marker is not None and not names_attempt(marker, job_id, stale.fence):
        log.warning(
            "Job %s: the commit marker in %s names job %s, fence %s, not the predecessor (fence %s): it was not "
            "written by the predecessor's application, so its output is not adopted; resubmitting.",
            job_id, stale.staging, marker.get("job_id"), marker.get("fence"), int(stale.fence),
        )  # fmt: skip
        marker = None
    if marker is None or (stale.fingerprint and stale.fingerprint != run.fingerprint):
        launcher.before_resubmit(stale)
        log.info("Job %s: predecessor left no complete output; resubmitting.", job_id)
        return None
    token = lease.check()
    result = succeeded_result(run, stale.staging, marker, started=None, application_id=stale.application_id)
    run.store.create_dirty_result(result, fence=token, supersede=run.supersede)
    IntentStore.delete_spec(stale.spec_uri)
    log.info("Job %s: adopted the finished output of fence %s without re-running.", job_id, stale.fence)
    return result, int(stale.fence)
