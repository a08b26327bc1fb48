"""Runs fault trials on a process pool, under run-wide Redis faults, and checks each one.

Process tree of a run::

    caller: the RedisFront (primary, replica, one proxy per host) and the run-fault thread
     └── pool worker (forked before any thread; a child subreaper), one trial at a time
          ├── task try (forked: JobAttempt.run) ── supervisor (forked: airflow_jrs.launch.supervisor.main)
          │                                          └── stand-in application (exec'ed, marked)
          └── cleanup (forked: commit_job)

Why this shape: the workers are forked from a parent that has imported the product, so a try
costs a fork, not an interpreter start (the supervisor too, see :mod:`.launcher`); the front and
its proxy threads live in the caller, which also injects the run faults (restart, crash,
failover losing the last acknowledged writes, partition of one host, clock step on the Redis
host) on a seeded schedule and logs each to ``history/run.jsonl``. Each worker checks its trial
as soon as it ended (:func:`.checker.check_trial`): the clean-output invariant holds after
*every* trial, not only at the end.
"""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.util
import os
import random
import resource
import statistics
import threading
import time
import traceback
import uuid
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from airflow_jrs.store.results.documents import FolderDocuments
from jrs_testbench.spark_connect import SparkConnectServer
from jrs_testbench.trials import connect_launcher
from jrs_testbench.trials.checker import TrialReport, Violation, check_trial
from jrs_testbench.trials.clock import faketime_missing
from jrs_testbench.trials.cluster_front import ClusterFront
from jrs_testbench.trials.faults import (
    REQUESTED_RUN_FAULTS,
    FaultMix,
    RunFault,
    TrialPlan,
    plan_run_faults,
    plan_trials,
)
from jrs_testbench.trials.history import HistoryLog, read_history
from jrs_testbench.trials.hosts import HostLauncher, become_subreaper, start_hosts, stop_hosts
from jrs_testbench.trials.redis_front import RedisFront
from jrs_testbench.trials.sentinel_front import SentinelFront, check_client
from jrs_testbench.trials.trial import DOCUMENTS_FOLDER, Bench, TrialDriver

HOSTS = ("h1", "h2", "h3")
CHECKER_HOST = "cli"


@dataclass
class RunConfig:
    trials: int
    seed: int
    workdir: Path
    concurrency: int = 4
    mix: FaultMix = field(default_factory=FaultMix)
    lease_ttl: float = 2.0
    first_trial: int = 0
    #: extra environment of the tries (``JRS_TRIALS_REVERT``: a fix patched back out)
    env: dict[str, str] = field(default_factory=dict)
    #: give each host its own hostname and PID namespace (:mod:`.hosts`; root only, else shared)
    isolate_hosts: bool = True
    #: start no trial after this many seconds (the report counts only the trials that ran)
    time_budget: float | None = None
    #: "standin" (spark-submit's shape: the real supervisor, :mod:`.launcher`) or "connect"
    #: (the product's ConnectLauncher on one Spark Connect server, :mod:`.connect_launcher`)
    launcher: str = "standin"
    #: "front" (a primary, a replica, one proxy per host: :mod:`.redis_front`) or "sentinel" (a
    #: Sentinel group every host follows itself: :mod:`.sentinel_front`; run faults: failovers only)
    topology: str = "front"
    #: ``[jrs] durability`` of every try and cleanup (``replicas:1``: a failover loses nothing acknowledged)
    durability: str = "none"
    #: "sentinel" only: every server behind its own TCP proxy, and some failovers cut the primary off
    cut_primary: bool = False
    #: a running :class:`jrs_testbench.spark_connect.SparkConnectServer` for "connect"; None: the run starts one
    connect_server: Any = None
    #: ``[jrs] result_documents`` on (the compact clean entry): cleanups write result documents to a
    #: folder of the run (:data:`.trial.DOCUMENTS_FOLDER`) and commit ~40-B references; the checker
    #: reads each clean reference's document
    result_documents: bool = False


