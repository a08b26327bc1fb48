"""What goes wrong in each trial, drawn from one seed before anything runs.

A trial is one job, run as Airflow would run it: tries 1..k of a DAG run, each started after
the previous one ended or was killed (``last_try`` on the last), some of them "lost" (a zombie:
the try runs on while its retry starts), on 1-3 hosts; sometimes a later DAG run that asks to
recompute the job; sometimes a stop or cancel request while a try runs; then the cleanup task,
re-run until it commits. Faults per try: SIGKILL of the task process, of its supervisor or of
the application at a random moment; SIGKILL at a named crash point
(:data:`airflow_jrs.protocol.steps.STEPS`); Airflow's ``on_kill`` (SIGTERM); SIGSTOP of the task
past its lease TTL; a planned application failure. Faults of the whole run (Redis restarts and
crashes, failovers that lose acknowledged writes, partitions of one host, clock steps on the
Redis host) are drawn by :func:`plan_run_faults` and injected by the runner.

Drawing the whole plan up front from ``random.Random(seed)`` makes a run reproducible in *what*
is injected; *when* it lands relative to the attempt's steps still depends on scheduling, which
is the point (Jepsen: the interleavings come from the real system).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from airflow_jrs.protocol.steps import STEPS

TASK_STEPS = tuple(s for s in STEPS if not s.startswith("cleanup"))
CLEANUP_STEPS = tuple(s for s in STEPS if s.startswith("cleanup"))

#: Faults of one try, with their default weights (drawn for ``try_fault_rate`` of the tries).
TRY_FAULTS: dict[str, float] = {
    "kill_task": 3,  # SIGKILL the task process at a random moment (its supervisor lives on)
    "kill_supervisor": 1.5,  # SIGKILL the supervisor (the application dies with it)
    "kill_app": 1.5,  # SIGKILL the application (spark-submit sees it fail)
    "crash_point": 4,  # SIGKILL the task at a named step
    "on_kill": 1.5,  # SIGTERM the task: Airflow's on_kill
    "pause": 1.5,  # SIGSTOP the task past its lease TTL
    "pause_before_write": 1.5,  # the task stops itself right before its result write, past its TTL
    "app_failure": 1,  # the application fails on purpose
}
#: Faults of the whole run, with their default weights.
#: Run faults a trial's driver can ask for at a moment of its plan (``TryPlan.run_faults_before``):
#: hold replication (from here the primary acknowledges what the replica never gets), then fail
#: over to the replica (losing those writes) and add a new replica.
REQUESTED_RUN_FAULTS = ("hold_replication", "failover")
RUN_FAULTS: dict[str, float] = {
    "redis_restart": 2,
    "redis_crash": 2,
    "failover": 1,
    "partition": 3,
    "clock_step": 1,
}
PARTITION_MODES = ("drop-replies", "delay", "blackhole")


@dataclass(frozen=True)
class TryPlan:
    run_id: str
    try_number: int
    host: str
    last_try: bool
    predecessor: str = "wait"
    #: start while the previous try still runs (it was "lost": a zombie), this many seconds after it
    zombie_after: float | None = None
    fault: str | None = None
    #: seconds after the start for random-moment faults; the step for ``crash_point``
    at: float = 0.0
    step: str | None = None
    pause_s: float = 0.0
    chunks: int = 3
    rows: int = 4
    pace: tuple[float, float] = (0.01, 0.06)
    fail_at: int = -1
    recompute: bool = False
    seed: int = 0
    #: seconds the application computes on after a SIGTERM (spark-submit's shutdown hooks); 0: it ends at once
    term_linger: float = 0.0
    #: start once the previous try logged this history event (e.g. ``work_start``: its application
    #: computes), and as a zombie if it still runs then: a moment chosen by event, not by seconds
    start_after: str | None = None
    #: run faults the driver asks the runner for, and waits for, before it starts this try
    #: (``hold_replication``, ``failover``: :data:`REQUESTED_RUN_FAULTS`)
    run_faults_before: tuple[str, ...] = ()
    #: the try's task: tries of one run and task are one task instance (a retry takes the lease over
    #: from its own earlier try at once); another task computing the same job is another one
    task_id: str = "submit"


@dataclass(frozen=True)
class TrialPlan:
    trial: int
    job_id: str
    hosts: list[str]
    tries: list[TryPlan]
    #: (seconds after the chosen try started, "stop" | "cancel", index of that try) or None
    stop_request: tuple[float, str, int] | None = None
    #: crash points of successive cleanup runs (None: that run is not crashed)
    cleanup_crashes: list[str | None] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)
    #: seconds the first DAG run's cleanup stalls after its first read, while the recompute run
    #: goes on (a cleanup retrying with backoff); 0: none
    slow_cleanup: float = 0.0
    #: the first DAG run's cleanup stalls after its first read until the recompute run's result
    #: is acknowledged (whatever that takes), instead of ``slow_cleanup`` seconds
    slow_cleanup_until_result: bool = False
    #: the first this many runs of the last cleanup run where the result documents folder is not
    #: mounted (only with ``result_documents`` on)
    documents_unmounted: int = 0


@dataclass(frozen=True)
class FaultMix:
    """How often each fault is drawn."""

    try_fault_rate: float = 0.5
    try_weights: dict[str, float] = field(default_factory=lambda: dict(TRY_FAULTS))
    zombie_rate: float = 0.12
    recompute_rate: float = 0.15
    stop_rate: float = 0.08
    cleanup_crash_rate: float = 0.3
    stop_predecessor_rate: float = 0.3
    run_weights: dict[str, float] = field(default_factory=lambda: dict(RUN_FAULTS))
    #: seconds between two run faults (uniform)
    run_fault_every: tuple[float, float] = (4.0, 10.0)
    #: every trial has this fixed shape instead of drawn tries (:data:`SHAPES`); None: drawn
    shape: str | None = None

    def only(self, names: set[str]) -> FaultMix:
        """The same mix restricted to the faults named (``--faults``)."""
        unknown = names - set(TRY_FAULTS) - set(RUN_FAULTS) - {"zombie", "recompute", "stop", "cleanup_crash"}
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; known: {sorted({*TRY_FAULTS, *RUN_FAULTS})} "
                             "and zombie, recompute, stop, cleanup_crash")  # fmt: skip
        return FaultMix(
            try_fault_rate=self.try_fault_rate,
            try_weights={k: v for k, v in self.try_weights.items() if k in names},
            zombie_rate=self.zombie_rate if "zombie" in names else 0.0,
            recompute_rate=self.recompute_rate if "recompute" in names else 0.0,
            stop_rate=self.stop_rate if "stop" in names else 0.0,
            cleanup_crash_rate=self.cleanup_crash_rate if "cleanup_crash" in names else 0.0,
            stop_predecessor_rate=self.stop_predecessor_rate,
            run_weights={k: v for k, v in self.run_weights.items() if k in names},
            run_fault_every=self.run_fault_every,
        )


def _tries(rng: random.Random, mix: FaultMix, run_id: str, hosts: list[str], ttl: float, recompute: bool,
           faults: list[str]) -> list[TryPlan]:  # fmt: skip
    kinds = [k for k, w in mix.try_weights.items() if w > 0]
    weights = [mix.try_weights[k] for k in kinds]
    count = rng.choice([1, 2, 2, 3, 3, 4])
    tries = []
    for n in range(1, count + 1):
        fault = rng.choices(kinds, weights)[0] if kinds and rng.random() < mix.try_fault_rate else None
        zombie = n > 1 and rng.random() < mix.zombie_rate
        if zombie:
            faults.append("zombie")
        if fault:
            faults.append(fault)
        chunks = rng.randint(2, 5)
        tries.append(TryPlan(
            run_id=run_id, try_number=n, host=rng.choice(hosts), last_try=n == count,
            predecessor="stop" if rng.random() < mix.stop_predecessor_rate else "wait",
            zombie_after=rng.uniform(0.2, 1.5) if zombie else None,
            fault=fault, at=rng.uniform(0.05, 1.5), step=rng.choice(TASK_STEPS) if fault == "crash_point" else None,
            pause_s=rng.uniform(1.3 * ttl, 2.2 * ttl), chunks=chunks, rows=rng.randint(1, 6),
            pace=(0.01, rng.uniform(0.02, 0.15)), fail_at=rng.randrange(chunks) if fault == "app_failure" else -1,
            recompute=recompute, seed=rng.getrandbits(32),
        ))  # fmt: skip
    return tries


def _heartbeat_lost_early(rng: random.Random, trial: int, ttl: float) -> TrialPlan:
    """What a failover to a replica without the key, or a clock step on the Redis host, does to
    ONE job's heartbeat: try 1 on h1 is SIGKILLed once its application computes (for 3 TTLs and
    more, an orphan under its live supervisor); try 2 on h2 takes the lease after the TTL and holds
    right after it (``after_lease``) while the driver deletes try 1's heartbeat, for three beats
    and until try 2 recorded its intent. Fixed, the orphan's supervisor kills it at its next beat,
    seconds before try 2 launches. With the heartbeat re-created, the orphan still computes when
    try 2's application (quick) starts: its supervisor stops it only at its first beat after try
    2's supervisor took the heartbeat, with SIGTERM and a grace of what is left of its self-fence
    deadline (0.7 TTL less a beat at least), and it computes on through that grace as a driver's
    shutdown hooks do; a TTL of 5 s leaves try 2's application 2.5 s to start."""
    per_chunk = (3 * ttl + 8) / 12
    orphan = TryPlan(run_id="run-1", try_number=1, host="h1", last_try=False, fault="kill_task_computing",
                     chunks=12, rows=2, pace=(per_chunk, per_chunk * 1.1), seed=rng.getrandbits(32),
                     term_linger=ttl)  # fmt: skip
    successor = TryPlan(run_id="run-1", try_number=2, host="h2", last_try=True, fault="heartbeat_lost_early",
                        chunks=2, rows=2, pace=(0.01, 0.02), seed=rng.getrandbits(32))  # fmt: skip
    return TrialPlan(trial, f"job-{trial}", ["h1", "h2"], [orphan, successor],
                     faults=["kill_task_computing", "heartbeat_lost_early"])  # fmt: skip


