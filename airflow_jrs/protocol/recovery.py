"""Recovery: a predecessor's intent means it died mid-flight; never run beside it, never redo its work.

The attempt that takes over a job's lease and finds an intent (FLINK-2354's "job graph
still referenced") knows an earlier attempt submitted Spark and never wrote a result. In
order, it

1. finds the predecessor's live application: through the heartbeat its supervisor keeps (on
   any host), then through the launcher (:meth:`.launcher.Launcher.predecessors_of`: a
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

Each step is also recorded in the job's recovery log (:mod:`airflow_jrs.store.recoveries`:
which try died, what was found, what was waited for or stopped, adopted or submitted again,
with the server's time), so the job page, ``airflow-jrs show`` and the JSON API can tell it
after the task log is gone. Recording is best effort and never fails the recovery.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from airflow_jrs.domain import signals
from airflow_jrs.exceptions import CorruptCommitMarkerError
from airflow_jrs.protocol.launcher import Launcher, Predecessor
from airflow_jrs.protocol.markers import names_attempt
from airflow_jrs.protocol.run import JobRun, succeeded_result
from airflow_jrs.spark.commit import read_commit_marker
from airflow_jrs.spark.control import STOP
from airflow_jrs.store import JobResult
from airflow_jrs.store.heartbeats import Heartbeat
from airflow_jrs.store.intents import Intent, IntentStore
from airflow_jrs.store.recoveries import ADOPTED, FOUND, RESUBMITTED, STOPPED, WAITED, RecoveryStep
from airflow_jrs.store.stop_requests import DEFAULT_STOP_TIMEOUT

if TYPE_CHECKING:
    from airflow_jrs.store.namespace import JobNamespace

#: What a successor does with a predecessor's application that still runs.
PREDECESSOR_POLICIES = ("wait", "stop")
#: Seconds between two reads of a predecessor's heartbeat.
HEARTBEAT_POLL = 0.5


#: The recovery steps that are decisions, and the name :mod:`.signals` knows each by.
DECIDING_STEPS = {
    WAITED: signals.WAITED, STOPPED: signals.STOPPED_PREDECESSOR, ADOPTED: signals.ADOPTED,
    RESUBMITTED: signals.RESUBMITTED,
}  # fmt: skip


def decided(run: JobRun, step: RecoveryStep) -> None:
    """Tell the namespace's signals (Airflow's metrics on a worker) of ``step`` when it is a
    decision (:data:`DECIDING_STEPS`); whether its line reached the recovery log does not matter."""
    decision, jobs, a = DECIDING_STEPS.get(step.event), run.jobs, run.attempt
    if decision is not None:
        signals.tell(lambda: jobs.signals.decided(decision, dag_id=a.dag_id, task_id=a.task_id))


def note(jobs: JobNamespace, job_id: str, fence: int | None, step: RecoveryStep, log: Any) -> None:
    """Record ``step`` in the job's recovery log as the holder of ``fence``; never raises (the log
    is for people: a recovery must not fail because Redis could not take a line of history)."""
    if fence is None:
        return
    try:
        if not jobs.recoveries.record(job_id, fence, step):
            log.info("Job %s: recovery step %r not recorded: fence %s no longer holds the lease.", job_id, step.event,
                     int(fence))  # fmt: skip
    except Exception as exc:
        log.warning("Job %s: could not record the recovery step %r (%s); the task log has it.", job_id,
                    step.event, exc)  # fmt: skip


def _tried(intent: Intent) -> dict[str, Any]:
    """Which try the intent's attempt was (from its spec), for the recovery log; ``{}`` if unknown."""
    try:
        attempt = IntentStore.read_spec(intent.spec_uri).get("attempt")
    except Exception:
        return {}
    if not isinstance(attempt, dict):
        return {}
    return {k: attempt[k] for k in ("dag_id", "task_id", "run_id", "try_number", "map_index") if k in attempt}