@dataclass
class RunOutcome:
    reports: list[TrialReport]
    run_faults: Counter[str]
    wall: float
    cpu: float
    notes: list[str]
    #: the Sentinel failovers of the run (:class:`jrs_testbench.redis_sentinel.Failover`)
    failovers: list[Any] = field(default_factory=list)

    @property
    def violations(self) -> list[Violation]:
        return [v for r in self.reports for v in r.violations]

    @property
    def excused(self) -> list[Violation]:
        return [v for r in self.reports for v in r.excused]

    def fault_mix(self) -> Counter[str]:
        mix: Counter[str] = Counter(self.run_faults)
        for r in self.reports:
            mix.update(r.faults)
        return mix

    def takeover(self) -> tuple[float | None, float | None, int]:
        samples = sorted(t for r in self.reports for t in r.takeovers_ms)
        if not samples:
            return None, None, 0
        return statistics.median(samples), samples[min(len(samples) - 1, int(0.95 * len(samples)))], len(samples)

    def summary(self) -> dict[str, Any]:
        median, p95, n = self.takeover()
        return {
            "trials": len(self.reports),
            "violations": dict(Counter(v.kind for v in self.violations)),
            "excused": dict(Counter(v.kind for v in self.excused)),
            "fault_mix": dict(sorted(self.fault_mix().items())),
            "outcomes": dict(Counter(r.outcome for r in self.reports)),
            "status": dict(Counter(r.status for r in self.reports)),
            "task_errors": dict(sum((r.errors for r in self.reports), Counter())),
            "takeover_ms": {"median": median, "p95": p95, "samples": n},
            "unavailable_s": _spread([f.took_s for f in self.failovers]),
            "failovers_by_how": dict(Counter(f.how for f in self.failovers)),
            "wall_s": round(self.wall, 1),
            "cpu_s": round(self.cpu, 1),
            "notes": self.notes,
        }


# -- the pool worker ---------------------------------------------------------------------------
def _spread(samples: list[float]) -> dict[str, Any]:
    """Median and p95 (nearest rank) of ``samples``, rounded to ms."""
    if not samples:
        return {"median": None, "p95": None, "samples": 0}
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return {"median": round(statistics.median(ordered), 3), "p95": round(p95, 3), "samples": len(ordered)}


def _init_worker(env: dict[str, str], isolate: bool) -> None:
    become_subreaper()
    os.environ.update(env)
    if isolate:
        start_hosts(HOSTS)
        # workers are never replaced (no fork once the front runs threads): hosts end with the pool
        multiprocessing.util.Finalize(None, stop_hosts, exitpriority=10)


def _lossy_windows(path: str) -> list[tuple[int, int]]:
    """[hold, failover end] of every failover so far (an open one lasts forever)."""
    windows, hold = [], None
    for r in read_history(path):
        if r.get("event") == "run_fault" and r.get("kind") == "failover":
            hold = r["t"]
        elif r.get("event") == "run_fault_end" and r.get("kind") == "failover" and hold is not None:
            windows.append((hold, r["t"]))
            hold = None
    if hold is not None:
        windows.append((hold, 2**63))
    return windows


def _run_one(bench: Bench, plan: TrialPlan) -> TrialReport:
    try:
        TrialDriver(bench, plan).run()
        documents = FolderDocuments(bench.result_documents) if bench.result_documents else None
        with check_client(bench.check_url, 5.0) as client:
            return check_trial(read_history(bench.history(plan.trial)), client, bench.namespace,
                               lossy_windows=_lossy_windows(bench.run_history), documents=documents)  # fmt: skip
    except Exception:
        report = TrialReport(plan.trial, plan.job_id, status="harness_error")
        report.violations.append(Violation("harness_error", plan.trial, plan.job_id, traceback.format_exc()[-2000:]))
        return report


