"""JobAttempt driven directly, with a launcher that records what it was asked (real Redis)."""

from __future__ import annotations

import time

import pytest

from airflow_jrs.exceptions import JobKilledError, JobNotStartedError
from airflow_jrs.protocol import COMPUTED, SKIPPED, JobAttempt, JobNamespace, JobSpec, Launcher, settings_for
from airflow_jrs.store import Attempt
from airflow_jrs.store.redis.leases import RedisJobLease
from airflow_jrs.store.redis.namespace import RedisJobNamespace
from jrs_testbench.launchers import Recording

JOB = "d.t.2013-01-01"


@pytest.fixture
def jobs(redis_url, namespace, tmp_path):
    settings = settings_for(namespace, output_root=str(tmp_path / "out"), spec_root=str(tmp_path / "specs"))
    jobs = RedisJobNamespace.from_url(redis_url, settings)
    yield jobs
    jobs.close()


def attempt(jobs: JobNamespace, launcher: Launcher, try_number: int = 1) -> JobAttempt:
    return JobAttempt(jobs, JobSpec(JOB, "fp"), Attempt("d", "t", "r", try_number), launcher)


def test_a_kill_before_the_attempt_runs_holds_and_nothing_launches(jobs):
    """on_kill can come while the task still prepares the attempt (apache/airflow#73006: execute
    carries on afterwards): the attempt must not launch, and records nothing."""
    launcher = Recording()
    killed = attempt(jobs, launcher)
    killed.kill()
    with pytest.raises(JobKilledError):
        killed.run()
    assert launcher.launched == 0
    assert jobs.results.get_entry(JOB) is None
    assert RedisJobLease(jobs.client, jobs.namespace, JOB).peek() is None, "the lease was not released"


def test_a_computed_job_is_skipped_by_the_next_attempt(jobs):
    launcher = Recording()
    assert attempt(jobs, launcher).run().kind == COMPUTED
    assert attempt(jobs, launcher, try_number=2).run().kind == SKIPPED
    assert launcher.launched == 1


def test_a_lease_is_held_for_sure_only_within_its_share_of_the_ttl(jobs):
    lease = jobs.lease(JOB, ttl=1.0)
    assert not lease.held_for_sure(0.7)  # never acquired
    lease.acquire()
    assert lease.held_for_sure(0.7)
    time.sleep(0.75)
    assert not lease.held_for_sure(0.7), "no renewal for 75% of the TTL: an in-process driver must stop"
    assert lease.renew() and lease.held_for_sure(0.7)
    lease.release()


def test_a_retry_with_no_lease_wait_runs_instead_of_failing_on_its_own_earlier_tries_lease(jobs):
    """retry_delay shorter than lease_ttl: try 1 left its lease (its task killed) and the retry,
    with lease_wait_timeout=0, takes it over instead of failing the run."""
    dead = jobs.lease(JOB, dag_id="d", task_id="t", run_id="r", map_index=-1, try_number=1)
    dead.acquire()
    launcher = Recording()
    outcome = attempt(jobs, launcher, try_number=2).run()
    assert outcome.kind == COMPUTED and launcher.launched == 1
    assert outcome.fence is not None and outcome.fence > dead.token
    assert jobs.results.get_entry(JOB) is not None and dead.renew() is False


def test_an_attempt_of_another_run_still_fails_fast_on_a_held_lease(jobs):
    other = jobs.lease(JOB, dag_id="d", task_id="t", run_id="another-run", map_index=-1, try_number=1)
    other.acquire()
    launcher = Recording()
    with pytest.raises(JobNotStartedError, match="not started, another attempt works on it"):
        attempt(jobs, launcher, try_number=2).run()
    assert launcher.launched == 0 and jobs.results.get_entry(JOB) is None and other.renew()
