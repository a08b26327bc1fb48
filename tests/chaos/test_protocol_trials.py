"""The coordination protocol under hundreds of faults, Jepsen-style, without Spark.

Attempts follow the operator's protocol on the real store, lease and intent, with a small process
in place of spark-submit (``jrs_testbench.trials``); they are killed, stalled past the lease TTL,
paused at the worst steps and raced, and Redis is restarted and crashed underneath them. The
checker reads the history log and the store. These tests prove three things: the protocol keeps
every invariant; the checker notices when it does not (a result script without its fence check,
the operator's unguarded launch window); and the checker's rules on hand-written histories.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_jrs.spark.commit import MARKER_NAME
from airflow_jrs.store import EntryState, JobResult, JobResultEntry, JobStatus
from jrs_testbench.redis_server import EmbeddedRedis
from jrs_testbench.trials import (
    Fault,
    FaultMix,
    JobFacts,
    Protocol,
    Report,
    RunConfig,
    check,
    check_run,
    group_history,
    run_trials,
    standin,
)

pytestmark = [pytest.mark.chaos]

SEED = 20240611
TRIALS = 250


@pytest.fixture(scope="module")
def trials_redis(tmp_path_factory: pytest.TempPathFactory):
    """A Redis of our own: the trials restart and crash it."""
    with EmbeddedRedis(tmp_path_factory.mktemp("trials-redis")) as server:
        yield server


def _run(server: EmbeddedRedis, workdir: Path, **config: object) -> Report:
    outcome = run_trials(RunConfig(workdir=workdir, **config), server)  # type: ignore[arg-type]
    assert outcome.runner_exit == 0
    bench = outcome.bench
    return check_run(bench.log_path, server.url, bench.namespace, bench.spec_root)


def test_hundreds_of_faulty_trials_keep_every_invariant(trials_redis: EmbeddedRedis, tmp_path: Path) -> None:
    """With the launch guarded: the operator as written lets a lease lost right before its launch
    run a second copy (proved below); the guard models the fix, every other step is the operator's."""
    report = _run(
        trials_redis,
        tmp_path,
        trials=TRIALS,
        seed=SEED,
        concurrency=16,
        protocol=Protocol(launch_guard=True),
        redis_fault_every=(3.0, 6.0),
    )
    summary = report.summary()
    assert report.violations == [], summary
    assert report.incomplete == [], summary
    assert report.trials == TRIALS
    not_injected = [kind.value for kind in Fault if report.faults[kind.value] == 0]
    assert not_injected == [], summary
    # Every recovery path was taken, not just injected at.
    for path in ("adopted", "resubmitted", "skipped_under_lease", "standin_stopped_on_lease_loss"):
        assert report.observations[path] > 0, summary


def test_checker_catches_results_written_without_the_fence(trials_redis: EmbeddedRedis, tmp_path: Path) -> None:
    """Attempts register a copy of CREATE_DIRTY_RESULT whose fence check always passes; paused
    right before their write until a successor holds the lease, they then write over it."""
    report = _run(
        trials_redis,
        tmp_path,
        trials=30,
        seed=SEED,
        concurrency=10,
        protocol=Protocol(launch_guard=True, fenced_result=False),
        mix=FaultMix(weights={Fault.STALL_BEFORE_WRITE: 1}, fault_rate=0.5, concurrent_rate=1.0),
        redis_faults=False,
    )
    assert report.violation_counts()["stale_fence_write"] > 0, report.summary()


@pytest.mark.parametrize("launch_guard", [False, True], ids=["operator-as-written", "guarded-launch"])
def test_a_lease_lost_just_before_launch_lets_a_second_copy_run_unless_guarded(
    trials_redis: EmbeddedRedis, tmp_path: Path, launch_guard: bool
) -> None:
    """Attempts pause right after recording their intent until their lease is gone. As the operator
    is written (``_killed`` and the local lease check come before building the Spark hook and
    ``Popen``; ``on_lost`` finds no process to stop), the woken attempt launches anyway and its
    stand-in runs to completion beside or after the successor's. A fenced renew right before the
    launch, under one lock with ``on_lost``, prevents it."""
    report = _run(
        trials_redis,
        tmp_path,
        trials=30,
        seed=SEED,
        concurrency=10,
        protocol=Protocol(launch_guard=launch_guard),
        mix=FaultMix(weights={Fault.STALL_AFTER_INTENT: 1}, fault_rate=0.5, concurrent_rate=1.0),
        redis_faults=False,
    )
    if launch_guard:
        assert report.violations == [], report.summary()
        assert report.observations["launch_prevented_after_loss"] > 0
    else:
        assert report.violation_counts()["stale_launch_computed"] > 0, report.summary()


# -- the checker on hand-written histories ----------------------------------------------------------
JOB = "trial-0"
MS = 1_000_000


