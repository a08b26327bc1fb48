"""JobResultSensor through Airflow (dag.test) against real Redis, in poke, reschedule and deferrable mode.

No Spark: results are written straight into the store, before the run or from a thread
while the sensor waits (as another DAG's task would). dag.test runs triggers inline, so the
deferrable tests exercise JobResultTrigger as the triggerer would.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from airflow_jrs.store import JobResult, JobStatus
from airflow_jrs.store.redis.keys import KeySpace

pytestmark = pytest.mark.airflow

DAG_FILE = Path(__file__).parent / "dags" / "jrs_sensor_dags.py"
DATE = datetime(2013, 1, 1, tzinfo=UTC)
JOB = "upstream.job.2013-01-01"
_counter = itertools.count()


def run_sensor_dag() -> tuple[dict[str, str | None], Any]:
    """Parse the sensor DAG file (environment as set now) and dag.test() it; task states and the run."""
    spec = importlib.util.spec_from_file_location(f"jrs_sensor_dags_{next(_counter)}", DAG_FILE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dr = module.dag.test(logical_date=DATE)
    return {ti.task_id: (str(ti.state) if ti.state else None) for ti in dr.get_task_instances()}, dr


@pytest.fixture
def env(jrs_env, monkeypatch, tmp_path):
    for name in ("MODE", "DEFERRABLE", "TARGET_STATE", "TIMEOUT", "POKE_INTERVAL", "TRIGGER_POLL", "SOFT_FAIL"):
        monkeypatch.delenv(f"JRS_SENSOR_{name}", raising=False)
    monkeypatch.setenv("JRS_SENSOR_JOB_IDS", json.dumps([JOB]))
    monkeypatch.setenv("JRS_SENSOR_OUT", str(tmp_path / "xcom.json"))
    jrs_env.xcom_file = tmp_path / "xcom.json"
    return jrs_env


def consumed(env) -> Any:
    """The sensor's XCom as the downstream task received it."""
    return json.loads(env.xcom_file.read_text())


def subscribers(env) -> int:
    return int(env.store.client.pubsub_numsub(KeySpace(env.namespace).events)[0][1])


def wait_for_trigger(env, timeout: float = 60.0) -> None:
    """Block until a JobResultTrigger listens on the namespace's channel (the task deferred)."""
    deadline = time.monotonic() + timeout
    while subscribers(env) < 1:
        assert time.monotonic() < deadline, "the sensor never deferred to its trigger"
        time.sleep(0.01)


@pytest.fixture
def meanwhile() -> Iterator[Callable[[Callable[[], None]], None]]:
    """Run an action in a thread while the DAG runs (another DAG writing the result)."""
    threads: list[threading.Thread] = []
    errors: list[BaseException] = []

    def start(action: Callable[[], None]) -> None:
        def guarded() -> None:
            try:
                action()
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=guarded, daemon=True)
        thread.start()
        threads.append(thread)

    yield start
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors


def succeeded(**kwargs: Any) -> JobResult:
    return JobResult(
        job_id=JOB, status=JobStatus.SUCCEEDED, outputs={"flights": "/data/flights"}, application_id="local-7", **kwargs
    )


def test_poke_mode_waits_for_the_result_and_hands_it_downstream(env, meanwhile):
    def later() -> None:
        time.sleep(1.0)
        env.store.create_dirty_result(succeeded())

    meanwhile(later)
    states, _ = run_sensor_dag()
    assert states == {"wait": "success", "consume": "success"}
    [result] = consumed(env)
    assert result["job_id"] == JOB and result["status"] == "SUCCEEDED" and result["state"] == "dirty"
    assert result["outputs"] == {"flights": "/data/flights"} and result["application_id"] == "local-7"


def test_reschedule_mode_frees_the_slot_until_the_result_is_clean(env, monkeypatch, meanwhile):
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.taskreschedule import TaskReschedule
    from airflow.utils.session import create_session
    from sqlalchemy import select

    monkeypatch.setenv("JRS_SENSOR_MODE", "reschedule")
    monkeypatch.setenv("JRS_SENSOR_POKE_INTERVAL", "1")
    monkeypatch.setenv("JRS_SENSOR_TARGET_STATE", "clean")
    env.store.create_dirty_result(succeeded())  # dirty is not enough for target_state="clean"

    started = datetime.now(UTC)

    def rescheduled() -> bool:
        """A reschedule of this test's run (rows of earlier runs in a reused home do not count)."""
        with create_session() as session:
            query = select(TaskReschedule.id).join(TaskInstance, TaskReschedule.ti_id == TaskInstance.id)
            query = query.where(
                TaskInstance.dag_id == "jrs_sensor",
                TaskInstance.task_id == "wait",
                TaskReschedule.start_date >= started,
            )
            return session.scalars(query).first() is not None

    def commit_later() -> None:
        """Commit only once the sensor has given its slot back (not after a guessed sleep)."""
        deadline = time.monotonic() + 120
        while not rescheduled():
            assert time.monotonic() < deadline, "the sensor never rescheduled"
            time.sleep(0.2)
        env.store.mark_result_as_clean(JOB)

    meanwhile(commit_later)
    states, dr = run_sensor_dag()
    assert states == {"wait": "success", "consume": "success"}
    assert [r["state"] for r in consumed(env)] == ["clean"]
    ti = next(t for t in dr.get_task_instances() if t.task_id == "wait")
    with create_session() as session:
        reschedules = session.scalars(select(TaskReschedule).where(TaskReschedule.ti_id == ti.id)).all()
    assert len(reschedules) >= 1, "the sensor never gave its slot back"


