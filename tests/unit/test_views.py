"""One view of a job, for the UI and the CLI: gathered once (airflow_jrs.views.job), shaped once
(airflow_jrs.views.json), against a real Redis through JobNamespace."""

from __future__ import annotations

import json

import pytest

from airflow_jrs.cli import main
from airflow_jrs.settings import settings_for
from airflow_jrs.store import Attempt, JobResult, JobStatus
from airflow_jrs.store.intents import Intent
from airflow_jrs.store.leases.lease import JobLease
from airflow_jrs.store.namespace import JobNamespace
from airflow_jrs.store.redis.namespace import RedisJobNamespace
from airflow_jrs.views.job import held_leases, in_flight, inspect_job
from airflow_jrs.views.json import entry_json, job_json

JOB = "v.t.2013-01-01"


@pytest.fixture
def jobs(redis_url, namespace, tmp_path):
    jobs = RedisJobNamespace.from_url(
        redis_url, settings_for(namespace, output_root=str(tmp_path), spec_root=str(tmp_path))
    )
    yield jobs
    jobs.close()


def _start(jobs: JobNamespace) -> JobLease:
    """A running attempt as the protocol leaves it: lease, intent, a beating supervisor."""
    lease = jobs.lease(JOB, ttl=60, dag_id="v", task_id="t", run_id="r1")
    token = lease.acquire()
    jobs.intents.update(Intent(JOB, token, "file:///spec", "/staging", "app", "h1", 42, 0.0))
    jobs.heartbeats.beat(JOB, token, 60_000, host="h1", pid=43, child=44, first=True)
    return lease


def test_a_running_job_shows_its_holder_intent_heartbeat_and_pending_stop(jobs):
    token = int(_start(jobs).token or 0)
    jobs.stop_requests.ask(JOB, token, "stop", by="test")

    view = inspect_job(jobs, JOB)

    assert (view.summary, view.running, view.found, view.dag_id) == ("running", True, True, "v")
    doc = job_json(view)
    assert doc["entry"] is None and doc["state"] is None and doc["problem"] is None
    assert doc["lease"]["token"] == token and doc["lease"]["owner"]["run_id"] == "r1"
    assert doc["intent"]["fence"] == token and doc["intent"]["staging"] == "/staging"
    assert doc["heartbeat"]["state"] == "running" and doc["heartbeat"]["child"] == 44
    assert doc["stop_request"]["kind"] == "stop" and doc["stop_request"]["pending"] is True
    json.dumps(doc)  # plain JSON, nothing to serialize by hand


def test_the_cli_answers_with_the_same_job_document_as_the_api(jobs, redis_url, namespace, capsys):
    result = JobResult(job_id=JOB, status=JobStatus.SUCCEEDED, attempt=Attempt("v", "t", "r0", 1))
    jobs.results.create_dirty_result(result)
    jobs.results.forget_result(JOB, expected=jobs.results.get_entry(JOB))
    jobs.results.create_dirty_result(result)

    assert main(["--redis-url", redis_url, "--namespace", namespace, "show", "--json", JOB]) == 0
    shown = json.loads(capsys.readouterr().out)

    api = json.loads(json.dumps(job_json(inspect_job(jobs, JOB))))  # what /api/results/<job> carries
    assert {k: v for k, v in shown.items() if k != "server"} == api
    assert api["summary"] == "dirty" and api["entry"]["status"] == "SUCCEEDED" and api["entry"]["spark_url"] is None
    assert [h["moved"]["reason"] for h in api["history"]] == ["forgotten"]


def test_an_unreadable_entry_is_a_problem_in_the_view_and_an_error_in_the_cli(jobs, redis_url, namespace, capsys):
    jobs.results.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.SUCCEEDED))
    jobs.client.set(jobs.results.keys.result(JOB), b"not json")

    view = inspect_job(jobs, JOB)

    assert view.entry is None and view.summary == "unreadable" and view.found
    assert job_json(view)["problem"]["error"] == "CorruptJobResultError"
    assert main(["--redis-url", redis_url, "--namespace", namespace, "show", JOB]) == 2
    assert "quarantine" in capsys.readouterr().err


def test_held_leases_and_in_flight_intents_name_their_job(jobs):
    lease = _start(jobs)
    token = lease.token

    assert [(h.job_id, h.holder.fence, h.intent.fence) for h in held_leases(jobs)] == [(JOB, token, token)]
    assert [(f.job_id, f.verdict.split(":")[0]) for f in in_flight(jobs)] == [(JOB, "running")]
    lease.revoke()  # the attempt is gone; its supervisor still beats
    assert in_flight(jobs)[0].verdict.startswith("spark-submit still running")


def test_an_entry_links_its_spark_application_when_a_spark_ui_is_configured(jobs):
    jobs.results.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.SUCCEEDED, application_id="app-1"))
    entry = jobs.results.get_entry(JOB)

    assert entry_json(entry, "http://history:18080/history/{application_id}/")["spark_url"] == (
        "http://history:18080/history/app-1/"
    )
    assert entry_json(entry)["spark_url"] is None