def _attempt(pid: int, t_ms: int, event: str, **fields: object) -> dict[str, object]:
    return {"t": t_ms * MS, "pid": pid, "trial": 0, "job": JOB, "event": event, **fields}


def _standin(pid: int, t_ms: int, event: str, fence: int, **fields: object) -> dict[str, object]:
    return {"t": t_ms * MS, "pid": pid, "trial": 0, "job": JOB, "event": event, "fence": fence, "role": "standin",
            **fields}  # fmt: skip


def _committed_output(tmp_path: Path, fence: int, chunks: int = 2, marker: bool = True) -> str:
    staging = tmp_path / JOB / f"fence-{fence}"
    staging.mkdir(parents=True)
    for i in range(chunks):
        (staging / f"part-{i:05d}").write_text("x")
    if marker:
        doc = {"v": 1, "job_id": JOB, "fence": fence, "application_id": "a", "metrics": {"chunks": chunks}}
        (staging / MARKER_NAME).write_text(json.dumps(doc))
    return str(staging)


def _facts(staging: str | None, fence: int | None) -> dict[str, JobFacts]:
    if staging is None:
        return {JOB: JobFacts(entry=None)}
    result = JobResult(JOB, JobStatus.SUCCEEDED, outputs={"output": staging}, fence=fence, fingerprint="fp")
    return {JOB: JobFacts(entry=JobResultEntry(result=result, state=EntryState.DIRTY))}


def _check(events: list[dict[str, object]], facts: dict[str, JobFacts]) -> Report:
    by_job, others = group_history(events)
    return check(by_job, others, facts)


def _one_clean_run(staging: str) -> list[dict[str, object]]:
    return [
        _attempt(10, 0, "lease_acquired", fence=1),
        _attempt(10, 1, "reread", fence=1, found=None),
        _attempt(10, 5, "launch", fence=1),
        _standin(11, 40, "work_start", 1),
        _standin(11, 60, "chunk", 1, index=0),
        _standin(11, 90, "marker_written", 1),
        _standin(11, 90, "work_end", 1),
        _attempt(10, 95, "result_write_begin", fence=1, status="SUCCEEDED", staging=staging),
        _attempt(10, 96, "result_written", fence=1, status="SUCCEEDED", staging=staging),
        _attempt(20, 300, "lease_acquired", fence=2),
        _attempt(20, 301, "reread", fence=2, found="SUCCEEDED"),
    ]


def test_checker_accepts_a_clean_history(tmp_path: Path) -> None:
    staging = _committed_output(tmp_path, fence=1)
    assert _check(_one_clean_run(staging), _facts(staging, 1)).violations == []


def test_checker_detects_two_stand_ins_computing_at_once(tmp_path: Path) -> None:
    staging = _committed_output(tmp_path, fence=1)
    events = [
        *_one_clean_run(staging),
        _attempt(30, 30, "launch", fence=2),  # fence 2 never acquired: a copy nobody should have run
        _standin(31, 50, "overlap", 2),
        _standin(31, 50, "work_start", 2),
        _standin(31, 80, "chunk", 2, index=0),
    ]
    kinds = _check(events, _facts(staging, 1)).violation_counts()
    assert kinds["overlap"] == 1
    assert kinds["overlap_interval"] == 1


def test_checker_detects_a_write_accepted_from_a_stale_fence(tmp_path: Path) -> None:
    staging = _committed_output(tmp_path, fence=1)
    events = [
        _attempt(10, 0, "lease_acquired", fence=1),
        _attempt(10, 5, "launch", fence=1),
        _standin(11, 40, "work_start", 1),
        _standin(11, 90, "work_end", 1),
        _attempt(20, 1100, "lease_acquired", fence=2),  # fence 1's lease expired while it stalled
        _attempt(20, 1101, "reread", fence=2, found=None),
        _attempt(10, 1102, "result_write_begin", fence=1, status="SUCCEEDED", staging=staging),
        _attempt(10, 1103, "result_written", fence=1, status="SUCCEEDED", staging=staging),
    ]
    report = _check(events, _facts(staging, 1))
    assert report.violation_counts()["stale_fence_write"] == 1, report.violations


def test_checker_detects_a_success_without_its_commit_marker(tmp_path: Path) -> None:
    staging = _committed_output(tmp_path, fence=1, marker=False)
    report = _check(_one_clean_run(staging), _facts(staging, 1))
    assert report.violation_counts() == {"succeeded_without_marker": 1}


def test_checker_detects_a_committed_result_that_is_gone(tmp_path: Path) -> None:
    staging = _committed_output(tmp_path, fence=1)
    report = _check(_one_clean_run(staging), _facts(None, None))
    assert report.violation_counts() == {"committed_result_lost": 1}


def test_stand_in_writes_the_products_marker_name() -> None:
    assert standin.MARKER_NAME == MARKER_NAME
