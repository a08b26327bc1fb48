"""One trial, driven from a runner worker: the tries of a job as Airflow starts them, the faults
of each try, the stop request, the cleanup until it commits, then the checker.

The worker is single-threaded and a child subreaper (orphaned supervisors and applications come
back to it and are reaped); each try is a forked child running :func:`.task.run_task`, each
cleanup one running :func:`.cleanup.run_cleanup`. Faults are logged to the trial's history
*before* they are sent (``fault`` with ``kind``, ``try``), and only when they found their target
(a fault that found nothing to hit is ``fault_missed``, never counted as injected).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psutil
import redis as redis_lib

from airflow_jrs.launch.supervisor import REQUEST_POLL
from airflow_jrs.protocol.processes import find_job_processes
from airflow_jrs.store.redis.intents import RedisIntentStore
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.stop_requests import RedisStopRequests
from jrs_testbench.trials import connect_launcher
from jrs_testbench.trials.cleanup import COMMITTED, NOTHING, run_cleanup
from jrs_testbench.trials.faults import TrialPlan, TryPlan
from jrs_testbench.trials.history import HistoryLog, read_history
from jrs_testbench.trials.hosts import HOST_LAUNCHERS, fork_on
from jrs_testbench.trials.sentinel_front import check_client
from jrs_testbench.trials.task import NO_RETRY, OK, run_task

CLEANUP_RUNS = 8
#: try faults the driver sends as a signal at a moment of its choosing
SIGNALLED = ("kill_task", "kill_task_computing", "kill_supervisor", "kill_app", "on_kill", "pause")
POLL = 0.02


@dataclass(frozen=True)
class Bench:
    """Where one run's shared things live, and how each host reaches Redis."""

    urls: dict[str, str]  # host -> its proxy's URL
    check_url: str  # a proxy never partitioned, re-pointed on failover: the CLI's and checker's
    namespace: str
    workdir: str
    lease_ttl: float
    #: SHA-256 hex, as the product's fingerprints are: only such a result is committed as a reference
    fingerprint: str = hashlib.sha256(b"fp-trials-v1").hexdigest()
    #: the Spark Connect server's event log folder: tries run through the Connect launcher (:mod:`.connect_launcher`)
    connect_events: str | None = None
    #: ``[jrs] result_documents`` of every try and cleanup (the compact clean entry), or None: off
    result_documents: str | None = None
    #: ``[jrs] durability`` of every try and cleanup
    durability: str = "none"

    @property
    def output_root(self) -> str:
        return f"{self.workdir}/out"

    @property
    def spec_root(self) -> str:
        return f"{self.workdir}/specs"

    def history(self, trial: int) -> str:
        return f"{self.workdir}/history/{trial}.jsonl"

    @property
    def run_history(self) -> str:
        return f"{self.workdir}/history/run.jsonl"

    def lock(self, job_id: str) -> str:
        return f"{self.workdir}/locks/{job_id}.lock"

    @property
    def requests(self) -> str:
        """Where a driver asks the runner for a run fault (:func:`request_run_fault`)."""
        return f"{self.workdir}/requests"

    def create_dirs(self) -> None:
        for sub in ("out", "specs", "history", "locks", "requests"):
            os.makedirs(f"{self.workdir}/{sub}", exist_ok=True)
        if self.result_documents:  # the shared folder, "mounted" (it is never created by the product)
            os.makedirs(self.result_documents, exist_ok=True)


#: The documents folder inside a run's workdir: its parent is the "mount point" a
#: ``documents_unmounted`` cleanup covers (so the folder the setting names is not there).
DOCUMENTS_FOLDER = "documents/shared"
#: How long a driver waits for a run fault it asked for.
REQUEST_LIMIT = 60.0


def request_run_fault(bench: Bench, name: str, kind: str) -> bool:
    """Ask the runner (the caller, where the Redis front lives) for run fault ``kind`` and wait
    until it was injected; ``False`` when it was not in time. The request is a file ``<name>.json``
    in :attr:`Bench.requests`; the runner answers with ``<name>.done`` (:class:`.runner.RunFaults`)."""
    path = f"{bench.requests}/{name}"
    with open(path + ".tmp", "w") as out:
        json.dump({"kind": kind}, out)
    os.replace(path + ".tmp", path + ".json")
    deadline = time.monotonic() + REQUEST_LIMIT
    while not os.path.exists(path + ".done"):
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL)
    return True