def _who(intent: Intent, tried: dict[str, Any]) -> str:
    """The dead attempt in the words of the task log: try, task, run, host and pid."""
    task = ".".join(str(tried[k]) for k in ("dag_id", "task_id") if tried.get(k))
    head = f"try {tried['try_number']} of {task} (run {tried.get('run_id')})" if tried.get("try_number") else "attempt"
    return f"{head}, fence {int(intent.fence)}, pid {intent.pid} on host {intent.host}"


def _application(app_id: str | None) -> str:
    """An application id as the log shows it: in local and client mode the intent has none
    until the commit marker names it."""
    return app_id if app_id else "not recorded"


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

    Acts on the heartbeat its supervisor keeps (:mod:`airflow_jrs.store.intents`), not on a process
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
    started = time.monotonic()
    while True:
        run.lease.check()
        current = heartbeats.get(run.job_id)
        if current is None or not current.running or current.fence != fence:
            ended = "expired" if current is None else f"ended with exit code {current.exit_code}"
            log.info("Job %s: the predecessor's supervisor %s.", run.job_id, ended)
            took = round(time.monotonic() - started, 1)
            doing = "asked its supervisor to stop spark-submit" if predecessor == "stop" else "waited for spark-submit"
            step = RecoveryStep(
                STOPPED if predecessor == "stop" else WAITED,
                f"{doing} (pid {beat.child}, supervisor pid {beat.pid} on host {beat.host}): its supervisor {ended} "
                f"after {took:g}s",
                predecessor=int(fence),
                facts={"host": beat.host, "supervisor_pid": beat.pid, "submit_pid": beat.child, "seconds": took,
                       "exit_code": None if current is None else current.exit_code},
            )  # fmt: skip
            note(run.jobs, run.job_id, run.lease.token, step, log)
            decided(run, step)
            return beat
        time.sleep(HEARTBEAT_POLL)


def _settle_launched_predecessors(run: JobRun, launcher: Launcher, stale: Intent, predecessor: str, log: Any) -> bool:
    """Wait for, or stop, what the launcher finds of the predecessor (a local spark-submit, a
    cluster driver or application); ``False`` when it finds nothing."""
    predecessors = launcher.predecessors_of(run.jobs.namespace, stale)
    if not predecessors:
        return False
    names = [p.description for p in predecessors]
    started = time.monotonic()
    if predecessor == "stop":
        log.warning("Stopping the predecessor's application: %s", names)
        for p in predecessors:
            p.stop()
    else:
        log.warning("Waiting for the predecessor's application to end: %s", names)
    wait_for(predecessors, check=run.lease.check)
    took = round(time.monotonic() - started, 1)
    step = RecoveryStep(
        STOPPED if predecessor == "stop" else WAITED,
        f"{'stopped' if predecessor == 'stop' else 'waited for'} {', '.join(names)}: ended after {took:g}s",
        predecessor=int(stale.fence),
        facts={"applications": names, "seconds": took},
    )
    note(run.jobs, run.job_id, run.lease.token, step, log)
    decided(run, step)
    return True


def _found(run: JobRun, stale: Intent, who: str, tried: dict[str, Any], log: Any) -> None:
    """Say what the successor found: the dead attempt's intent, and whether its spark-submit beats."""
    log.warning(
        "Job %s: %s left an intent (spark-submit pid %s, application %s); recovering.",
        run.job_id, who, stale.submit_pid, _application(stale.application_id),
    )  # fmt: skip
    beat = run.jobs.heartbeats.get(run.job_id)
    if beat is not None and beat.fence == stale.fence:
        heartbeat = f"its supervisor's heartbeat is {beat.state} (pid {beat.pid} on host {beat.host})"
    else:
        heartbeat = "no heartbeat of its supervisor is left"
    facts = {"host": stale.host, "pid": stale.pid, "submit_pid": stale.submit_pid,
             "application_id": stale.application_id, "staging": stale.staging, **tried}  # fmt: skip
    step = RecoveryStep(FOUND, f"found the intent of {who}, which died without a result; {heartbeat}",
                        predecessor=int(stale.fence), facts=facts)  # fmt: skip
    note(run.jobs, run.job_id, run.lease.token, step, log)


