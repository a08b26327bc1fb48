"""JobResultSensor's deferral bookkeeping: one deadline for the whole wait, a bounded number of
bounces when the triggerer cannot read the store (no dag.test: the methods are called directly)."""

from __future__ import annotations

import time

import pytest
from airflow.providers.common.compat.sdk import AirflowSensorTimeout, TaskDeferred

from airflow_jrs.exceptions import JrsError
from airflow_jrs.sensors import JobResultSensor
from airflow_jrs.sensors.job_result import MAX_TRIGGER_ERRORS
from jrs_testbench.helpers import connection_env

ERROR = {"status": "error", "message": "Connection refused (from the triggerer)"}


@pytest.fixture
def sensor(monkeypatch, redis_url, namespace):
    for key, value in connection_env(redis_url, namespace).items():
        monkeypatch.setenv(key, value)
    return JobResultSensor(task_id="wait", job_ids=["other.job.2013-01-01"], deferrable=True, timeout=600)


def test_re_deferral_after_a_trigger_error_keeps_the_first_deadline(sensor):
    deadline = time.time() + 30
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute_complete({}, ERROR, deadline=deadline, errors=0)
    assert deferred.value.kwargs == {"deadline": deadline, "errors": 1}
    assert deferred.value.timeout is not None and deferred.value.timeout.total_seconds() <= 30


def test_first_deferral_sets_the_deadline_from_timeout(sensor):
    before = time.time()
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    assert before + 600 <= deferred.value.kwargs["deadline"] <= time.time() + 600
    assert deferred.value.kwargs["errors"] == 0


def test_a_passed_deadline_times_out_instead_of_deferring_again(sensor):
    with pytest.raises(AirflowSensorTimeout, match="timed out"):
        sensor.execute_complete({}, ERROR, deadline=time.time() - 1, errors=0)


def test_a_triggerer_that_keeps_failing_fails_the_task_with_what_to_check(sensor):
    with pytest.raises(JrsError, match="triggerer") as info:
        sensor.execute_complete({}, ERROR, deadline=time.time() + 30, errors=MAX_TRIGGER_ERRORS - 1)
    assert "Connection refused" in str(info.value)


def test_a_summary_from_the_trigger_returns_the_full_result_of_that_same_entry(
    monkeypatch, redis_url, namespace, tmp_path
):
    """With [jrs] result_documents the trigger sends summaries of clean references; the worker
    reads their documents. When the job's entry is another one by then (forgotten, recomputed,
    now dirty), the sensor must not return that one as the result it waited for: it checks
    again, and waits (here: defers) for the new one to be clean."""
    from airflow_jrs.domain.payload import entry_payload
    from airflow_jrs.store import JobResult, JobStatus, RedisJobResultStore
    from airflow_jrs.store.results.documents import FolderDocuments

    job = "other.job.2013-01-01"
    (tmp_path / "documents").mkdir()
    for key, value in connection_env(redis_url, namespace).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AIRFLOW__JRS__RESULT_DOCUMENTS", str(tmp_path / "documents"))
    store = RedisJobResultStore(redis_url, namespace, result_documents=FolderDocuments(tmp_path / "documents"))
    store.create_dirty_result(JobResult(job, JobStatus.SUCCEEDED, outputs={"o": "/out/1"}))
    store.mark_result_as_clean(job)
    summary = store.get_entry(job)
    assert summary is not None and summary.summary
    event = {"status": "success", "results": [entry_payload(summary)]}
    sensor = JobResultSensor(task_id="wait", job_ids=[job], deferrable=True, timeout=600, target_state="clean")
    (result,) = sensor.execute_complete({}, event, deadline=time.time() + 30, errors=0)
    assert result["outputs"] == {"o": "/out/1"} and "summary" not in result

    store.forget_result(job)
    store.create_dirty_result(JobResult(job, JobStatus.SUCCEEDED, outputs={"o": "/out/2"}))
    sensor = JobResultSensor(task_id="wait", job_ids=[job], deferrable=True, timeout=600, target_state="clean")
    with pytest.raises(TaskDeferred):  # before: the new, dirty result returned as the clean one
        sensor.execute_complete({}, event, deadline=time.time() + 30, errors=0)
