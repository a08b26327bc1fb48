"""Fast takeover: a lease whose holder is provably dead, or is an earlier try of the same task
instance, is taken at once, not after its TTL.

After a ``kill -9`` of a task, its lease lives on until its TTL runs out: nothing renews it,
but nothing can tell the store that the holder died either. A re-run on the *same host* can:
the lease's owner names the holder's host, pid and pid space (:func:`airflow_jrs.store.leases.lease.process_identity`),
and the job's intent and heartbeat name what it started (supervisor and spark-submit pids).
When all of them are gone, the holder is dead and nothing of it can still compute, so the
successor takes the lease over (:meth:`~airflow_jrs.store.leases.lease.JobLease.take_over`: a new fence,
compare-and-set on the dead holder's token) and recovers from its intent as it would after
the TTL.

"Provably" is meant strictly; anything this host cannot see keeps the holder alive and the
successor waits for the TTL, as before:

* another host name, or the same name in another kernel or pid namespace (two containers), or
  a pid space that either side cannot read (no ``/proc``: two unknowns are not equal);
* a holder pid that runs, or that this host may not inspect (``AccessDenied``), or no pid at
  all, unless its start time shows a later process reusing the number;
* a running heartbeat on another host, or a supervisor or spark-submit pid that runs here;
* any local spark-submit of this job (found by its command line, whatever its fence).

The second rule needs no process at all: Airflow starts try N+1 of a task instance only once
try N ended, on whatever host it ran. So a lease whose owner names the same DAG, task, run and
map index with a lower try number (:func:`earlier_try`) belongs to a try Airflow already ended
(a ``kill -9`` of its task process, a worker lost); the retry takes it over at once, whatever
still runs, and recovery then waits for that try's Spark (or stops it, ``predecessor="stop"``)
and adopts its output. Without it, a ``retry_delay`` shorter than ``lease_ttl`` made the retry
find its own dead try's lease, its supervisor still running Spark, and fail with
``lease_wait_timeout=0``: the run failed and needed a clear by hand. A lease of another task
instance (or of a version whose owner names no map index) is judged by the rules above.

Even a wrong verdict could not break the invariants: the takeover bumps the fence, so a
holder that was alive after all (a zombie try Airflow gave up on) loses its lease at its next
renewal, stops Spark and writes nothing (docs/architecture.md, "Invariants"). It would only waste its work.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psutil

from airflow_jrs.domain import signals
from airflow_jrs.exceptions import LeaseHeldError
from airflow_jrs.protocol.processes import find_job_processes
from airflow_jrs.protocol.recovery import note
from airflow_jrs.store.heartbeats import Heartbeat
from airflow_jrs.store.intents import Intent
from airflow_jrs.store.leases.lease import JobLease, LeaseHolder, process_identity
from airflow_jrs.store.recoveries import TOOK_OVER, RecoveryStep

if TYPE_CHECKING:
    from airflow_jrs.store.namespace import JobNamespace


#: What the recovery log keeps of a dead holder (its lease's owner): the try, where it ran.
_OWNER_FACTS = ("dag_id", "task_id", "run_id", "try_number", "map_index", "host", "pid")
#: What names one Airflow task instance in a lease's owner (its tries share them).
TASK_INSTANCE = ("dag_id", "task_id", "run_id", "map_index")


@dataclass(frozen=True)
class Verdict:
    """Whether the holder is provably dead; ``why`` says what was found (or what still runs)."""

    dead: bool
    why: str


def _running(pid: int | None) -> bool:
    """Does ``pid`` run here? Only "no such process" and a zombie count as not running: a process
    this host may not inspect (psutil's ``AccessDenied``, any other error) exists, so it runs."""
    if not pid:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:  # ZombieProcess is a NoSuchProcess with a pid that still exists
        return False
    except psutil.Error:
        return True


def _holder_gone(owner: dict[str, Any]) -> bool:
    """The holder's pid is gone: no such process, a zombie, or a later process with its number.
    A holder that names no pid cannot be proven gone."""
    pid = int(owner.get("pid") or 0)
    if not pid:
        return False
    if not _running(pid):
        return True
    started = owner.get("pid_start")
    return started is not None and process_identity(pid).get("pid_start") not in (None, started)


def holder_gone_here(owner: dict[str, Any]) -> bool | None:
    """Is the process a lease's ``owner`` names gone, as this host sees it? ``None`` when this host
    cannot tell (another host or pid space, no ``/proc``): the first rules of :func:`judge`, for
    readers that say what they see (:mod:`airflow_jrs.views.holder`)."""
    theirs, ours = owner.get("pid_space"), process_identity(os.getpid()).get("pid_space")
    if owner.get("host") != socket.gethostname() or theirs is None or ours is None or theirs != ours:
        return None
    return _holder_gone(owner)


def judge(
    holder: LeaseHolder, intent: Intent | None, beat: Heartbeat | None, *, namespace: str, job_id: str
) -> Verdict:
    """Judge the lease's ``holder`` from this host (see the module docstring for the rules)."""
    owner = holder.owner
    host, here = owner.get("host"), socket.gethostname()
    if host != here:
        return Verdict(False, f"it runs on host {host}, which this host ({here}) cannot check")
    theirs, ours = owner.get("pid_space"), process_identity(os.getpid()).get("pid_space")
    if theirs is None or ours is None:  # two unknowns are not "the same pid space"
        return Verdict(False, f"the pid space of its pid {owner.get('pid')} on host {host} cannot be read here")
    if theirs != ours:
        return Verdict(False, f"host {host} has the same name but another kernel or pid namespace (a container?)")
    if not _holder_gone(owner):
        return Verdict(False, f"its pid {owner.get('pid')} is alive")
    if beat is not None and beat.running:
        if beat.host != here:
            return Verdict(False, f"its supervisor (pid {beat.pid}) keeps a heartbeat from host {beat.host}")
        for what, pid in (("supervisor", beat.pid), ("spark-submit", beat.child)):
            if _running(pid):
                return Verdict(False, f"its pid {owner.get('pid')} is gone but its {what} (pid {pid}) still runs")
    if intent is not None and intent.host == here and _running(intent.submit_pid):
        return Verdict(False, f"its pid {owner.get('pid')} is gone but its spark-submit (pid {intent.submit_pid}) runs")
    local = [p.pid for p in find_job_processes(namespace, job_id) if _running(p.pid)]
    if local:
        return Verdict(False, f"its pid {owner.get('pid')} is gone but spark-submit of this job runs (pids {local})")
    pid = owner.get("pid")
    return Verdict(True, f"its pid {pid} on this host is gone and no supervisor or spark-submit of it runs")


def earlier_try(holder: LeaseHolder, ours: Mapping[str, Any]) -> int | None:
    """The holder's try number when it is an earlier try of the task instance ``ours`` (a lease's
    owner) names: the same DAG, task, run and map index, a lower try number. ``None`` otherwise,
    and when either side does not name all of them (an older lease has no map index: it waits)."""
    theirs = holder.owner
    if any(theirs.get(k) is None or ours.get(k) is None or theirs[k] != ours[k] for k in TASK_INSTANCE):
        return None
    try:
        then, now = int(theirs["try_number"]), int(ours["try_number"])
    except (KeyError, TypeError, ValueError):
        return None
    return then if 0 < then < now else None


def describe(holder: LeaseHolder) -> str:
    """The holder in the words an on-call engineer searches for."""
    owner = holder.owner
    task = ".".join(str(owner[k]) for k in ("dag_id", "task_id") if owner.get(k))
    attempt = f" ({task}, run {owner.get('run_id')}, try {owner.get('try_number')})" if task else ""
    return f"pid {owner.get('pid')} on host {owner.get('host')}{attempt}, fence {holder.token}"


def take_over_if_dead(jobs: JobNamespace, lease: JobLease, log: Any) -> tuple[bool, str]:
    """After ``lease.acquire()`` found the lease held: take it over when its holder is provably
    dead. Returns ``(True, "")`` when taken, ``(False, "")`` when the lease changed hands or went
    free meanwhile (acquire again), else ``(False, what this attempt waits for)``."""
    holder = lease.peek()
    if holder is None:
        return False, ""
    job_id = lease.job_id
    intent = jobs.intents.get(job_id)
    beat = jobs.heartbeats.get(job_id)
    verdict = judge(holder, intent, beat, namespace=jobs.namespace, job_id=job_id)
    then = None if verdict.dead else earlier_try(holder, lease.owner)
    if then is not None:
        verdict = Verdict(
            True, f"it is try {then} of this task instance, which Airflow ended before it started this try "
            f"{lease.owner.get('try_number')} ({verdict.why}); recovery waits for or stops what it left running",
        )  # fmt: skip
    if not verdict.dead:
        return False, (
            f"the lease held by {describe(holder)}, which expires in {holder.ttl_ms / 1000:.1f}s unless "
            f"its holder renews it ({verdict.why})"
        )
    try:
        token = lease.take_over(holder)
    except LeaseHeldError:
        return False, ""  # another successor was faster: judge its holder on the next round
    if token is None:
        return False, ""
    log.warning(
        "Job %s: took over the lease from %s with fence %s, %.1fs before it would have expired: %s.",
        job_id, describe(holder), token, holder.ttl_ms / 1000, verdict.why,
    )  # fmt: skip
    owner = {k: v for k, v in holder.owner.items() if k in _OWNER_FACTS}
    step = RecoveryStep(
        TOOK_OVER,
        f"took over the lease from {describe(holder)}, {holder.ttl_ms / 1000:.1f}s before it would have expired: "
        f"{verdict.why}",
        predecessor=int(holder.token),
        facts={**owner, "ttl_left_s": round(holder.ttl_ms / 1000, 1)},
    )
    note(jobs, job_id, token, step, log)
    ours = lease.owner
    signals.tell(lambda: jobs.signals.took_over(dag_id=ours.get("dag_id"), task_id=ours.get("task_id")))
    return True, ""


def refusal(job_id: str, waiting_for: str, *, try_number: int, retries: int, lease_wait_timeout: float) -> str:
    """Why an attempt gives up on a held lease, and what happens next: only promise a retry
    when the task has one left."""
    left = retries - max(try_number, 1) + 1
    waited = (
        f"waited {lease_wait_timeout:g}s for" if lease_wait_timeout > 0 else "did not wait (lease_wait_timeout=0) for"
    )
    head = f"job {job_id}: not started, another attempt works on it; this one {waited} {waiting_for}."
    if left > 0:
        return (
            f"{head} Airflow will retry this task ({left} {'retry' if left == 1 else 'retries'} left); "
            "raise lease_wait_timeout to wait longer within one try."
        )
    return (
        f"{head} This was the task's last try (retries={retries}), so nothing retries it: clear the task "
        "once that attempt ended or its lease expired, or raise retries or lease_wait_timeout."
    )