# -- run faults --------------------------------------------------------------------------------
class RunFaults(threading.Thread):
    """Injects :func:`~.faults.plan_run_faults` into the front until :meth:`finish`."""

    def __init__(self, front: RedisFront, faults: list[RunFault], log_path: str, requests: str | None = None) -> None:
        super().__init__(name="jrs-run-faults", daemon=True)
        self.front, self.faults, self.log = front, faults, HistoryLog(log_path)
        self.done = threading.Event()
        self.counts: Counter[str] = Counter()
        self.errors: list[str] = []
        self.lock = threading.Lock()  # one fault at a time, scheduled or requested
        self.requests = requests
        self.server = threading.Thread(target=self._serve, name="jrs-run-fault-requests", daemon=True)

    def start(self) -> None:
        super().start()
        if self.requests is not None:
            self.server.start()

    def finish(self) -> None:
        self.done.set()
        self.join(60)
        if self.server.is_alive():
            self.server.join(60)

    def _serve(self) -> None:
        """Inject the run faults trial drivers ask for (:func:`.trial.request_run_fault`) at the
        moment their plan chose: a request ``<name>.json`` is answered with ``<name>.done``."""
        assert self.requests is not None
        while not self.done.wait(0.02):
            for name in sorted(os.listdir(self.requests)):
                if not name.endswith(".json"):
                    continue
                path = os.path.join(self.requests, name)
                with open(path) as request:
                    kind = json.load(request)["kind"]
                try:
                    self._requested(kind)
                except Exception as exc:
                    self.errors.append(f"requested {kind}: {type(exc).__name__}: {exc}")
                    self.log.log("run_fault_error", kind=kind, error=str(exc))
                    self.front.heal()
                os.rename(path, path[: -len(".json")] + ".done")

    def _requested(self, kind: str) -> None:
        if kind not in REQUESTED_RUN_FAULTS:
            raise ValueError(f"a trial asked for run fault {kind!r}; the runner serves {REQUESTED_RUN_FAULTS}")
        with self.lock:
            if kind == "hold_replication":  # a failover window opens (the checker's lossy window)
                self.log.log("run_fault", kind="failover", requested=True)
                self.front.hold_replication()
            else:
                done = self.front.failover()
                self.front.add_replica()
                self.counts["failover"] += 1
                self.log.log("run_fault_end", kind="failover", lost_bytes=done.lost_bytes, requested=True)

    def run(self) -> None:
        start = time.monotonic()
        for fault in self.faults:
            if self.done.wait(max(0.0, start + fault.at - time.monotonic())):
                return
            try:
                with self.lock:
                    self._inject(fault)
            except Exception as exc:  # the run goes on; the report says what could not be injected
                self.errors.append(f"{fault.kind}: {type(exc).__name__}: {exc}")
                self.log.log("run_fault_error", kind=fault.kind, error=str(exc))
                self.front.heal()

    def _inject(self, f: RunFault) -> None:
        front, log = self.front, self.log
        detail: dict[str, Any] = {}
        if f.kind == "partition":
            detail = {"host": f.host, "mode": f.mode}
        elif f.kind == "clock_step":
            detail = {"step_s": f.step_s}
        kind = "durable_failover" if f.kind == "failover" and not getattr(front, "lossy", True) else f.kind
        log.log("run_fault", kind=kind, **detail)
        if f.kind == "redis_restart":
            front.restart(f.duration)
        elif f.kind == "redis_crash":
            front.crash(f.duration)
        elif f.kind == "failover":
            front.hold_replication()  # from here the primary acknowledges what the replica never gets
            self.done.wait(f.duration)
            done = front.failover()
            detail = {"lost_bytes": done.lost_bytes, "took_s": round(done.took_s, 3)}
            front.add_replica()
        elif f.kind == "partition":
            front.partition(f.host, f.mode, delay_ms=random.Random(f.at).uniform(100, 1500))
            self.done.wait(f.duration)
            front.heal(f.host)
        elif f.kind == "clock_step":
            front.step_clock(f.step_s)
            self.done.wait(f.duration)
            front.step_clock(-f.step_s)
        self.counts[f"{f.kind}:{f.mode}" if f.kind == "partition" else f.kind] += 1
        log.log("run_fault_end", kind=kind, **detail)