def _try(run_id: str, n: int, *, last: bool, rng: random.Random, **fields: object) -> TryPlan:
    """A try of a fixed shape on h1 (unless ``host=``), waiting for its predecessor."""
    plan: dict[str, object] = dict(run_id=run_id, try_number=n, host="h1", last_try=last, seed=rng.getrandbits(32))
    return TryPlan(**{**plan, **fields})  # type: ignore[arg-type]


def _run(run_id: str, rng: random.Random, tries: int = 3, **fields: object) -> list[TryPlan]:
    """A DAG run of ``tries`` plain tries (a retry starts only when the try before failed): a
    shape that needs the run's result must not lose it to a try that failed on a loaded machine
    (its supervisor self-fences when Redis does not answer in time)."""
    return [_try(run_id, n, last=n == tries, rng=rng, chunks=2, rows=2, **fields) for n in range(1, tries + 1)]


def _adopt_after_kill(rng: random.Random, trial: int, ttl: float) -> TrialPlan:
    """Try 1's task is SIGKILLed once its application computes (the supervisor and the application
    live on); try 2 waits for the application and adopts its output (a result naming try 1's folder)."""
    tries = [_try("run-1", 1, last=False, rng=rng, fault="kill_task_computing", chunks=5, rows=3, pace=(0.1, 0.15)),
             _try("run-1", 2, last=True, rng=rng, chunks=2, rows=2)]  # fmt: skip
    return TrialPlan(trial, f"job-{trial}", ["h1"], tries, faults=["kill_task_computing"])


