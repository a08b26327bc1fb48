"""The job's recovery story (views/story.py) and links (views/json.py), from a real recovery log."""

from __future__ import annotations

import pytest

from airflow_jrs.settings import settings_for
from airflow_jrs.store import Attempt, JobResult, JobStatus
from airflow_jrs.store.recoveries import ADOPTED, FOUND, RECORDED, TOOK_OVER, RecoveryStep
from airflow_jrs.store.redis.namespace import RedisJobNamespace
from airflow_jrs.views.job import inspect_job
from airflow_jrs.views.json import job_json

JOB = "d.t.2013-01-01"


@pytest.fixture
def jobs(redis_url, namespace, tmp_path):
    jobs = RedisJobNamespace.from_url(
        redis_url, settings_for(namespace, output_root=str(tmp_path), spec_root=str(tmp_path))
    )
    yield jobs
    jobs.close()


def test_the_story_names_the_dead_try_and_what_its_successor_did_oldest_first(jobs):
    lease = jobs.lease(JOB, ttl=30)
    token = lease.acquire()
    tried = {"dag_id": "d", "task_id": "t", "run_id": "scheduled__2013-01-01", "try_number": 1}
    log = jobs.recoveries
    log.record(JOB, token, RecoveryStep(TOOK_OVER, "took over the lease from pid 9 on host w1", predecessor=7,
                                        facts=tried))  # fmt: skip
    log.record(JOB, token, RecoveryStep(FOUND, "found the intent of try 1, which died without a result",
                                        predecessor=7, facts=tried))  # fmt: skip
    log.record(JOB, token, RecoveryStep(ADOPTED, "adopted the finished output of try 1 (application app-1)",
                                        predecessor=7))  # fmt: skip
    log.record(JOB, token, RecoveryStep(RECORDED, "the task of fence 8 was gone; its supervisor recorded FAILED",
                                        predecessor=8))  # fmt: skip
    jobs.client.lpush(jobs.recoveries.keys.recoveries(JOB), b"{not json")
    story = job_json(inspect_job(jobs, JOB))["recovery_story"]
    assert story[0] == (
        f"Try 1 of d.t (run scheduled__2013-01-01, fence 7) died; fence {int(token)}, the attempt after it, "
        "took over the lease from pid 9 on host w1, then found the intent of try 1, which died without a result "
        "and then adopted the finished output of try 1 (application app-1)."
    )
    assert story[1] == "The task of fence 8 was gone; its supervisor recorded FAILED."
    assert story[2].startswith("An item this version cannot read")  # shown, never hidden
    lease.release()


def test_links_name_each_run_behind_the_job_once_and_its_spark_application(jobs):
    attempt = Attempt(dag_id="d", task_id="t", run_id="manual__1", try_number=1)
    jobs.results.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.FAILED, attempt=attempt))
    jobs.results.forget_result(JOB)
    again = Attempt(dag_id="d", task_id="t", run_id="scheduled/2013", try_number=2)
    jobs.results.create_dirty_result(
        JobResult(job_id=JOB, status=JobStatus.SUCCEEDED, application_id="app-2", attempt=again)
    )
    links = job_json(inspect_job(jobs, JOB), "https://history:18080/h/{application_id}/")["links"]
    assert links["runs"] == [
        {"dag_id": "d", "run_id": "scheduled/2013", "url": "dags/d/runs/scheduled%2F2013"},
        {"dag_id": "d", "run_id": "manual__1", "url": "dags/d/runs/manual__1"},
    ]
    assert links["spark_ui"] == "https://history:18080/h/app-2/"
    assert job_json(inspect_job(jobs, "nothing.here"))["links"] == {"runs": [], "spark_ui": None}
