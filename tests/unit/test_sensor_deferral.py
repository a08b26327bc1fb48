"""JobResultSensor's deferral bookkeeping: one deadline for the whole wait, a bounded number of
bounces when the triggerer cannot read the store (no dag.test: the methods are called directly)."""

from __future__ import annotations

import time

import pytest
from airflow.sdk.exceptions import AirflowSensorTimeout, TaskDeferred

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
