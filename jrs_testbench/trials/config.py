"""What a run of trials is made of: the protocol's knobs, where things live, one attempt's plan.

Kept apart from :mod:`.attempt` so that the planner (:mod:`.faults`) and the runner can describe
attempts without importing how an attempt runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from airflow_jrs.store import scripts

#: Exit codes of an attempt, read by the runner: did it leave the job with a SUCCEEDED result?
DONE, NOT_DONE, STORE_DOWN, CRASHED = 0, 1, 3, 4

FENCE_CHECK_LINE = "if not fence_ok(KEYS[5], ARGV[4]) then return -2 end"


def unfenced_create_script() -> str:
    """``CREATE_DIRTY_RESULT`` with its fence check removed: the broken protocol the checker must catch."""
    if FENCE_CHECK_LINE not in scripts.CREATE_DIRTY_RESULT:
        raise RuntimeError("CREATE_DIRTY_RESULT changed: update FENCE_CHECK_LINE so the broken protocol stays broken")
    return scripts.CREATE_DIRTY_RESULT.replace(FENCE_CHECK_LINE, "-- fence check removed (broken protocol)")


@dataclass(frozen=True)
class Protocol:
    """Knobs of the simulated protocol. The defaults are the operator's behaviour.

    ``launch_guard`` models a fix of the operator's launch window. The operator sets ``_killed``
    in ``on_lost`` and checks it, and the lease (locally), before the launch, but not atomically
    with it: a loss noticed between that check and ``Popen`` stops nothing (there is no process
    yet), and a stall there is not noticed at all until after ``Popen``. Either way the stand-in
    runs to completion beside the successor's, which scanned for it before it existed. With the
    guard, "check killed, renew (a fenced round trip, not the local check), launch, remember the
    process, renew again" and "set killed, stop the remembered process" hold one lock: a lease
    lost before the launch prevents it; a stall between the first renew and ``Popen`` (no check
    can close that window) is caught by the second renew, which stops the process one round trip
    after it started, long before a JVM (or the stand-in's ``startup``) gets to compute.
    ``fenced_result=False`` removes the fence check from the result script (the broken protocol).
    """

    lease_ttl: float = 1.0
    lease_poll: float = 0.05
    predecessor_poll: float = 0.05
    launch_latency: tuple[float, float] = (0.002, 0.02)
    launch_guard: bool = False
    fenced_result: bool = True


@dataclass(frozen=True)
class Bench:
    """Where one run's shared things live."""

    redis_url: str
    namespace: str
    root: str  # staging folders and work locks
    spec_root: str
    log_path: str
    fingerprint: str = "fp-trials-v1"

    def job_dir(self, job_id: str) -> str:
        return f"{self.root}/{self.namespace}/{job_id}"

    def staging(self, job_id: str, fence: int) -> str:
        return f"{self.job_dir(job_id)}/fence-{fence}"

    def work_lock(self, job_id: str) -> str:
        return f"{self.job_dir(job_id)}/work.lock"

    def create_dirs(self) -> None:
        Path(self.root).mkdir(parents=True, exist_ok=True)
        Path(self.spec_root).mkdir(parents=True, exist_ok=True)


@dataclass(frozen=True)
class AttemptPlan:
    """One attempt of a trial: how it behaves (faults from outside are the runner's business)."""

    trial: int
    job_id: str
    index: int
    predecessor: str = "wait"  # or "stop"
    pause_at: str | None = None  # "after_intent" or "before_result": SIGSTOP itself there
    lease_wait: float = 8.0
    startup: float = 0.04
    chunks: int = 4
    chunk_delay: float = 0.03
    fail_work: bool = False
    last_try: bool = False
    finisher: bool = False
    seed: int = 0