def _recompute_during_slow_cleanup(rng: random.Random, trial: int, ttl: float) -> TrialPlan:
    """Run 1 computes; its cleanup stalls after its first read until run 2, which recomputes,
    has its result acknowledged; then the stalled cleanup goes on (a cleanup retrying with backoff)."""
    tries = _run("run-1", rng) + _run("run-2", rng, recompute=True)
    return TrialPlan(trial, f"job-{trial}", ["h1"], tries, faults=["recompute", "slow_cleanup"],
                     slow_cleanup_until_result=True)  # fmt: skip


def _forget_paused(rng: random.Random, trial: int, ttl: float) -> TrialPlan:
    """Run 1 computes; run 2 recomputes: its try 1 stops itself right before its forget reaches
    Redis (its fence and the entry it read taken) until try 2, which takes the lease after the
    TTL, has its result acknowledged; then it is woken into that forget."""
    paused = _try("run-2", 1, last=False, rng=rng, recompute=True, fault="pause_before_forget", pause_s=60.0)
    successors = [replace(t, try_number=t.try_number + 1) for t in _run("run-2", rng, recompute=True)]
    tries = [*_run("run-1", rng), paused, *successors]
    return TrialPlan(trial, f"job-{trial}", ["h1"], tries, faults=["recompute", "pause_before_forget"])