def test_deferrable_mode_wakes_on_the_stores_notification(env, monkeypatch, meanwhile):
    monkeypatch.setenv("JRS_SENSOR_DEFERRABLE", "1")
    monkeypatch.setenv("JRS_SENSOR_TRIGGER_POLL", "300")  # only a notification can end the wait in time
    waited: list[float] = []

    def create_once_deferred() -> None:
        wait_for_trigger(env)
        created = time.monotonic()
        env.store.create_dirty_result(succeeded())
        while subscribers(env):  # the trigger yields and unsubscribes
            time.sleep(0.005)
        waited.append(time.monotonic() - created)

    meanwhile(create_once_deferred)
    states, _ = run_sensor_dag()
    assert states == {"wait": "success", "consume": "success"}
    # Without the notification the trigger re-reads only after 300 s (dag.test ignores the
    # defer timeout); half of that is a bound no load explains.
    assert waited and waited[0] < 150, f"the trigger took {waited}s: the notification was not used"
    [result] = consumed(env)
    assert result["job_id"] == JOB and result["state"] == "dirty"


def test_deferrable_sensor_with_the_result_present_does_not_defer(env, monkeypatch):
    monkeypatch.setenv("JRS_SENSOR_DEFERRABLE", "1")
    monkeypatch.setenv("JRS_SENSOR_JOB_IDS", json.dumps(["upstream.job.{{ ds }}"]))  # job_ids is templated
    env.store.create_dirty_result(succeeded())
    states, _ = run_sensor_dag()
    assert states == {"wait": "success", "consume": "success"}
    assert consumed(env)[0]["job_id"] == JOB


@pytest.mark.parametrize("deferrable", [False, True], ids=["poke", "deferrable"])
def test_failed_result_fails_the_sensor_fast(env, monkeypatch, meanwhile, deferrable):
    monkeypatch.setenv("JRS_SENSOR_TIMEOUT", "600")
    failed = JobResult(job_id=JOB, status=JobStatus.FAILED, error="executor lost")
    if deferrable:
        monkeypatch.setenv("JRS_SENSOR_DEFERRABLE", "1")

        def fail_once_deferred() -> None:
            wait_for_trigger(env)
            env.store.create_dirty_result(failed)

        meanwhile(fail_once_deferred)
    else:
        env.store.create_dirty_result(failed)
    started = time.monotonic()
    states, _ = run_sensor_dag()
    assert states == {"wait": "failed", "consume": "upstream_failed"}
    # Half the sensor's timeout: a sensor that waited for its timeout also ends "failed".
    assert time.monotonic() - started < 300, "the sensor waited for its timeout instead of failing fast"


def test_soft_fail_skips_on_timeout(env, monkeypatch):
    monkeypatch.setenv("JRS_SENSOR_TIMEOUT", "1")
    monkeypatch.setenv("JRS_SENSOR_SOFT_FAIL", "1")
    states, _ = run_sensor_dag()
    assert states == {"wait": "skipped", "consume": "skipped"}


def test_corrupt_entry_fails_the_sensor_and_is_quarantined(env):
    keys = KeySpace(env.namespace)
    env.store.client.set(keys.result(JOB), b"{not json")
    states, _ = run_sensor_dag()
    assert states == {"wait": "failed", "consume": "upstream_failed"}
    assert env.store.get_quarantined() == [JOB]
    assert env.store.client.get(keys.quarantine(JOB)) == b"{not json"


def test_deferred_sensor_fails_closed_on_an_entry_corrupted_while_it_waits(env, monkeypatch, meanwhile):
    """The trigger does not interpret an unreadable entry; the sensor re-reads through the store."""
    monkeypatch.setenv("JRS_SENSOR_DEFERRABLE", "1")
    keys = KeySpace(env.namespace)

    def corrupt_once_deferred() -> None:
        wait_for_trigger(env)
        env.store.client.set(keys.result(JOB), b"garbage")
        env.store.client.publish(keys.events, json.dumps({"event": "created", "job_id": JOB}))

    meanwhile(corrupt_once_deferred)
    states, _ = run_sensor_dag()
    assert states == {"wait": "failed", "consume": "upstream_failed"}
    assert env.store.get_quarantined() == [JOB]