def run_trials(config: RunConfig) -> RunOutcome:
    """Run and check ``config.trials`` trials; blocks until done."""
    workdir = Path(config.workdir)
    mix, notes = config.mix, []
    clock = mix.run_weights.get("clock_step", 0) > 0
    if clock and (missing := faketime_missing()):
        notes.append(f"clock_step not injected: {missing}")
        mix = FaultMix(**{**mix.__dict__, "run_weights": {**mix.run_weights, "clock_step": 0}})
        clock = False
    env, server, own_server = dict(config.env), config.connect_server, False
    if config.launcher == "connect":
        mix, own_server = _connect_mix(mix, notes), server is None
        server = server or SparkConnectServer(workdir / "connect")
        env[connect_launcher.URL_ENV] = server.url
    elif config.launcher != "standin":
        raise ValueError(f"launcher {config.launcher!r}: the trials know 'standin' and 'connect'")
    if config.topology in ("sentinel", "cluster"):
        mix = _sentinel_mix(mix, notes, config.topology)
    elif config.topology != "front":
        raise ValueError(f"topology {config.topology!r}: the trials know 'front', 'sentinel' and 'cluster'")
    plans = plan_trials(config.seed, config.trials, mix, ttl=config.lease_ttl, first=config.first_trial)
    requested = {kind for p in plans for tp in p.tries for kind in tp.run_faults_before}
    replica = mix.run_weights.get("failover", 0) > 0 or bool(requested)
    t0, cpu0 = time.monotonic(), _cpu()
    if config.isolate_hosts:
        probe = HostLauncher("probe").start()
        if probe.isolated:
            probe.crash(wait=True)
        else:
            notes.append(f"hosts not isolated: {probe.why_not_isolated}")
    ctx = multiprocessing.get_context("fork")
    pool = ctx.Pool(
        config.concurrency, initializer=_init_worker, initargs=(env, config.isolate_hosts), maxtasksperchild=None
    )  # fmt: skip  (no respawn: never fork once the front runs threads)
    try:
        if own_server:  # after the fork of the workers: starting it initialises gRPC here
            server.start()
        with _front(config, workdir, replica, clock) as front:
            namespace = f"trials-{config.seed}-{uuid.uuid4().hex[:6]}"
            if isinstance(front, ClusterFront):
                front.namespace = namespace  # the slot whose primary fails over
            documents = str(workdir / DOCUMENTS_FOLDER) if config.result_documents else None
            bench = Bench({h: front.url_for(h) for h in HOSTS}, front.url_for(CHECKER_HOST), namespace, str(workdir),
                          config.lease_ttl, connect_events=str(server.event_log_dir) if server else None,
                          result_documents=documents, durability=config.durability)  # fmt: skip
            bench.create_dirs()
            span = 3600.0 * 24
            injector = RunFaults(front, plan_run_faults(config.seed, span, mix, ttl=config.lease_ttl),
                                 bench.run_history, bench.requests if requested else None)  # fmt: skip
            injector.start()
            try:
                deadline = None if config.time_budget is None else time.time() + config.time_budget
                ran = pool.imap_unordered(_call, [(bench, p, deadline) for p in plans])
                reports = [r for r in ran if r is not None]
            finally:
                injector.finish()
                front.heal()
        pool.close()  # workers exit on their own: their hosts end with them (finalizers)
        pool.join()
    finally:
        pool.terminate()
        if own_server:
            server.stop()
    notes += injector.errors
    return RunOutcome(sorted(reports, key=lambda r: r.trial), injector.counts, time.monotonic() - t0,
                      _cpu() - cpu0, notes, failovers=list(getattr(front, "failovers", [])))  # fmt: skip


def _front(config: RunConfig, workdir: Path, replica: bool, clock: bool) -> Any:
    lossy = not config.durability.startswith("replicas")
    if config.topology == "sentinel":
        return SentinelFront(workdir / "sentinel", lossy=lossy, proxied=config.cut_primary)
    if config.topology == "cluster":
        return ClusterFront(workdir / "cluster", lossy=lossy)
    return RedisFront(workdir / "redis", replica=replica, clock=clock)


def _sentinel_mix(mix: FaultMix, notes: list[str], topology: str) -> FaultMix:
    """Behind Sentinel or on a cluster the run faults are real failovers only: no proxy to
    partition, no clock to step, and a restart or crash of the primary *is* a failover."""
    dropped = sorted(k for k, w in mix.run_weights.items() if w > 0 and k != "failover")
    if dropped:
        notes.append(f"{topology}: run faults {dropped} not drawn (every run fault is a failover)")
    return replace(mix, run_weights={"failover": 1.0})


def _connect_mix(mix: FaultMix, notes: list[str]) -> FaultMix:
    """The mix without the faults that need spark-submit's supervisor and application processes."""
    if mix.shape is not None:
        raise ValueError(f"trial shape {mix.shape!r} kills a spark-submit application: not a Connect trial")
    skipped = [f for f in connect_launcher.SKIPPED_FAULTS if mix.try_weights.get(f, 0) > 0]
    if skipped:
        notes.append(f"not drawn with the Connect launcher (no supervisor, no application process): {skipped}")
    return replace(mix, try_weights={k: w for k, w in mix.try_weights.items() if k not in skipped})


def _call(args: tuple[Bench, TrialPlan, float | None]) -> TrialReport | None:
    bench, plan, deadline = args
    if deadline is not None and time.time() > deadline:
        return None  # out of time: not run, not counted
    return _run_one(bench, plan)


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