def _zombie_while_computing(rng: random.Random, trial: int, ttl: float) -> TrialPlan:
    """Try 1 computes for ~3 TTLs; try 2 starts on the same host once try 1's application logged
    its start (try 1 was "lost": a zombie that holds its lease and computes)."""
    per_chunk = 3 * ttl / 8
    tries = [_try("run-1", 1, last=False, rng=rng, chunks=8, rows=2, pace=(per_chunk, per_chunk * 1.05)),
             _try("run-1", 2, last=True, rng=rng, chunks=2, rows=2, start_after="work_start")]  # fmt: skip
    return TrialPlan(trial, f"job-{trial}", ["h1"], tries, faults=["zombie"])


def _other_task_while_computing(rng: random.Random, trial: int, ttl: float) -> TrialPlan:
    """Try 1 computes for ~3 TTLs; another task of the run, computing the same job, starts on the
    same host once that application logged its start. Another task instance: only what this host
    sees of the holder may let it take the lease over (a retry takes it from its own earlier try
    at once, by design, so :func:`_zombie_while_computing` cannot show this)."""
    per_chunk = 3 * ttl / 8
    other = _try("run-1", 1, last=True, rng=rng, chunks=2, rows=2, start_after="work_start", task_id="other")
    tries = [_try("run-1", 1, last=False, rng=rng, chunks=8, rows=2, pace=(per_chunk, per_chunk * 1.05)), other]
    return TrialPlan(trial, f"job-{trial}", ["h1"], tries, faults=["zombie"])


def _two_tries(rng: random.Random, trial: int, ttl: float) -> TrialPlan:
    """Two tries one after the other on h1, the first computing for ~3 TTLs (a cluster driver that
    outlives a client which failed or returned early is still running when the retry starts)."""
    per_chunk = 3 * ttl / 8
    tries = [_try("run-1", 1, last=False, rng=rng, chunks=8, rows=2, pace=(per_chunk, per_chunk * 1.05)),
             _try("run-1", 2, last=True, rng=rng, chunks=2, rows=2)]  # fmt: skip
    return TrialPlan(trial, f"job-{trial}", ["h1"], tries)


def _acquire_reply_lost(rng: random.Random, trial: int, ttl: float) -> TrialPlan:
    """One try whose first ACQUIRE's reply is lost (redis-py sends the command again)."""
    tries = [_try("run-1", 1, last=True, rng=rng, chunks=2, rows=2, fault="lose_acquire_reply")]
    return TrialPlan(trial, f"job-{trial}", ["h1"], tries, faults=["lose_acquire_reply"])


def _token_handed_out_twice(rng: random.Random, trial: int, ttl: float) -> TrialPlan:
    """Replication is held before try 1 takes its lease (INCR of the fence counter: token N), and
    its application fails after writing 4 parts into its staging folder; once try 1 ended, a
    failover loses everything since the hold (the INCR, the lease, the failure), and try 2 gets
    token N again and writes 1 part. Only the owner nonce tells the two holders' folders apart.
    The namespace's fence counter must be this trial's alone (one trial at a time)."""
    hold, failover = ("hold_replication",), ("failover",)
    tries = [_try("run-1", 1, last=False, rng=rng, chunks=6, rows=3, fail_at=4, run_faults_before=hold),
             _try("run-1", 2, last=True, rng=rng, chunks=1, rows=2, run_faults_before=failover)]  # fmt: skip
    return TrialPlan(trial, f"job-{trial}", ["h1"], tries, faults=["app_failure"])


