"""``on_kill`` of an unguarded run (``on_store_unavailable=run``) ends its spark-submit.

The provider's ``execute`` runs each launch on a copy of the task's operator
(:func:`airflow_jrs.launch.provider_adapter.run_submit`), so the task's own operator holds no hook,
and the attempt that failed to read the store never held the lease: before the fix ``on_kill``
found nothing it would kill, and spark-submit ran on (in a cluster deploy mode, the driver too).

Real spark-submit (local mode, ``tiny_app`` sleeping before it writes), a Redis port with nothing
listening, the real operator; ``on_kill`` is called from another thread, as Airflow's SIGTERM
handler would while ``execute`` runs.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from types import SimpleNamespace

import psutil
import pytest

from airflow_jrs.exceptions import JobKilledError
from airflow_jrs.operators import JrsSparkSubmitOperator
from jrs_testbench.helpers import TINY_APP, free_port, wait_until

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

DAY = datetime(2013, 1, 1, tzinfo=UTC)
SPARK_SUBMIT_CLASS = "org.apache.spark.deploy.SparkSubmit"


def context() -> dict:
    ti = SimpleNamespace(dag_id="d", task_id="t", try_number=1, map_index=-1, xcom_push=lambda **kw: None)
    return {"ti": ti, "run_id": "scheduled__2013-01-01", "data_interval_start": DAY, "logical_date": DAY}


def spark_submit_of_this_test(namespace: str) -> psutil.Process | None:
    """The spark-submit JVM this test's run started (the provider's ``Popen``), once it runs: named by
    the test's namespace in its conf, so a JVM another test of this worker left behind is not it."""
    for child in psutil.Process().children(recursive=True):
        try:
            cmdline = " ".join(child.cmdline())
        except psutil.Error:
            continue
        if SPARK_SUBMIT_CLASS in cmdline and namespace in cmdline:
            return child
    return None


def gone(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def kill_leftovers(namespace: str) -> None:
    """This test's Spark processes: spark-submit when the kill failed, and the application's Python
    driver (spark-submit's child, which outlives a killed JVM until its sleep ends); named by the
    test's namespace in their output folder."""
    for process in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if namespace in cmdline and (TINY_APP in cmdline or SPARK_SUBMIT_CLASS in cmdline):
            try:
                process.kill()
            except psutil.Error:
                pass


def test_on_kill_ends_the_spark_submit_of_an_unguarded_run_and_the_task_fails(jrs_env, monkeypatch, capfd):
    monkeypatch.setenv(
        "AIRFLOW_CONN_JRS_DEFAULT",
        f"redis://127.0.0.1:{free_port()}/0?namespace={jrs_env.namespace}&on_store_unavailable=run"
        "&connect_timeout=0.5&read_timeout=0.5&retries=0",
    )
    op = JrsSparkSubmitOperator(
        task_id="t",
        application=TINY_APP,
        application_args=["--output", "{jrs_output}", "--sleep", "300"],
        conn_id="spark_local",
        conf=jrs_env.spark_conf(),
    )
    outcome: dict[str, object] = {}

    def execute() -> None:
        try:
            outcome["payload"] = op.execute(context())
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=execute, daemon=True)
    thread.start()
    try:
        submit = wait_until(lambda: spark_submit_of_this_test(jrs_env.namespace), "the unguarded run's spark-submit")
        op.on_kill()  # what Airflow's SIGTERM handler calls
        wait_until(lambda: gone(submit), "spark-submit to be gone after on_kill", timeout=60)
        thread.join(timeout=120)
        assert not thread.is_alive(), "execute did not return after the kill"
    finally:
        kill_leftovers(jrs_env.namespace)
    error = outcome.get("error")
    assert isinstance(error, JobKilledError), outcome  # a killed run never succeeds
    assert "payload" not in outcome
    out, err = capfd.readouterr()
    assert "RUNNING SPARK WITHOUT THE JOB RESULT STORE" in out + err  # it was the unguarded path
    assert "Spark finished WITHOUT the job result store" not in out + err
    assert jrs_env.launches() <= 1
