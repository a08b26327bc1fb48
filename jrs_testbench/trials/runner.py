"""Runs trials concurrently and injects their faults; restarts Redis underneath them.

Process tree of a run::

    caller (owns the EmbeddedRedis; restarts/crashes it on a seeded schedule)
     └── runner (forked; a child subreaper: orphaned stand-ins come back to it)
          ├── attempt (forked, its own process group)  ── stand-in (spark-submit's place)
          └── ...

Why this shape: attempts are forked from a parent that has already imported the product, which
costs ~1 ms instead of an interpreter start. The runner is single-threaded, so forking it is safe.
Each attempt leads a process group, so "the worker died" (SIGKILL the group) and "the task died
but spark-submit lived on" (SIGKILL the attempt only) are different faults. Redis belongs to the
caller, not the runner, because the runner reaps every child it has (``waitpid(-1)``) and must not
reap redis-server under ``EmbeddedRedis``'s feet.

A paused attempt (it SIGSTOPs itself at a step) is resumed once another attempt of its job has
logged ``lease_acquired`` or the TTL has surely passed, read from the history log: its lease is
gone when it wakes, which is the window the fence exists for.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import heapq
import itertools
import json
import os
import random
import signal
import sys
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from jrs_testbench.redis_server import EmbeddedRedis
from jrs_testbench.trials.attempt import run_attempt
from jrs_testbench.trials.config import DONE, AttemptPlan, Bench, Protocol
from jrs_testbench.trials.faults import Fault, FaultMix, ScheduledAttempt, TrialPlan, plan_trials
from jrs_testbench.trials.history import HistoryLog
from jrs_testbench.trials.processes import find_standins

PR_SET_CHILD_SUBREAPER = 36
FINISHER_TRIES = 6  # Airflow's retries: with backoff they outlast any Redis outage we inject
SIGNAL_FAULTS = (Fault.KILL_GROUP, Fault.KILL_ATTEMPT, Fault.STALL_ATTEMPT, Fault.STALL_GROUP)


@dataclass
class RunConfig:
    """One run of trials. Everything is bounded: trial count, per-trial time, optional wall budget."""

    trials: int
    seed: int
    workdir: Path
    concurrency: int = 8
    protocol: Protocol = field(default_factory=Protocol)
    mix: FaultMix = field(default_factory=FaultMix)
    redis_faults: bool = True
    redis_fault_every: tuple[float, float] = (6.0, 15.0)
    redis_crash_share: float = 0.5
    redis_down: tuple[float, float] = (0.1, 1.5)  # how long redis-server stays down each time
    trial_timeout: float = 60.0
    time_budget: float | None = None  # stop starting trials after this many seconds
    first_trial: int = 0


@dataclass
class RunOutcome:
    bench: Bench
    trials: int
    wall: float
    runner_exit: int


def run_trials(config: RunConfig, server: EmbeddedRedis) -> RunOutcome:
    """Run the trials against ``server`` (which this process may restart); blocks until done."""
    workdir = Path(config.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    namespace = f"trials-{config.seed}-{uuid.uuid4().hex[:6]}"
    bench = Bench(
        redis_url=server.url,
        namespace=namespace,
        root=str(workdir / "out"),
        spec_root=str(workdir / "specs"),
        log_path=str(workdir / "history.jsonl"),
    )
    bench.create_dirs()
    mix = config.mix
    if mix.lease_ttl != config.protocol.lease_ttl:
        mix = FaultMix(**{**mix.__dict__, "lease_ttl": config.protocol.lease_ttl})
    plans = plan_trials(config.seed, config.trials, mix, first=config.first_trial)
    started = time.monotonic()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the runner
        code = 1
        try:
            code = TrialRunner(bench, config, plans).run()
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    exit_code = _restart_redis_until(pid, server, bench, config)
    return RunOutcome(bench=bench, trials=len(plans), wall=time.monotonic() - started, runner_exit=exit_code)


def _restart_redis_until(runner: int, server: EmbeddedRedis, bench: Bench, config: RunConfig) -> int:
    """Restart or crash redis-server every few seconds (seeded) until the runner exits."""
    rng = random.Random(config.seed ^ 0x5EED)
    log = HistoryLog(bench.log_path)
    next_at = time.monotonic() + rng.uniform(*config.redis_fault_every)
    first = rng.sample([Fault.REDIS_CRASH, Fault.REDIS_RESTART], 2)  # both kinds, even in a short run
    try:
        while True:
            done, status = os.waitpid(runner, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            if config.redis_faults and time.monotonic() >= next_at:
                if first:
                    kind = first.pop()
                else:
                    kind = Fault.REDIS_CRASH if rng.random() < config.redis_crash_share else Fault.REDIS_RESTART
                t0 = log.log("fault", kind=kind.value)
                if kind is Fault.REDIS_CRASH:
                    server.crash()
                else:
                    server.stop()
                time.sleep(rng.uniform(*config.redis_down))  # a restart or failover is not instant
                _start(server)
                log.log("fault_end", kind=kind.value, down_ms=(time.monotonic_ns() - t0) // 1_000_000)
                next_at = time.monotonic() + rng.uniform(*config.redis_fault_every)
            time.sleep(0.05)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.kill(runner, signal.SIGTERM)
        raise
    finally:
        log.close()


def _start(server: EmbeddedRedis) -> None:
    for attempt in range(5):
        try:
            server.start()
            return
        except RuntimeError:
            if attempt == 4:
                raise
            time.sleep(0.2)


@dataclass
class _Attempt:
    trial: _Trial
    plan: AttemptPlan
    scheduled: ScheduledAttempt | None
    pid: int
    stalled_by_us: bool = False
    paused_at_ns: int | None = None
    resume_at: float | None = None
    exited: bool = False


@dataclass
class _Trial:
    plan: TrialPlan
    started: float
    attempts: list[_Attempt] = field(default_factory=list)
    pending: int = 0
    finisher_runs: int = 0
    done: bool = False


class TrialRunner:
    """The event loop of the runner process: starts attempts, signals them, reaps them."""

    def __init__(self, bench: Bench, config: RunConfig, plans: list[TrialPlan]) -> None:
        self.bench, self.config, self.protocol = bench, config, config.protocol
        self.plans = list(reversed(plans))
        self.log = HistoryLog(bench.log_path)
        self.stderr_path = str(Path(config.workdir) / "attempts.err")
        self.heap: list[tuple[float, int, Callable[[], None]]] = []
        self.seq = itertools.count()
        self.by_pid: dict[int, _Attempt] = {}
        self.active: list[_Trial] = []
        self.paused: dict[int, _Attempt] = {}
        self.acquired: dict[str, list[tuple[int, int]]] = {}  # job -> [(t_ns, pid)] from the log
        self._tail = open(bench.log_path, "rb")  # read as the run goes, closed with the process
        self._tail_rest = b""

    def run(self) -> int:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")
        started = time.monotonic()
        budget = self.config.time_budget
        try:
            while self.plans or self.active:
                now = time.monotonic()
                while self.plans and len(self.active) < self.config.concurrency:
                    if budget is not None and now - started > budget:
                        self.log.log("budget_exhausted", not_started=len(self.plans))
                        self.plans.clear()
                        break
                    self._start_trial(self.plans.pop(), now)
                while self.heap and self.heap[0][0] <= now:
                    heapq.heappop(self.heap)[2]()
                self._reap()
                self._tail_log()
                self._resume_paused(now)
                self._expire_trials(now)
                self.active = [t for t in self.active if not t.done]
                time.sleep(0.01 if not self.heap else max(0.0, min(0.01, self.heap[0][0] - time.monotonic())))
        finally:
            self._kill_leftovers()
        return 0

    # -- trials ----------------------------------------------------------------------------------
    def _start_trial(self, plan: TrialPlan, now: float) -> None:
        trial = _Trial(plan=plan, started=now, pending=len(plan.attempts))
        self.active.append(trial)
        self.log.log("trial_start", trial=plan.trial, job=plan.job_id, attempts=len(plan.attempts))
        for sa in plan.attempts:
            self._at(now + sa.start, functools.partial(self._start_attempt, trial, sa.plan, sa))
        if plan.concurrent:
            self.log.log("fault", kind=Fault.CONCURRENT_START.value, trial=plan.trial, job=plan.job_id)

    def _start_attempt(self, trial: _Trial, plan: AttemptPlan, scheduled: ScheduledAttempt | None) -> None:
        if trial.done:
            return
        pid = os.fork()
        if pid == 0:
            code = 4
            try:
                os.setpgid(0, 0)
                err = os.open(self.stderr_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, 1)
                os.dup2(err, 2)
                code = run_attempt(self.bench, self.protocol, plan)
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)
        attempt = _Attempt(trial=trial, plan=plan, scheduled=scheduled, pid=pid)
        trial.attempts.append(attempt)
        self.by_pid[pid] = attempt
        if scheduled is not None:
            trial.pending -= 1
            fault = scheduled.fault
            if fault is not None and fault.kind in SIGNAL_FAULTS:
                self._at(time.monotonic() + fault.at, functools.partial(self._inject, attempt))

    def _at(self, when: float, action: Callable[[], None]) -> None:
        heapq.heappush(self.heap, (when, next(self.seq), action))

    def _inject(self, attempt: _Attempt) -> None:
        fault = attempt.scheduled.fault if attempt.scheduled else None
        if fault is None or attempt.exited or attempt.trial.done:
            return
        kind, pid = fault.kind, attempt.pid
        try:
            if kind is Fault.KILL_GROUP:
                os.killpg(pid, signal.SIGKILL)
            elif kind is Fault.KILL_ATTEMPT:
                os.kill(pid, signal.SIGKILL)
            elif kind is Fault.STALL_ATTEMPT:
                attempt.stalled_by_us = True
                os.kill(pid, signal.SIGSTOP)
                self._at(time.monotonic() + fault.duration, lambda: self._continue(attempt, group=False))
            elif kind is Fault.STALL_GROUP:
                attempt.stalled_by_us = True
                os.killpg(pid, signal.SIGSTOP)
                self._at(time.monotonic() + fault.duration, lambda: self._continue(attempt, group=True))
        except ProcessLookupError:
            return  # it ended on its own a moment ago: nothing was injected
        self.log.log("fault", kind=kind.value, target=pid, trial=attempt.plan.trial, job=attempt.plan.job_id)

    def _continue(self, attempt: _Attempt, *, group: bool) -> None:
        # Logged before SIGCONT: the attempt was stopped from its "fault" line to this one.
        self.log.log("fault_end", target=attempt.pid, trial=attempt.plan.trial, job=attempt.plan.job_id)
        attempt.stalled_by_us = False
        if attempt.exited and not group:
            return  # reaped meanwhile (trial timeout): its pid may belong to someone else now
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(attempt.pid, signal.SIGCONT)
            else:
                os.kill(attempt.pid, signal.SIGCONT)

    # -- children --------------------------------------------------------------------------------
    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG | os.WUNTRACED)
            except ChildProcessError:
                return
            if pid == 0:
                return
            attempt = self.by_pid.get(pid)
            if attempt is None:
                continue  # an orphaned stand-in, come back to us
            if os.WIFSTOPPED(status):
                if not attempt.stalled_by_us and attempt.plan.pause_at and attempt.paused_at_ns is None:
                    attempt.paused_at_ns = time.monotonic_ns()
                    self.paused[pid] = attempt
                    kind = attempt.scheduled.fault.kind if attempt.scheduled and attempt.scheduled.fault else None
                    self.log.log(
                        "fault", kind=kind.value if kind else "pause", target=pid, trial=attempt.plan.trial,
                        job=attempt.plan.job_id, step=attempt.plan.pause_at,
                    )  # fmt: skip
                continue
            attempt.exited = True
            del self.by_pid[pid]
            self.paused.pop(pid, None)
            self._attempt_ended(attempt, os.waitstatus_to_exitcode(status))

    def _attempt_ended(self, attempt: _Attempt, code: int) -> None:
        trial = attempt.trial
        if trial.done:
            return
        if attempt.plan.finisher:
            if code == DONE:
                self._end_trial(trial, "done")
            elif trial.finisher_runs < FINISHER_TRIES:
                self._at(time.monotonic() + 0.25 * 2**trial.finisher_runs, lambda: self._start_finisher(trial))
            else:
                self._end_trial(trial, "incomplete")
            return
        if trial.pending == 0 and all(a.exited for a in trial.attempts):
            self._start_finisher(trial)

    def _start_finisher(self, trial: _Trial) -> None:
        if trial.done:
            return
        trial.finisher_runs += 1
        self._start_attempt(trial, trial.plan.finisher, None)

    def _end_trial(self, trial: _Trial, status: str) -> None:
        trial.done = True
        self.log.log(
            "trial_end", trial=trial.plan.trial, job=trial.plan.job_id, status=status,
            took_ms=int((time.monotonic() - trial.started) * 1000), finisher_runs=trial.finisher_runs,
        )  # fmt: skip

    def _expire_trials(self, now: float) -> None:
        for trial in self.active:
            if trial.done or now - trial.started < self.config.trial_timeout:
                continue
            for attempt in trial.attempts:
                if not attempt.exited:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(attempt.pid, signal.SIGKILL)
            for proc in find_standins(self.bench.namespace, trial.plan.job_id):
                with contextlib.suppress(psutil.Error):
                    proc.kill()
            self._end_trial(trial, "timeout")

    # -- pauses ----------------------------------------------------------------------------------
    def _tail_log(self) -> None:
        """Collect ``lease_acquired`` lines (who took which job's lease, when) as the log grows."""
        chunk = self._tail.read()
        if not chunk:
            return
        data = self._tail_rest + chunk
        lines = data.split(b"\n")
        self._tail_rest = lines.pop()
        active = {t.plan.job_id for t in self.active}
        for line in lines:
            if b'"lease_acquired"' not in line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("job") in active:
                self.acquired.setdefault(rec["job"], []).append((rec["t"], rec["pid"]))

    def _resume_paused(self, now: float) -> None:
        ttl_ns = int((self.protocol.lease_ttl + 0.25) * 1e9)
        for pid, attempt in list(self.paused.items()):
            if attempt.resume_at is None:
                paused = attempt.paused_at_ns or 0
                taken = any(t > paused and p != pid for t, p in self.acquired.get(attempt.plan.job_id, ()))
                if taken or time.monotonic_ns() - paused >= ttl_ns:
                    extra = attempt.scheduled.fault.extra_delay if attempt.scheduled and attempt.scheduled.fault else 0
                    attempt.resume_at = now + extra
            if attempt.resume_at is not None and now >= attempt.resume_at:
                del self.paused[pid]
                self._continue(attempt, group=False)

    def _kill_leftovers(self) -> None:
        """Nothing outlives the run: stand-ins still computing are killed and reaped."""
        leftovers = psutil.Process().children(recursive=True)
        for proc in leftovers:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                time.sleep(0.02)
        self.log.log("runner_end", killed_leftovers=len(leftovers))
