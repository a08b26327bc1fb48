"""A failure never displaces a committed success, through JobAttempt and real Redis.

Code A computes and commits; code B (another fingerprint: changed code, args or job_version)
runs, fails on its last try and records FAILED. That FAILED must not move A's clean SUCCEEDED
to history: a rollback to code A would compute again. The failure stays visible in the task's
log and the task fails; the fault-trial checker flags a SUCCEEDED entry a failure displaced.
"""

from __future__ import annotations

import logging

import pytest

from airflow_jrs.domain.model import HistoryReason
from airflow_jrs.protocol import COMPUTED, SKIPPED, AttemptPolicy, JobAttempt, JobNamespace, JobSpec, settings_for
from airflow_jrs.protocol.launcher import Launch
from airflow_jrs.store import Attempt, JobResult, JobStatus, RedisJobResultStore
from airflow_jrs.store.redis.namespace import RedisJobNamespace
from jrs_testbench.launchers import Recording
from jrs_testbench.trials.checker import check_trial

JOB = "job-7"


class FailingOnce(Recording):
    """Counts launches; the application fails (as spark-submit exiting non-zero does)."""

    def run(self, launch: Launch) -> None:
        super().run(launch)
        raise RuntimeError("code B failed: division by zero")


@pytest.fixture
def jobs(redis_url, namespace, tmp_path):
    settings = settings_for(namespace, output_root=str(tmp_path / "out"), spec_root=str(tmp_path / "specs"))
    jobs = RedisJobNamespace.from_url(redis_url, settings)
    yield jobs
    jobs.close()


def run_code(jobs: JobNamespace, fingerprint: str, launcher: Recording, run_id: str, *, last_try: bool = True):
    spec = JobSpec(JOB, fingerprint)
    policy = AttemptPolicy(last_try=last_try)
    return JobAttempt(jobs, spec, Attempt("d", "t", run_id, 1), launcher, policy=policy).run()


def trial_records() -> list[dict[str, object]]:
    """The smallest trial history the checker reads (what is left in the store is what it checks)."""
    start = {"t": 0, "pid": 1, "trial": 7, "job": JOB, "event": "trial_start"}
    return [start, {"t": 10**12, "pid": 1, "trial": 7, "job": JOB, "event": "trial_end", "status": "done"}]


def test_a_failed_last_try_of_changed_code_keeps_the_committed_result(jobs, caplog) -> None:
    code_a, code_b = Recording(), FailingOnce()
    assert run_code(jobs, "fp-A", code_a, "r1").kind == COMPUTED
    assert jobs.results.mark_result_as_clean(JOB) is True
    committed = jobs.results.get_entry(JOB)

    with caplog.at_level(logging.WARNING), pytest.raises(RuntimeError, match="code B failed"):
        run_code(jobs, "fp-B", code_b, "r2")  # the task fails with the application's own error
    assert code_b.launched == 1

    entry = jobs.results.get_entry(JOB)
    assert entry == committed and entry.is_clean, f"the failure displaced the committed result: {entry}"
    assert jobs.results.get_history(JOB) == []
    assert jobs.intents.get(JOB) is None, "the failed attempt's intent was left behind"
    said = caplog.text
    assert "FAILED is not recorded" in said and "SUCCEEDED result (fingerprint fp-A, run r1, clean)" in said
    kinds = {v.kind for v in check_trial(trial_records(), jobs.client, jobs.namespace).violations}
    assert "success_displaced_by_failure" not in kinds  # (the stand-in launcher writes no output)

    # a rollback to code A finds its result: nothing computes again
    assert run_code(jobs, "fp-A", code_a, "r3").kind == SKIPPED
    assert code_a.launched == 1


def test_a_failed_last_try_still_replaces_an_earlier_failure(jobs) -> None:
    with pytest.raises(RuntimeError):
        run_code(jobs, "fp-A", FailingOnce(), "r1")
    with pytest.raises(RuntimeError):
        run_code(jobs, "fp-B", FailingOnce(), "r2")
    entry = jobs.results.get_entry(JOB)
    assert entry is not None and entry.result.status is JobStatus.FAILED and entry.result.fingerprint == "fp-B"
    assert "code B failed" in (entry.result.error or "")
    [earlier] = jobs.results.get_history(JOB)
    assert earlier.result.fingerprint == "fp-A" and earlier.moved.reason == HistoryReason.RERUN.value


def test_the_checker_flags_a_success_displaced_by_a_failure(redis_client, namespace) -> None:
    # what record_failure's full supersede used to leave: A's SUCCEEDED in history, B's FAILED in the slot
    store = RedisJobResultStore(redis_client, namespace)
    store.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.SUCCEEDED, fingerprint="fp-A"), fence=None)
    store.mark_result_as_clean(JOB)
    failed = JobResult(job_id=JOB, status=JobStatus.FAILED, fingerprint="fp-B", error="code B failed")
    store.create_dirty_result(failed, supersede=True)
    report = check_trial(trial_records(), redis_client, namespace)
    assert [v.kind for v in report.violations] == ["success_displaced_by_failure"], report.violations

    # a SUCCEEDED of changed code superseding it is the rule working, not a violation
    store.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.SUCCEEDED, fingerprint="fp-C"), supersede=True)
    store.forget_result(JOB)
    store.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.SUCCEEDED, fingerprint="fp-A"), fence=None)
    store.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.SUCCEEDED, fingerprint="fp-D"), supersede=True)
    assert [v.kind for v in check_trial(trial_records(), redis_client, namespace).violations] == [
        "success_displaced_by_failure"  # the first one only, still in the history
    ]