def _documents_unmounted(rng: random.Random, trial: int, ttl: float) -> TrialPlan:
    """One try computes; the first run of its cleanup runs where the result documents folder is
    not mounted (the folder ``[jrs] result_documents`` names is not there), the next ones where it is."""
    return TrialPlan(trial, f"job-{trial}", ["h1"], _run("run-1", rng), documents_unmounted=1)


#: Trial shapes a mix can ask for (``FaultMix.shape``): a fixed plan of one trial, for a fault
#: whose timing a drawn plan would reach only by chance (each reverted-fix case names one).
SHAPES = {
    "heartbeat_lost_early": _heartbeat_lost_early,
    "adopt_after_kill": _adopt_after_kill,
    "recompute_during_slow_cleanup": _recompute_during_slow_cleanup,
    "forget_paused": _forget_paused,
    "zombie_while_computing": _zombie_while_computing,
    "other_task_while_computing": _other_task_while_computing,
    "two_tries": _two_tries,
    "acquire_reply_lost": _acquire_reply_lost,
    "token_handed_out_twice": _token_handed_out_twice,
    "documents_unmounted": _documents_unmounted,
}


def plan_trials(seed: int, trials: int, mix: FaultMix | None = None, *, ttl: float = 2.0, first: int = 0
                ) -> list[TrialPlan]:  # fmt: skip
    """``trials`` plans, reproducible from ``seed``."""
    mix = mix or FaultMix()
    rng = random.Random(seed)
    plans = []
    if mix.shape is not None and mix.shape not in SHAPES:
        raise ValueError(f"unknown trial shape {mix.shape!r}; known: {sorted(SHAPES)}")
    for n in range(first, first + trials):
        if mix.shape is not None:
            plans.append(SHAPES[mix.shape](rng, n, ttl))
            continue
        hosts = [f"h{i}" for i in range(1, rng.choice([1, 2, 2, 3]) + 1)]
        faults: list[str] = []
        tries = _tries(rng, mix, "run-1", hosts, ttl, False, faults)
        slow = 0.0
        if rng.random() < mix.recompute_rate:
            faults.append("recompute")
            tries += _tries(rng, mix, "run-2", hosts, ttl, True, faults)
            if rng.random() < 0.5:
                slow = rng.uniform(0.5, 3.0)
                faults.append("slow_cleanup")
        stop = None
        if rng.random() < mix.stop_rate:
            # Soon after the try starts (its intent is waited for): a quiet machine runs a trial's
            # application in about 0.4 s, so a request drawn at 0.3-1.5 s mostly came after it ended.
            stop = (rng.uniform(0.05, 0.3), rng.choice(["stop", "cancel"]), rng.randrange(len(tries)))
            faults.append(stop[1])
        crashes: list[str | None] = []
        while rng.random() < mix.cleanup_crash_rate and len(crashes) < 3:
            crashes.append(rng.choice(CLEANUP_STEPS))
            faults.append("cleanup_crash")
        plans.append(TrialPlan(n, f"job-{n}", hosts, tries, stop, crashes, faults, slow))
    return plans


@dataclass(frozen=True)
class RunFault:
    kind: str
    at: float  # seconds after the run started
    host: str = "h1"
    mode: str = ""
    duration: float = 0.0
    step_s: float = 0.0


def plan_run_faults(seed: int, span: float, mix: FaultMix | None = None, *, ttl: float = 2.0) -> list[RunFault]:
    """Run-wide faults over ``span`` seconds (the runner stops at the last trial)."""
    mix = mix or FaultMix()
    rng = random.Random(seed ^ 0x5EED)
    kinds = [k for k, w in mix.run_weights.items() if w > 0]
    if not kinds:
        return []
    weights = [mix.run_weights[k] for k in kinds]
    faults, at = [], rng.uniform(1.0, mix.run_fault_every[0])
    while at < span:
        kind = rng.choices(kinds, weights)[0]
        faults.append(RunFault(
            kind=kind, at=at, host=rng.choice(["h1", "h2", "h3"]), mode=rng.choice(PARTITION_MODES),
            duration=rng.uniform(0.2, 2.5 * ttl) if kind == "partition" else rng.uniform(0.1, 1.0),
            step_s=rng.choice([-1, 1]) * rng.uniform(1.5 * ttl, 4 * ttl),
        ))  # fmt: skip
        at += rng.uniform(*mix.run_fault_every)
    return faults