def _adoptable(run: JobRun, stale: Intent, log: Any) -> tuple[dict[str, Any] | None, str]:
    """The predecessor's commit marker when its output can be adopted, else ``None`` and why not."""
    job_id = run.job_id
    try:
        marker = read_commit_marker(stale.staging)
    except CorruptCommitMarkerError as exc:  # half-written marker: the output cannot be trusted
        log.warning("Job %s: predecessor's commit marker is unreadable (%s); recomputing.", job_id, exc)
        return None, f"its commit marker is unreadable ({exc})"
    if marker is None:
        return None, f"no commit marker in {stale.staging}: its application did not finish"
    if not names_attempt(marker, job_id, stale.fence):
        log.warning(
            "Job %s: the commit marker in %s names job %s, fence %s, not the predecessor (fence %s): it was not "
            "written by the predecessor's application, so its output is not adopted; resubmitting.",
            job_id, stale.staging, marker.get("job_id"), marker.get("fence"), int(stale.fence),
        )  # fmt: skip
        return (
            None,
            f"the commit marker in {stale.staging} names job {marker.get('job_id')}, fence {marker.get('fence')}",
        )
    if stale.fingerprint and stale.fingerprint != run.fingerprint:
        return None, "its output is of another fingerprint (the job's code or arguments changed since)"
    return marker, ""


def recover(run: JobRun, *, launcher: Launcher, predecessor: str, log: Any) -> tuple[JobResult, int] | None:
    """Recover from a predecessor that died mid-flight; returns the adopted result and the fence
    it was adopted from, or ``None`` when there is nothing to adopt and the caller must launch."""
    job_id, lease = run.job_id, run.lease
    stale = run.intents.get(job_id)
    if stale is None:
        return None
    tried = _tried(stale)
    who = _who(stale, tried)
    _found(run, stale, who, tried, log)
    beat = _settle_supervised_predecessor(run, stale.fence, predecessor, log)
    found = _settle_launched_predecessors(run, launcher, stale, predecessor, log)
    if not found and beat is None and stale.host != socket.gethostname() and stale.application_id is None:
        log.warning(
            "Job %s: the predecessor ran on host %s (spark-submit pid %s) and left no heartbeat: its "
            "supervisor ended or expired, so nothing of it runs (a bare spark-submit of an older "
            "airflow-jrs could not be checked from %s).",
            job_id, stale.host, stale.submit_pid, socket.gethostname(),
        )  # fmt: skip
    marker, why = _adoptable(run, stale, log)
    if marker is None:
        launcher.before_resubmit(stale)
        log.info("Job %s: predecessor left no complete output (%s); resubmitting.", job_id, why)
        step = RecoveryStep(RESUBMITTED, f"submits again: {why}", predecessor=int(stale.fence),
                            facts={"staging": stale.staging})  # fmt: skip
        note(run.jobs, job_id, lease.token, step, log)
        decided(run, step)
        return None
    token = lease.check()
    result = succeeded_result(run, stale.staging, marker, started=None, application_id=stale.application_id)
    run.store.create_dirty_result(result, fence=token, supersede=run.supersede)
    IntentStore.delete_spec(stale.spec_uri)
    application = _application(result.application_id)
    log.info(
        "Job %s: adopted the finished output of fence %s (application %s) without re-running.",
        job_id, int(stale.fence), application,
    )  # fmt: skip
    step = RecoveryStep(
        ADOPTED, f"adopted the finished output of {who} (application {application}) without re-running",
        predecessor=int(stale.fence),
        facts={"application_id": result.application_id, "staging": stale.staging, **tried},
    )  # fmt: skip
    note(run.jobs, job_id, token, step, log)
    decided(run, step)
    return result, int(stale.fence)
