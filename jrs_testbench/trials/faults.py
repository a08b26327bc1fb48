"""What goes wrong in each trial, drawn from one seed before anything runs.

Every trial is one job (``trial-<n>``) with 2-3 attempts and a fault-free *finisher* that starts
once they have all ended (Airflow's last retry), so that every trial should end with exactly one
SUCCEEDED result, and the checker can tell a lost result from a job nobody finished.

Drawing the whole plan up front from ``random.Random(seed)`` makes a run reproducible in *what*
is injected; *when* it lands relative to the attempt's steps still depends on scheduling, which is
the point (Jepsen: the interleavings come from the real system).
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass, field

from jrs_testbench.trials.config import AttemptPlan


class Fault(enum.StrEnum):
    KILL_GROUP = "kill_group"  # SIGKILL attempt + stand-in: a lost worker
    KILL_ATTEMPT = "kill_attempt"  # SIGKILL the attempt only: spark-submit outlives its task
    STALL_ATTEMPT = "stall_attempt"  # SIGSTOP the attempt past the TTL (GC pause), stand-in runs on
    STALL_GROUP = "stall_group"  # SIGSTOP attempt + stand-in past the TTL (a frozen VM)
    STALL_AFTER_INTENT = "stall_after_intent"  # paused after recording its intent until its lease is gone
    STALL_BEFORE_WRITE = "stall_before_write"  # paused between its last lease check and the result write
    CONCURRENT_START = "concurrent_start"  # two attempts of one job started at the same instant
    STANDIN_FAILURE = "standin_failure"  # the stand-in exits non-zero (Spark failed)
    REDIS_RESTART = "redis_restart"  # redis-server stopped (SIGTERM) and started again
    REDIS_CRASH = "redis_crash"  # redis-server SIGKILLed and started again (appendfsync always)


#: Faults the runner injects into one attempt (at most one each).
ATTEMPT_FAULTS = (
    Fault.KILL_GROUP,
    Fault.KILL_ATTEMPT,
    Fault.STALL_ATTEMPT,
    Fault.STALL_GROUP,
    Fault.STALL_AFTER_INTENT,
    Fault.STALL_BEFORE_WRITE,
    Fault.STANDIN_FAILURE,
)
PAUSE_STEPS = {Fault.STALL_AFTER_INTENT: "after_intent", Fault.STALL_BEFORE_WRITE: "before_result"}

DEFAULT_WEIGHTS: dict[Fault, float] = {
    Fault.KILL_GROUP: 3,
    Fault.KILL_ATTEMPT: 3,
    Fault.STALL_ATTEMPT: 2,
    Fault.STALL_GROUP: 2,
    Fault.STALL_AFTER_INTENT: 1,
    Fault.STALL_BEFORE_WRITE: 2,
    Fault.STANDIN_FAILURE: 0.5,
}


@dataclass(frozen=True)
class AttemptFault:
    """A signal fault: ``at`` seconds after the attempt started; stalls last ``duration``."""

    kind: Fault
    at: float = 0.0
    duration: float = 0.0
    extra_delay: float = 0.0  # pauses: how long to stay stopped once the lease is gone


@dataclass(frozen=True)
class ScheduledAttempt:
    plan: AttemptPlan
    start: float  # seconds after the trial started
    fault: AttemptFault | None = None


@dataclass(frozen=True)
class TrialPlan:
    trial: int
    job_id: str
    attempts: list[ScheduledAttempt]
    finisher: AttemptPlan
    concurrent: bool = False
    faults: list[Fault] = field(default_factory=list)


@dataclass(frozen=True)
class FaultMix:
    """How often each fault is drawn. ``fault_rate``: share of attempts that get one."""

    fault_rate: float = 0.6
    weights: dict[Fault, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    concurrent_rate: float = 0.2
    stop_rate: float = 0.3  # attempts that stop a predecessor's stand-in instead of waiting
    three_attempts_rate: float = 0.4
    lease_ttl: float = 1.0


def plan_trials(seed: int, trials: int, mix: FaultMix | None = None, *, first: int = 0) -> list[TrialPlan]:
    """``trials`` plans, reproducible from ``seed``."""
    mix = mix or FaultMix()
    rng = random.Random(seed)
    kinds = [k for k in ATTEMPT_FAULTS if mix.weights.get(k, 0) > 0]
    weights = [mix.weights[k] for k in kinds]
    plans = []
    for n in range(first, first + trials):
        job_id = f"trial-{n}"
        count = 3 if rng.random() < mix.three_attempts_rate else 2
        concurrent = rng.random() < mix.concurrent_rate
        attempts = []
        drawn: list[Fault] = []
        for i in range(count):
            start = 0.0 if i == 0 or (i == 1 and concurrent) else rng.uniform(0.0, 1.2)
            fault = None
            if kinds and rng.random() < mix.fault_rate:
                kind = rng.choices(kinds, weights)[0]
                fault = AttemptFault(
                    kind=kind,
                    at=rng.uniform(0.02, 0.6),
                    duration=rng.uniform(1.2 * mix.lease_ttl, 2.2 * mix.lease_ttl),
                    extra_delay=rng.choice([0.0, 0.0, rng.uniform(0.0, 0.3)]),
                )
                drawn.append(kind)
            plan = AttemptPlan(
                trial=n,
                job_id=job_id,
                index=i + 1,
                predecessor="stop" if rng.random() < mix.stop_rate else "wait",
                pause_at=PAUSE_STEPS.get(fault.kind) if fault else None,
                startup=rng.uniform(0.03, 0.06),
                chunks=rng.randint(3, 5),
                chunk_delay=rng.uniform(0.02, 0.05),
                fail_work=fault is not None and fault.kind is Fault.STANDIN_FAILURE,
                last_try=i == count - 1,
                seed=rng.getrandbits(32),
            )
            attempts.append(ScheduledAttempt(plan=plan, start=start, fault=fault))
        finisher = AttemptPlan(
            trial=n, job_id=job_id, index=count + 1, lease_wait=15.0, last_try=True, finisher=True,
            predecessor="stop" if rng.random() < mix.stop_rate else "wait", seed=rng.getrandbits(32),
        )  # fmt: skip
        plans.append(TrialPlan(n, job_id, attempts, finisher, concurrent, drawn))
    return plans
