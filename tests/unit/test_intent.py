"""The running-job reference (FLINK-2354): recorded and amended under the fence, never revived.

Invariant: an intent exists exactly while the job may need recovery. The amendment that adds
the spark-submit pid and application id runs on a thread beside Spark, so it can come late:
after the result was written (which drops the intent) it must not bring the intent back.
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
import redis

from airflow_jrs.exceptions import LeaseLostError
from airflow_jrs.store import JobResult, JobStatus, RedisJobResultStore
from airflow_jrs.store.intents import Intent, IntentStore
from airflow_jrs.store.redis.intents import RedisIntentStore
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.leases import RedisJobLease

JOB = "d.t.2013-01-01"


def make_intent(intents: IntentStore, fence: int) -> Intent:
    return Intent(
        job_id=JOB, fence=fence, spec_uri=intents.spec_uri(JOB, fence), staging=f"/out/{JOB}/fence-{fence}",
        app_name=f"jrs-{JOB}-{fence}", host="worker-1", pid=4242, started_at=time.time(), fingerprint="f" * 64,
    )  # fmt: skip


@pytest.fixture
def held(redis_client: redis.Redis, namespace: str, tmp_path):
    lease = RedisJobLease(redis_client, namespace, JOB, ttl=30)
    token = lease.acquire()
    intents = RedisIntentStore(redis_client, namespace, str(tmp_path / "specs"))
    intent = intents.record(make_intent(intents, token), {"application": "app.py"})
    yield lease, intents, intent
    lease.release()


def test_amend_adds_the_submission_under_the_fence(held):
    _, intents, intent = held
    amended = replace(intent, submit_pid=777, application_id="application_1_0001")
    assert intents.amend(amended) is True
    assert intents.get(JOB) == amended
    assert IntentStore.read_spec(intent.spec_uri)["application"] == "app.py"  # the spec is untouched


def test_amend_after_the_result_was_written_does_not_revive_the_intent(held, redis_url, namespace):
    lease, intents, intent = held
    store = RedisJobResultStore(redis_url, namespace)
    store.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.SUCCEEDED), fence=lease.token)
    assert intents.get(JOB) is None  # the result script dropped it
    assert intents.amend(replace(intent, submit_pid=777)) is False
    assert intents.get(JOB) is None


def test_amend_after_a_clear_does_not_revive_the_intent(held):
    lease, intents, intent = held
    intents.clear(JOB, lease.token)
    assert intents.amend(replace(intent, submit_pid=777)) is False
    assert intents.get(JOB) is None


def test_amend_by_a_stale_fence_writes_nothing(held, redis_client, namespace):
    _, intents, intent = held
    redis_client.delete(KeySpace(namespace).lease(JOB))  # expired while the holder slept
    newer = RedisJobLease(redis_client, namespace, JOB, ttl=30)
    newer.acquire()
    try:
        with pytest.raises(LeaseLostError, match="no longer holds the lease"):
            intents.amend(replace(intent, submit_pid=777))
        assert intents.get(JOB) == intent
    finally:
        newer.release()


def test_an_intent_without_the_submission_fields_still_reads(held, redis_client, namespace):
    """Intents recorded before the fields existed (or before spark-submit started) read as None."""
    _, intents, intent = held
    raw = intent.to_json().replace(',"submit_pid":null,"application_id":null', "")
    assert "submit_pid" not in raw
    redis_client.set(KeySpace(namespace).intent(JOB), raw)
    read = intents.get(JOB)
    assert read is not None and read.submit_pid is None and read.application_id is None


def test_an_intent_with_a_field_this_version_does_not_know_still_reads(held, redis_client, namespace):
    """Fields are only added within a version: a worker not yet upgraded still recovers."""
    _, intents, intent = held
    redis_client.set(KeySpace(namespace).intent(JOB), intent.to_json()[:-1] + ',"driver_host":"10.0.0.7"}')
    assert intents.get(JOB) == intent


def test_recorder_amends_the_pid_then_the_yarn_application_id_and_stops_before_the_result(held, redis_url, namespace):
    """The hook stands in for a YARN submission (no cluster here): the pid is known at once,
    the application id once spark-submit's log names it."""
    import logging
    import subprocess
    import sys
    from types import SimpleNamespace

    from airflow_jrs.launch.deploy_modes import YarnClusterMode
    from airflow_jrs.protocol.submission import SubmissionRecorder

    lease, intents, intent = held
    hook = SimpleNamespace(_submit_sp=None, _yarn_application_id=None)
    current: list[SimpleNamespace | None] = [None]
    mode = YarnClusterMode()

    def submission() -> tuple[int | None, str | None]:  # what SparkSubmitLauncher.submission answers
        return mode.submission(current[0]) if current[0] is not None else (None, None)

    recorder = SubmissionRecorder(intents, intent, submission, logging.getLogger("test"))
    spark_submit = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        recorder.start()
        current[0] = hook  # the parent operator built its hook
        hook._submit_sp = spark_submit
        wait_until(lambda: (intents.get(JOB) or intent).submit_pid == spark_submit.pid)
        hook._yarn_application_id = "application_1_0007"
        wait_until(lambda: (intents.get(JOB) or intent).application_id == "application_1_0007")
        recorder.stop()
        store = RedisJobResultStore(redis_url, namespace)
        store.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.SUCCEEDED), fence=lease.token)
        assert intents.get(JOB) is None
        assert recorder.intent.submit_pid == spark_submit.pid  # what it recorded, for the log
    finally:
        recorder.stop()
        spark_submit.kill()
        spark_submit.wait()


def wait_until(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