#: This worker's readers of a Connect server's event log, by folder.
OPERATION_LOGS: dict[str, connect_launcher.OperationLog] = {}


@dataclass
class _Try:
    plan: TryPlan
    index: int
    pid: int
    started: float
    code: int | None = None
    fault_done: bool = False
    paused_until: float | None = None
    held_at: float | None = None  # heartbeat_lost_early: when it held after its lease
    released: bool = False
    deleted_at: float = 0.0
    deletes: int = 0


def _ended(t: _Try) -> bool:
    """Ended, or paused (Airflow sees no heartbeat of a stopped task and starts its retry: a zombie)."""
    return t.code is not None or t.paused_until is not None


@dataclass
class TrialDriver:
    bench: Bench
    plan: TrialPlan
    trial_timeout: float = 90.0
    children: dict[int, int | None] = field(default_factory=dict)  # pid -> exit code once reaped

    def __post_init__(self) -> None:
        self.log = HistoryLog(self.bench.history(self.plan.trial), trial=self.plan.trial, job=self.plan.job_id)
        self.stderr = f"{self.bench.workdir}/errors.log"
        self.started = time.monotonic()
        self.tries: list[_Try] = []
        self.stop_sent = False
        self.cleanup_runs = 0

    # -- children --------------------------------------------------------------------------
    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.children:
                self.children[pid] = os.waitstatus_to_exitcode(status)
            for t in self.tries:
                if t.pid == pid:
                    t.code = os.waitstatus_to_exitcode(status)
                    self.log.log("try_end", run_id=t.plan.run_id, try_number=t.plan.try_number, code=t.code)

    def _spec(self, tp: TryPlan) -> dict[str, Any]:
        b, p = self.bench, self.plan
        return {
            "url": b.urls[tp.host], "namespace": b.namespace, "output_root": b.output_root,
            "spec_root": b.spec_root, "lease_ttl": b.lease_ttl, "job_id": p.job_id, "fingerprint": b.fingerprint,
            "dag_id": "trials", "task_id": tp.task_id, "run_id": tp.run_id, "try_number": tp.try_number,
            "last_try": tp.last_try, "retries": 3, "predecessor": tp.predecessor,
            "lease_wait_timeout": 2 * b.lease_ttl + 1, "recompute": tp.recompute, "history": b.history(p.trial),
            "trial": p.trial, "host": tp.host, "crash_at": tp.step if tp.fault == "crash_point" else None,
            "lock": b.lock(p.job_id), "stderr": self.stderr, "pause_before_write": tp.fault == "pause_before_write",
            "pause_before_forget": tp.fault == "pause_before_forget",
            "lose_acquire_reply": tp.fault == "lose_acquire_reply",
            "app_args": ["--chunks", str(tp.chunks), "--rows", str(tp.rows), "--pace", f"{tp.pace[0]},{tp.pace[1]}",
                         "--fail-at", str(tp.fail_at), "--seed", str(tp.seed),
                         *(["--term-linger", str(tp.term_linger)] if tp.term_linger else [])],
            "hold_after_lease": self._hold(len(self.tries)) if tp.fault == "heartbeat_lost_early" else None,
            "result_documents": b.result_documents, "durability": b.durability,
        }  # fmt: skip

    def _start_try(self, tp: TryPlan) -> _Try:
        for kind in tp.run_faults_before:
            name = f"{self.plan.trial}-{len(self.tries)}-{kind}"
            self.log.log("run_fault_requested", kind=kind, try_index=len(self.tries))
            if not request_run_fault(self.bench, name, kind):
                self.log.log("fault_missed", kind=kind, why=f"the runner did not inject it in {REQUEST_LIMIT:g} s")
        spec = {**self._spec(tp), "try_id": len(self.tries)}
        target = run_task if self.bench.connect_events is None else connect_launcher.exec_task
        pid = fork_on(target, spec, self.stderr, HOST_LAUNCHERS.get(tp.host))
        t = _Try(tp, len(self.tries), pid, time.monotonic())
        self.tries.append(t)
        return t

    # -- faults ----------------------------------------------------------------------------
    def _supervisor_and_app(self, t: _Try) -> tuple[psutil.Process | None, psutil.Process | None]:
        try:
            sups = psutil.Process(t.pid).children()
            apps = sups[0].children() if sups else []
        except psutil.Error:
            return None, None
        return (sups[0] if sups else None), (apps[0] if apps else None)

    def _hold(self, index: int) -> str:
        """The file a ``heartbeat_lost_early`` try waits for after its lease (``.held``: it waits)."""
        return f"{self.bench.workdir}/locks/{self.plan.job_id}.hold-{index}"

    def _lose_heartbeat(self, t: _Try, now: float) -> None:
        """While ``t`` holds after its lease, delete the job's heartbeat every ~50 ms on the current
        primary (an early expiry, again and again) for three of the supervisor's beats, then let
        ``t`` go on and keep deleting until it recorded its intent: its recovery meets no heartbeat."""
        if t.held_at is None:
            if not os.path.exists(self._hold(t.index) + ".held"):
                return
            t.held_at = now
            self.log.log("fault", kind="heartbeat_lost_early", try_index=t.index)
        if t.code is not None or self._logged(t, "step", "after_intent"):
            t.fault_done = True
            self.log.log("fault_end", kind="heartbeat_lost_early", try_index=t.index, deletes=t.deletes)
            return
        if now - t.deleted_at >= 0.05:
            key = KeySpace(self.bench.namespace).heartbeat(self.plan.job_id)
            with contextlib.suppress(redis_lib.RedisError):
                with check_client(self.bench.check_url, 2.0) as client:
                    t.deletes += client.delete(key)
            t.deleted_at = now
        if not t.released and now - t.held_at >= 3 * min(self.bench.lease_ttl / 3, REQUEST_POLL):
            t.released = True
            open(self._hold(t.index), "w").close()

    def _stalled(self, cleanup: int, since: int) -> bool:
        """Has cleanup run ``cleanup`` (started at ``since``, ns) ended, or logged its stall? (It
        logs under its host's pid, not this worker's: the stall is the only one since.)"""
        return self.children.get(cleanup) is not None or any(
            r.get("t", 0) > since and r.get("event") == "fault" and r.get("kind") == "slow_cleanup"
            for r in read_history(self.bench.history(self.plan.trial))
        )

    def _ended_or_logged(self, t: _Try, event: str) -> bool:
        return _ended(t) or self._logged_event(t, event)

    def _logged_event(self, t: _Try, event: str) -> bool:
        """Was ``event`` logged since try ``t`` started (by it, its supervisor or its application,
        which log under the fence rather than the try; a start-after try is the only one running)?"""
        since = int(t.started * 1e9)
        return any(r.get("event") == event and r.get("t", 0) > since
                   for r in read_history(self.bench.history(self.plan.trial)))  # fmt: skip

    def _logged(self, t: _Try, event: str, step: str) -> bool:
        return any(r.get("try") == t.index and r.get("event") == event and r.get("step") == step
                   for r in read_history(self.bench.history(self.plan.trial)))  # fmt: skip

    def _fault(self, t: _Try, now: float) -> None:
        tp = t.plan
        if tp.fault == "heartbeat_lost_early" and not t.fault_done:
            self._lose_heartbeat(t, now)
            return
        if t.paused_until is not None and tp.fault == "pause_before_write" and self._taken_over(t):
            t.paused_until = now  # its lease is another's now: wake it into the write it was about to make
        succeeded = functools.partial(self._taken_over, t, "result_written", "SUCCEEDED")
        if t.paused_until is not None and tp.fault == "pause_before_forget" and succeeded():
            t.paused_until = now  # a successor's success is acknowledged: wake it into the forget it was about to make
        if t.paused_until is not None and now >= t.paused_until:
            t.paused_until = None
            self.log.log("fault_end", kind="pause", try_index=t.index)
            with contextlib.suppress(ProcessLookupError):
                os.kill(t.pid, signal.SIGCONT)
        if tp.fault in ("pause_before_write", "pause_before_forget") and not t.fault_done and t.code is None:
            with contextlib.suppress(psutil.Error):
                if psutil.Process(t.pid).status() == psutil.STATUS_STOPPED:
                    t.fault_done, t.paused_until = True, now + tp.pause_s  # it logged the fault itself
                    if tp.fault == "pause_before_forget":  # until a successor's result is acknowledged
                        t.paused_until += 4 * self.bench.lease_ttl
            return
        if t.fault_done or tp.fault not in SIGNALLED:
            return
        if now - t.started < tp.at or t.code is not None:
            return
        target: int | None = t.pid
        if tp.fault in ("kill_supervisor", "kill_app", "kill_task_computing"):
            sup, app = self._supervisor_and_app(t)
            proc = sup if tp.fault == "kill_supervisor" else app
            if proc is None:
                return  # not launched yet: try again at the next poll, until the try ends
            target = t.pid if tp.fault == "kill_task_computing" else proc.pid  # the task: an orphan computes on
        t.fault_done = True
        self.log.log("fault", kind=tp.fault, try_index=t.index, target=target)
        with contextlib.suppress(ProcessLookupError):
            if tp.fault == "on_kill":
                os.kill(target, signal.SIGTERM)
            elif tp.fault == "pause":
                os.kill(target, signal.SIGSTOP)
                t.paused_until = now + tp.pause_s
            else:
                os.kill(target, signal.SIGKILL)

    def _taken_over(self, t: _Try, event: str = "lease_acquired", status: str | None = None) -> bool:
        """Has another try logged ``event`` (taking the lease; with ``status``: a result write of
        that status) since ``t`` stopped itself?"""
        paused = None
        for r in read_history(self.bench.history(self.plan.trial)):
            if r.get("try") == t.index and r.get("event") == "fault":
                paused = r["t"]
            elif paused is not None and r.get("event") == event and r.get("try") != t.index:
                if status is None or r.get("status") == status:
                    return True
        return False

    def _stop_request(self, now: float) -> None:
        request = self.plan.stop_request
        if request is None or self.stop_sent:
            return
        after, kind, index = request
        if index >= len(self.tries) or now - self.tries[index].started < after:
            return
        target = self.tries[index]
        try:  # as the CLI asks: the fence of the running attempt's intent
            with check_client(self.bench.check_url, 5.0) as client:
                intent = RedisIntentStore(client, self.bench.namespace, spec_root="").get(self.plan.job_id)
                if intent is None:
                    # Not recorded yet (the try is still starting: imports, the lease): ask again on
                    # the next round, as a person would, until the try has ended. Giving up at once
                    # made whether a planned stop happens depend on how fast a process starts.
                    if _ended(target):
                        self.stop_sent = True
                        self.log.log("fault_missed", kind=kind, why="no intent while the try ran")
                    return
                self.stop_sent = True
                asked = RedisStopRequests(client, self.bench.namespace).ask(
                    self.plan.job_id, intent.fence, kind, by="trials", reason="a stop request of the plan"
                )
            self.log.log("fault", kind=kind, fence=int(intent.fence), asked=asked is not None)
        except Exception as exc:
            self.stop_sent = True
            self.log.log("fault_missed", kind=kind, why=f"{type(exc).__name__}: {exc}")

    # -- the trial -------------------------------------------------------------------------
    def _wait(self, until: Callable[[], bool], limit: float) -> bool:
        deadline = time.monotonic() + limit
        while True:
            self._reap()
            now = time.monotonic()
            for t in self.tries:
                self._fault(t, now)
            self._stop_request(now)
            if until():
                return True
            if now > deadline:
                return False
            time.sleep(POLL)

    def _leftovers(self) -> list[psutil.Process]:
        """What still runs of this trial: its applications (by their marks), and any descendant of
        this worker but the hosts' own ``unshare`` and init."""
        own = list(find_job_processes(self.bench.namespace, self.plan.job_id))
        hosts = {h.init_pid for h in HOST_LAUNCHERS.values()}
        hosts |= {h._unshare.pid for h in HOST_LAUNCHERS.values() if h._unshare is not None}
        with contextlib.suppress(psutil.Error):
            own += [
                c
                for c in psutil.Process().children(recursive=True)
                if c.pid not in hosts and c.status() != psutil.STATUS_ZOMBIE
            ]
        return own

    def _server_idle(self) -> bool:
        """No operation of the job runs on the Connect server (one reader per worker: read on from its offset)."""
        assert self.bench.connect_events is not None
        log = OPERATION_LOGS.setdefault(
            self.bench.connect_events, connect_launcher.OperationLog(self.bench.connect_events)
        )
        return not log.running(self.bench.namespace, self.plan.job_id)

    def run(self) -> str:
        p = self.plan
        self.log.log("trial_start", hosts=p.hosts, tries=len(p.tries), plan_faults=p.faults)
        status = "done"
        runs = [r for r in dict.fromkeys(tp.run_id for tp in p.tries)]
        for run_id in runs:
            previous: _Try | None = None
            if any(tp.recompute for tp in p.tries if tp.run_id == run_id):
                self.log.log("fault", kind="recompute", run_id=run_id)  # a DAG run asking to recompute
            for tp in [tp for tp in p.tries if tp.run_id == run_id]:
                if previous is not None:
                    ended = functools.partial(_ended, previous)
                    if tp.start_after is not None:
                        started = functools.partial(self._ended_or_logged, previous, tp.start_after)
                        self._wait(started, self.trial_timeout)
                        if previous.code is None:
                            self.log.log("fault", kind="zombie", try_index=previous.index, after=tp.start_after)
                        else:
                            self.log.log("fault_missed", kind="zombie", why=f"the try ended before {tp.start_after}")
                    elif tp.zombie_after is not None and previous.code is None:
                        self._wait(ended, tp.zombie_after)
                        if previous.code is None:
                            self.log.log("fault", kind="zombie", try_index=previous.index)
                    else:
                        if not self._wait(ended, self.trial_timeout):
                            status = "timeout"
                            break
                    if previous.code in (OK, NO_RETRY):
                        break
                previous = self._start_try(tp)
            if not self._wait(lambda: all(t.code is not None for t in self.tries), self.trial_timeout):
                status = "timeout"
            # every supervisor and application of the job ended (orphans come back to us)
            if not self._wait(lambda: not self._leftovers(), 4 * self.bench.lease_ttl + 10):
                status = "timeout"
            if self.bench.connect_events is not None and not self._wait(
                self._server_idle, 4 * self.bench.lease_ttl + 60
            ):
                status = "timeout"  # an operation of the job still runs on the Connect server
            for proc in self._leftovers():
                self.log.log("leftover_killed", pid=proc.pid)
                with contextlib.suppress(psutil.Error):
                    proc.kill()
            self._wait(lambda: not self._leftovers(), 5)
            if run_id != runs[-1]:  # the next DAG run starts while this one's cleanup runs
                spawned = time.monotonic_ns()
                pid = self._cleanup_spawn(None, stall_s=p.slow_cleanup, stall_until_result=p.slow_cleanup_until_result)
                if p.slow_cleanup_until_result:  # ... and once it stalls after its first read (not before it)
                    self._wait(functools.partial(self._stalled, pid, spawned), self.trial_timeout)
            else:
                self._cleanup()  # the DAG run's cleanup task, until it commits
        self.log.log("trial_end", status=status, took_ms=int((time.monotonic() - self.started) * 1000))
        return status

    def _cleanup_spawn(self, crash: str | None, *, stall_s: float = 0.0, stall_until_result: bool = False,
                       unmounted: bool = False) -> int:  # fmt: skip
        """One run of the cleanup task, started now (reaped by :meth:`_reap`)."""
        b, p = self.bench, self.plan
        spec = {"url": b.urls[p.hosts[0]], "namespace": b.namespace, "output_root": b.output_root,
                "spec_root": b.spec_root, "lease_ttl": b.lease_ttl, "job_id": p.job_id,
                "history": b.history(p.trial), "trial": p.trial, "host": p.hosts[0], "crash_at": crash,
                "stall_s": stall_s, "stall_until_result": stall_until_result, "result_documents": b.result_documents,
                "durability": b.durability,
                "documents_unmounted": unmounted and b.result_documents is not None}  # fmt: skip
        pid = fork_on(run_cleanup, spec, self.stderr, HOST_LAUNCHERS.get(p.hosts[0]))
        self.children[pid] = None
        return pid

    def _cleanup(self) -> None:
        p = self.plan
        for n in range(CLEANUP_RUNS):
            crash = p.cleanup_crashes[self.cleanup_runs] if self.cleanup_runs < len(p.cleanup_crashes) else None
            self.cleanup_runs += 1
            pid = self._cleanup_spawn(crash, unmounted=n < p.documents_unmounted)
            self._wait(functools.partial(lambda p: self.children[p] is not None, pid), 120)
            code = self.children[pid]
            if code in (COMMITTED, NOTHING):
                return
            time.sleep(min(2.0, 0.1 * 2**n))
        self.log.log("cleanup_gave_up", runs=CLEANUP_RUNS)
