"""The product's own protocol under hundreds of seeded faulty trials.

The trials (``jrs_testbench.trials``) run ``airflow_jrs.protocol.JobAttempt`` in real processes
with a stand-in application under the real supervisor, the real cleanup, recompute and stop
requests, and real Redis faults (restart, crash, failover losing acknowledged writes, host
partitions, clock steps), half of them with ``[jrs] result_documents`` on (the compact clean
entry: cleanups write result documents and commit references; the checker reads each clean
reference's document). These tests prove that the product keeps every invariant, that the
checker fails when the protocol is broken on purpose, and the checker's rules on hand-written
histories.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import pytest
import redis

from airflow_jrs.protocol.steps import STEPS
from airflow_jrs.store import Attempt, JobResult, JobStatus, RedisJobResultStore
from airflow_jrs.store.redis.result_scripts import CREATE_DIRTY_RESULT
from airflow_jrs.store.results.documents import FolderDocuments
from jrs_testbench.trials.checker import check_trial
from jrs_testbench.trials.faults import TRY_FAULTS, FaultMix
from jrs_testbench.trials.runner import RunConfig, run_trials
from jrs_testbench.trials.task import FENCE_CHECK_LINE
from jrs_testbench.trials.trial import DOCUMENTS_FOLDER

pytestmark = [pytest.mark.chaos]

SEED = 20261124
TRIALS = 250  # a few hundred, seeded: ~1 min on 2 idle cores (150 took 37 s at low load, 80 s at load average 15)


def test_hundreds_of_faulty_trials_keep_every_invariant(tmp_path: Path) -> None:
    """Half the trials with full results in Redis, half with ``result_documents`` on (the same
    seed's next trials): each half keeps every invariant, and together they drew every fault."""
    mix: Counter[str] = Counter()
    for documents, first in ((False, 0), (True, TRIALS // 2)):
        workdir = tmp_path / ("documents" if documents else "plain")
        config = RunConfig(trials=TRIALS // 2, seed=SEED, workdir=workdir, concurrency=8, first_trial=first,
                           result_documents=documents)  # fmt: skip
        outcome = run_trials(config)
        summary = {"result_documents": documents, **outcome.summary()}
        assert outcome.violations == [], summary
        assert len(outcome.reports) == TRIALS // 2
        clean = summary["outcomes"].get("SUCCEEDED/clean", 0)
        assert clean > TRIALS // 4, summary
        assert summary["takeover_ms"]["samples"] > 0, summary
        if documents:  # the clean entries are references: each one's document is in the shared folder
            assert len(list((workdir / DOCUMENTS_FOLDER).rglob("*.json"))) >= clean, summary
        mix += outcome.fault_mix()
    try_faults = [f for f in TRY_FAULTS if f != "crash_point"] + [f"crash_point:{s}" for s in STEPS]
    assert [f for f in try_faults if mix[f] == 0] == [], mix
    assert [f for f in ("redis_restart", "redis_crash", "zombie", "recompute", "stop", "cancel") if mix[f] == 0] == []


def test_the_checker_fails_when_the_result_script_is_unfenced(tmp_path: Path) -> None:
    """Tries stop themselves right before their result write until a successor holds the lease;
    with the fence check removed from the result script their write is accepted."""
    assert FENCE_CHECK_LINE in CREATE_DIRTY_RESULT
    mix = FaultMix(try_fault_rate=1.0, try_weights={"pause_before_write": 1}, run_weights={}, recompute_rate=0,
                   stop_rate=0, zombie_rate=0, cleanup_crash_rate=0)  # fmt: skip
    # A paused try is woken early once its successor holds the lease, else after 1.3-2.2 TTLs; the
    # successor is a new process that must start, import and take over in that window. With the
    # default 2 s TTL a cold start (a fresh clone: nothing in the page cache, no bytecode written)
    # missed it in every trial of two full runs, so the window here is three times as long.
    outcome = run_trials(RunConfig(trials=12, seed=SEED, workdir=tmp_path, concurrency=6, mix=mix, lease_ttl=6.0,
                                   env={"JRS_TRIALS_BREAK": "unfenced_result"}))  # fmt: skip
    kinds = {v.kind for v in outcome.violations}
    assert "write_after_lease_lost" in kinds, outcome.summary()


# -- the checker's rules on hand-written histories ------------------------------------------------
def _rec(t: int, event: str, **fields: object) -> dict[str, object]:
    return {"t": t, "pid": fields.pop("pid", 1), "trial": 7, "job": "job-7", "event": event, **fields}


def _history(*records: dict[str, object]) -> list[dict[str, object]]:
    return [_rec(0, "trial_start"), *records, _rec(10**12, "trial_end", status="done")]


def test_an_overlap_inside_the_application_is_a_violation(redis_client: redis.Redis, namespace: str) -> None:
    report = check_trial(_history(_rec(5, "overlap", fence=3, pid=9)), redis_client, namespace)
    assert [v.kind for v in report.violations] == ["two_applications"]


def test_an_acknowledged_success_that_is_gone_is_a_violation_unless_a_failover_took_it(
    redis_client: redis.Redis, namespace: str
) -> None:
    history = _history(
        _rec(5, "lease_acquired", fence=3), _rec(6, "result_write_begin", fence=3, status="SUCCEEDED"),
        _rec(7, "result_written", fence=3, status="SUCCEEDED"),
    )  # fmt: skip
    assert [v.kind for v in check_trial(history, redis_client, namespace).violations] == ["acknowledged_success_lost"]
    excused = check_trial(history, redis_client, namespace, lossy_windows=[(6, 8)])
    assert excused.violations == [] and [v.kind for v in excused.excused] == ["acknowledged_success_lost"]


def test_a_write_that_began_after_a_newer_fence_took_the_lease_is_a_violation(
    redis_client: redis.Redis, namespace: str
) -> None:
    result = JobResult(job_id="job-7", status=JobStatus.FAILED, attempt=Attempt("d", "t", "r", 1), error="boom")
    RedisJobResultStore(redis_client, namespace).create_dirty_result(result)
    history = _history(
        _rec(5, "lease_acquired", fence=3, pid=1), _rec(6, "lease_acquired", fence=4, pid=2),
        _rec(7, "result_write_begin", fence=3, status="FAILED", pid=1),
        _rec(8, "result_written", fence=3, status="FAILED", pid=1),
    )  # fmt: skip
    assert "write_after_lease_lost" in [v.kind for v in check_trial(history, redis_client, namespace).violations]


def test_a_job_without_success_whose_last_try_said_nothing_is_stuck(redis_client: redis.Redis, namespace: str) -> None:
    history = _history(_rec(5, "error", kind="JobNotStartedError", message="  "))
    assert [v.kind for v in check_trial(history, redis_client, namespace).violations] == ["stuck_without_message"]


def test_a_clean_reference_without_its_document_is_a_violation(
    redis_client: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    """With result documents on, the checker reads a clean reference's document as every host
    would: the reference committed by the product's own store is fine; its document gone is not."""
    folder = tmp_path / "documents"
    folder.mkdir()
    documents = FolderDocuments(folder)
    store = RedisJobResultStore(redis_client, namespace, result_documents=documents)
    result = JobResult(job_id="job-7", status=JobStatus.SUCCEEDED, attempt=Attempt("d", "t", "r", 1),
                       fingerprint=hashlib.sha256(b"job-7").hexdigest())  # fmt: skip
    store.create_dirty_result(result)
    assert store.mark_result_as_clean("job-7")
    assert store.get_entry("job-7").summary  # committed as a reference
    assert check_trial(_history(), redis_client, namespace, documents=documents).violations == []
    for document in folder.rglob("*.json"):
        document.unlink()
    report = check_trial(_history(), redis_client, namespace, documents=documents)
    assert [v.kind for v in report.violations] == ["clean_document_missing"]
