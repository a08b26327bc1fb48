"""The fault trials catch issue 18's fixes being taken out (issue 20: "reverting any one of the
nine fixes of the previous issue makes a seeded trial run fail").

For each fix, a small seeded batch of trials runs through the trials' own runner with
``JRS_TRIALS_REVERT=<n>`` (:mod:`jrs_testbench.trials.reverts` patches the fix back out in every
try, supervisor and cleanup process), with a fault mix chosen to reach the defect; the checker
must report a violation of the guarantee that fix protects. The same seed without the revert
must report none, so the violation is the revert's doing and not the harness's.

Defects 4 and 5 live in cluster deploy mode: their trials launch the stand-in application as a
detached driver on a fake standalone master (:mod:`jrs_testbench.trials.cluster_launcher`) whose
client loses the master right after the submission, and the product's standalone cluster mode
looks the driver up.

Some cases add a fault or a checker rule of their own (:mod:`jrs_testbench.trials`): a cleanup
that stalls after its first read while the next DAG run recomputes (2); a recompute's forget
stopped after its fence and entry were taken, woken once a successor's result is acknowledged
(3, ``pause_before_forget``); failovers that hand a lost token out again, one trial at a time
(6); tries where ``/proc`` shows nothing, with same-host zombies, and the rule
``took_over_live_holder`` (8); an ACQUIRE whose reply is lost, and the rule
``waited_for_itself`` (9); the trial shape ``heartbeat_lost_early`` (7: an orphan's heartbeat
deleted while its successor holds after its lease, :func:`jrs_testbench.trials.faults._heartbeat_lost_early`).

A defect the trials' faults could not reach would be listed in :data:`UNREACHED` with the reason
and the test that covers it instead (tests/unit/test_reverts.py runs every revert against the
product's own code); none is left.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from jrs_testbench.trials.faults import FaultMix
from jrs_testbench.trials.reverts import ENV, REVERTS
from jrs_testbench.trials.runner import RunConfig, RunOutcome, run_trials
from jrs_testbench.trials.task import NO_PROC_ENV

pytestmark = [pytest.mark.chaos]


def _mix(**chosen: object) -> FaultMix:
    """Only the faults a case names: every other rate and weight is zero."""
    quiet: dict[str, object] = dict(
        try_fault_rate=0.0, try_weights={}, run_weights={}, recompute_rate=0.0, stop_rate=0.0, zombie_rate=0.0,
        cleanup_crash_rate=0.0, stop_predecessor_rate=0.0,
    )  # fmt: skip
    return FaultMix(**{**quiet, **chosen})  # type: ignore[arg-type]


#: a failover (losing what the primary acknowledged since replication was held) every 0.3-0.8 s
_FAILOVERS: dict[str, object] = dict(run_weights={"failover": 1}, run_fault_every=(0.3, 0.8))
#: every DAG run after the first recomputes; half the tries stop right before their forget
_FORGET_PAUSED: dict[str, object] = dict(recompute_rate=1.0, try_fault_rate=0.5, try_weights={"pause_before_forget": 1})


@dataclass(frozen=True)
class Case:
    """A seeded batch that reaches defect ``number``; ``rules``: checker kinds that prove it."""

    number: int
    rules: frozenset[str]
    mix: FaultMix
    trials: int
    seed: int
    #: cluster deploy mode: the stand-in driver's client plan (:mod:`.cluster_launcher`)
    client: str | None = None
    #: extra environment of the tries (:data:`jrs_testbench.trials.task.NO_PROC_ENV`)
    env: tuple[tuple[str, str], ...] = ()
    #: trials at once (1: the fence counter is the trial's alone, so a lost INCR hands its token out again)
    concurrency: int = 3
    #: the lease's (and heartbeat's) TTL in seconds
    lease_ttl: float = 2.0


CASES = [
    # The task is SIGKILLed while its application runs; the retry waits for it and adopts its
    # output (a result naming the predecessor's folder); the cleanup removes that folder.
    Case(1, frozenset({"clean_output_broken"}), _mix(try_fault_rate=1.0, try_weights={"kill_task": 1}), 8, 7),
    # The client loses the master after the submission: the intent is dropped while the driver
    # runs (4), or the master is asked for applications only and the driver looks ended (5); the
    # retry submits a second driver beside the first.
    Case(4, frozenset({"two_applications"}), _mix(), 3, 7, client="lose"),
    Case(5, frozenset({"two_applications"}), _mix(), 3, 7, client="lose"),
    # The client returns at the submission (waitAppCompletion=false): without a marker naming this
    # job and fence nothing may be published, yet the reverted attempt publishes the unfinished folder.
    Case(4, frozenset({"clean_output_broken"}), _mix(), 2, 7, client="return"),
    # The next DAG run recomputes while the previous run's cleanup stalls after its first read
    # (slow_cleanup): the reverted cleanup commits whatever entry is there by then, the recompute's,
    # having removed its folder as a loser's.
    Case(2, frozenset({"clean_output_broken"}), _mix(recompute_rate=1.0), 6, 7),
    # A recompute try stops right before its forget reaches Redis (its fence and the entry it read
    # taken) and is woken once its successor's SUCCEEDED is acknowledged: the reverted forget,
    # neither fenced nor a compare-and-set, removes the successor's result.
    Case(3, frozenset({"acknowledged_success_lost"}), _mix(**_FORGET_PAUSED), 6, 7),
    # Failovers every 0.3-0.8 s lose the fence counter's INCR with the lease: the retry gets its failed
    # predecessor's token again. Reverted, the staging folder is fence-<N> (no owner nonce): the
    # retry computes into the folder the predecessor left rows in, and the entry's output holds both.
    Case(6, frozenset({"clean_output_broken", "write_by_displaced_holder"}), _mix(**_FAILOVERS), 14, 9, concurrency=1),
    # Every try runs where /proc shows nothing (a locked-down container), and each retry starts on
    # the same host while its predecessor still runs (a zombie): nothing proves the holder dead, yet
    # the reverted takeover counts the uninspectable pid and the two unknown pid spaces as "dead".
    Case(8, frozenset({"took_over_live_holder"}), _mix(zombie_rate=1.0), 4, 22, env=((NO_PROC_ENV, "1"),)),
    # The reply of a try's ACQUIRE is lost (its own proxy drops it) and redis-py sends the command
    # again: the reverted script does not know the caller's nonce and the try waits for itself.
    Case(9, frozenset({"waited_for_itself"}), _mix(try_fault_rate=1.0, try_weights={"lose_acquire_reply": 1}), 3, 7),
    # Try 1 is SIGKILLed while its application computes for ~10 s (an orphan under its live
    # supervisor); try 2, on another host, holds right after its lease while the driver deletes the
    # heartbeat for three beats and until try 2's intent (an early expiry: a failover to a replica
    # without the key, a clock step). Fixed, the orphan's supervisor kills it at its next beat; the
    # reverted BEAT re-creates the key, and the orphan still computes when try 2's application starts
    # (a 5 s TTL leaves that application 2.5 s to start before the orphan's grace ends).
    Case(7, frozenset({"two_applications"}), _mix(shape="heartbeat_lost_early"), 2, 7, concurrency=2, lease_ttl=5.0),
]

#: Defects the trials' fault set does not reach, why, and what covers them instead (of issue 18's, none since fix 7's
#: case: tests/unit/test_reverts.py still runs every revert against the product's own code).
UNREACHED: dict[int, str] = {
    10: "a Spark Connect session released while a query is between its analysis and its first Spark "
    "job: the stand-in launcher has no Connect session, and the Connect trials (24 with the revert, "
    "tests/chaos/test_connect_fault_trials.py) have not met that moment; the trial history that found "
    "it is in docs/benchmarks.md, and tests/unit/test_reverts.py runs the revert",
}


@contextlib.contextmanager
def _launched_as(case: Case, workdir: Path) -> Iterator[None]:
    """The tries launch through the cluster stand-in for a cluster case, else the local one."""
    if case.client is None:
        yield
        return
    from jrs_testbench.trials.cluster_launcher import MasterProcess, use_for_trials

    with MasterProcess(workdir / "master") as master, use_for_trials(master.url, case.client):
        yield


def _run(case: Case, workdir: Path, *, revert: bool) -> RunOutcome:
    env = {**dict(case.env), **({ENV: str(case.number)} if revert else {})}
    with _launched_as(case, workdir):
        config = RunConfig(
            trials=case.trials, seed=case.seed, workdir=workdir, concurrency=case.concurrency, mix=case.mix, env=env,
            lease_ttl=case.lease_ttl,
        )  # fmt: skip
        return run_trials(config)


@pytest.mark.parametrize(
    "case", CASES, ids=[f"fix-{c.number}" + (f"-client-{c.client}" if c.client else "") for c in CASES]
)
def test_reverting_a_fix_makes_a_seeded_trial_run_fail(case: Case, tmp_path: Path) -> None:
    reverted = _run(case, tmp_path / "reverted", revert=True)
    caught = {v.kind for v in reverted.violations} & case.rules
    assert caught, f"revert {case.number} was not caught: {reverted.summary()}"
    plain = _run(case, tmp_path / "plain", revert=False)
    assert plain.violations == [], f"the same seed without the revert: {plain.summary()}"


def test_every_fix_is_either_caught_by_a_trial_or_says_why_not() -> None:
    assert sorted({c.number for c in CASES} | set(UNREACHED)) == sorted(REVERTS)
    assert not {c.number for c in CASES} & set(UNREACHED)
