"""@task.jrs_pyspark / JrsPySparkOperator on real local SparkSessions and a real Redis.

What is counted, not mocked: Spark applications (event log files), the function's calls and
completions (lines it appends to files), the processes of a task (psutil), the store's entries.
A "task process" is a child Python running the operator's ``execute`` with a task context, as
Airflow's task runner would; it is SIGKILLed where the test needs the worst death.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil
import pytest

from airflow_jrs.domain.identity import function_fingerprint, function_source
from airflow_jrs.operators.cleanup import JrsCleanupOperator
from airflow_jrs.operators.pyspark import JrsPySparkOperator
from jrs_testbench.invariants import assert_clean_outputs_exist

pytestmark = [pytest.mark.airflow]

DAY = datetime(2013, 1, 1, tzinfo=UTC)
JOB = "d.t.2013-01-01"
HERE = Path(__file__).resolve().parent
ROWS = 25


def count_rows(rows: int, control: str, spark=None, jrs=None):
    """The tests' job: ``rows`` rows of Parquet in the fenced folder. Appends its fence to
    ``control/calls`` when called and to ``control/done`` when finished; while ``control/block``
    exists its one Spark task holds (writing ``control/started`` first), so a test can kill it
    mid-job."""
    ctl = Path(control)
    with (ctl / "calls").open("a") as fh:
        fh.write(f"{jrs.fence}\n")
    df = spark.range(rows).coalesce(1)
    if (ctl / "block").exists():
        started, block = str(ctl / "started"), str(ctl / "block")

        def hold(_rows: Any) -> None:
            import os
            import time

            open(started, "w").close()
            while os.path.exists(block):
                time.sleep(0.05)

        df.foreachPartition(hold)
    df.write.mode("overwrite").parquet(f"{jrs.output}/data")
    with (ctl / "done").open("a") as fh:
        fh.write(f"{jrs.fence}\n")
    return {"rows": rows}


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def context(try_number: int = 1) -> dict[str, Any]:
    ti = SimpleNamespace(dag_id="d", task_id="t", try_number=try_number, map_index=-1, xcom_push=lambda **kw: None)
    return {"ti": ti, "run_id": "scheduled__2013-01-01", "data_interval_start": DAY, "logical_date": DAY}


def operator(jrs_env: Any, control: Path, retries: int = 0, conn_id: str = "spark_local") -> JrsPySparkOperator:
    return JrsPySparkOperator(
        task_id="t", python_callable=count_rows, op_kwargs={"rows": ROWS, "control": str(control)},
        conn_id=conn_id, config_kwargs=jrs_env.spark_conf(), outputs={"data": "data"}, retries=retries,
    )  # fmt: skip


#: A task process: runs the operator once and reports what this process holds of Spark afterwards.
TASK_PROCESS = """
import json, sys
sys.path.insert(0, sys.argv[1])
import psutil, pyspark
import test_pyspark_task as t
from airflow_jrs.operators.pyspark import JrsPySparkOperator
op = JrsPySparkOperator(
    task_id="t", python_callable=t.count_rows, op_kwargs={"rows": t.ROWS, "control": sys.argv[2]},
    conn_id=sys.argv[5], config_kwargs=json.loads(sys.argv[3]), outputs={"data": "data"},
)
payload = op.execute(t.context(int(sys.argv[4])))
print(json.dumps({
    "payload": payload,
    "gateway": pyspark.SparkContext._gateway is not None,
    "active_context": pyspark.SparkContext._active_spark_context is not None,
    "children": [p.name() for p in psutil.Process().children(recursive=True)],
}), flush=True)
"""


def task_process(
    jrs_env: Any, control: Path, try_number: int = 1, conn_id: str = "spark_local"
) -> subprocess.Popen[str]:
    args = [str(HERE), str(control), json.dumps(jrs_env.spark_conf()), str(try_number), conn_id]
    return subprocess.Popen(
        [sys.executable, "-c", TASK_PROCESS, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.fixture
def control(tmp_path: Path) -> Path:
    folder = tmp_path / "control"
    folder.mkdir()
    return folder


@pytest.mark.spark
def test_the_first_run_computes_and_the_second_skips_without_a_session_or_a_jvm(jrs_env, control):
    payload = operator(jrs_env, control).execute(context())
    assert payload["status"] == "SUCCEEDED" and payload["reused"] is False
    assert payload["metrics"] == {"rows": ROWS}  # the function's return value
    assert payload["outputs"]["data"].endswith("/data")
    assert jrs_env.launches() == 1 and len(lines(control / "done")) == 1
    import pyspark

    assert pyspark.SparkContext._active_spark_context is None  # the launcher stopped its session

    second = task_process(jrs_env, control, try_number=1)
    out, err = second.communicate(timeout=600)
    assert second.returncode == 0, err[-3000:]
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["payload"]["reused"] is True and seen["payload"]["metrics"] == {"rows": ROWS}
    # Nothing of Spark in the task process: no py4j gateway, no SparkContext, no JVM child.
    assert seen["gateway"] is False and seen["active_context"] is False
    assert not [name for name in seen["children"] if "java" in name]
    assert jrs_env.launches() == 1 and len(lines(control / "calls")) == 1  # the function was not called

    JrsCleanupOperator(task_id="cleanup", jobs=[JOB]).execute({"ti": context()["ti"], "outlet_events": {}})
    assert len(assert_clean_outputs_exist(jrs_env.store)) == 1


@pytest.mark.spark
def test_sigkill_of_the_task_mid_job_leaves_nothing_running_and_the_retry_computes_once(jrs_env, control):
    (control / "block").touch()
    first = task_process(jrs_env, control, try_number=1)
    try:
        while not (control / "started").exists():  # the Spark task is running
            assert first.poll() is None, first.communicate()[1][-3000:]
            time.sleep(0.1)
        spark_side = psutil.Process(first.pid).children(recursive=True)
        assert any("java" in p.name() for p in spark_side), [p.name() for p in spark_side]
        first.send_signal(signal.SIGKILL)
        first.wait()
    finally:
        if first.poll() is None:
            first.kill()
    # The driver JVM (its gateway reads the dead parent's pipe) and its Python workers end by
    # themselves: nobody else kills them, and the block file is still there.
    _, alive = psutil.wait_procs(spark_side, timeout=120)
    assert not alive, f"outlived the task process: {[(p.pid, p.name()) for p in alive]}"
    assert (control / "block").exists() and lines(control / "done") == []

    (control / "block").unlink()
    payload = operator(jrs_env, control, retries=1).execute(context(try_number=2))
    assert payload["status"] == "SUCCEEDED" and payload["reused"] is False
    killed_fence, retry_fence = (int(f) for f in lines(control / "calls"))
    assert lines(control / "done") == [str(retry_fence)] and retry_fence > killed_fence  # computed once
    assert jrs_env.launches() == 2  # the killed attempt's application and the retry's
    entry = jrs_env.store.get_entry(JOB)
    assert entry.result.fence == retry_fence and f"fence-{retry_fence}" in entry.result.outputs["data"]

    JrsCleanupOperator(task_id="cleanup", jobs=[JOB]).execute({"ti": context()["ti"], "outlet_events": {}})
    (checked,) = assert_clean_outputs_exist(jrs_env.store)  # the clean output matches its marker
    assert checked.result.metrics == {"rows": ROWS}


def _variant(rows: int, control: str, spark=None, jrs=None):
    """Same as count_rows but one more row: a different computation."""
    return {"rows": rows + 1}


def _same_as_variant(rows: int, control: str, spark=None, jrs=None):
    """Only this docstring and the comment differ from _variant."""
    # a comment does not change what is computed
    return {"rows": rows + 1}


def test_the_fingerprint_follows_the_source_the_arguments_and_job_version():
    args = {"rows": 3, "control": "/tmp/c"}
    base = function_fingerprint(count_rows, [], args, None)
    assert base == function_fingerprint(count_rows, [], dict(reversed(args.items())), None)
    assert base != function_fingerprint(_variant, [], args, None)  # the source changed
    assert base != function_fingerprint(count_rows, [], {**args, "rows": 4}, None)  # an argument
    assert base != function_fingerprint(count_rows, [], args, "2")  # job_version
    # docstring, comments and indentation are not the computation
    assert (
        function_source(_same_as_variant)
        == "def _same_as_variant(rows: int, control: str, spark=None, jrs=None):\n    return {'rows': rows + 1}"
    )


def test_the_provider_registers_task_jrs_pyspark_on_spark_connect_and_refuses_yarn(monkeypatch):
    from airflow.sdk import DAG, task

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT_T", json.dumps({"conn_type": "spark_connect", "host": "sc://h"}))
    with DAG("d", schedule=None, start_date=DAY):

        @task.jrs_pyspark(conn_id="spark_connect_t", outputs={"o": "o"})
        def job(day: str, spark=None, jrs=None):
            return {"day": day}

        called = job("2013-01-01")
    op = called.operator
    assert isinstance(op, JrsPySparkOperator) and op.op_args == ("2013-01-01",)
    assert function_source(op.python_callable).startswith("def job(")  # the decorator line is not the computation
    from airflow_jrs.exceptions import JrsConfigError

    assert op._session_settings() == ("sc://h/", {})  # the Connect launcher's remote session
    op.conn_id, op.config_kwargs = None, {"spark.master": "yarn"}
    with pytest.raises(JrsConfigError, match="only local"):
        op._session_settings()


def test_a_return_value_that_is_not_small_json_is_not_stored_as_metrics():
    import logging

    from airflow_jrs.launch.session_launcher import MAX_METRICS_BYTES, metrics_of

    log = logging.getLogger("t")
    assert metrics_of({"rows": 1}, log) == {"rows": 1} and metrics_of(7, log) == {"value": 7}
    assert metrics_of(None, log) == {} and metrics_of(object(), log) == {}
    assert metrics_of("x" * MAX_METRICS_BYTES, log) == {}


def _flights_pyspark_dag() -> Any:
    import importlib.util

    from jrs_testbench.helpers import ROOT

    path = ROOT / "dags" / "flights_pyspark.py"
    spec = importlib.util.spec_from_file_location(f"flights_pyspark_{time.monotonic_ns()}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


@pytest.mark.spark
def test_the_flights_pyspark_dag_computes_a_day_once_and_its_second_run_starts_no_session(
    jrs_env, monkeypatch, tmp_path
):
    monkeypatch.setenv("JRS_SPARK_EVENT_LOG_DIR", jrs_env.spark.uri)
    monkeypatch.setenv("JRS_FLIGHTS_LANDING", str(tmp_path / "landing"))
    run = _flights_pyspark_dag().test(logical_date=DAY)
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert set(states.values()) == {"success"}, states
    assert jrs_env.launches() == 2  # one session per job
    entries = {e.job_id: e for e in assert_clean_outputs_exist(jrs_env.store)}
    assert set(entries) == {"flights_pyspark.ingest.2013-01-01", "flights_pyspark.ontime.2013-01-01"}
    assert entries["flights_pyspark.ingest.2013-01-01"].result.metrics == {"rows": 842, "date": "2013-01-01"}
    assert entries["flights_pyspark.ontime.2013-01-01"].result.metrics["flights"] == 842

    run = _flights_pyspark_dag().test(logical_date=DAY)  # the same date again: both jobs are committed
    assert {str(ti.state) for ti in run.get_task_instances()} == {"success"}
    assert jrs_env.launches() == 2, "a session started for a committed job"


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory):
    from jrs_testbench.spark_cluster import SparkStandaloneCluster

    with SparkStandaloneCluster(tmp_path_factory.mktemp("spark-standalone"), worker_memory="2g") as cluster:
        yield cluster


@pytest.mark.spark
@pytest.mark.cluster
def test_sigkill_of_a_task_with_a_spark_master_session_ends_its_application_on_the_cluster(
    jrs_env, control, spark_cluster, monkeypatch
):
    from airflow_jrs.domain.paths import app_name_prefix

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_STANDALONE", spark_cluster.connection())
    prefix = app_name_prefix(jrs_env.namespace, JOB)

    def ours(apps: list[dict[str, Any]]) -> list[str]:
        return [a["id"] for a in apps if str(a.get("name", "")).startswith(prefix)]

    (control / "block").touch()
    first = task_process(jrs_env, control, conn_id="spark_standalone")
    try:
        while not (control / "started").exists():  # its Spark task runs on the cluster's executor
            assert first.poll() is None, first.communicate()[1][-3000:]
            time.sleep(0.1)
        (app_id,) = ours(spark_cluster.active_applications())
        executors = [p for p in psutil.process_iter(["cmdline"]) if app_id in (p.info.get("cmdline") or [])]
        assert executors, f"no executor process of {app_id} on this host"
        driver_side = psutil.Process(first.pid).children(recursive=True)  # the driver JVM
        first.send_signal(signal.SIGKILL)
        first.wait()
    finally:
        if first.poll() is None:
            first.kill()
    # The driver was the task process: its JVM exits, the master ends the application, its workers
    # end its executors.
    _, alive = psutil.wait_procs(driver_side + executors, timeout=120)
    assert not alive, f"outlived the task process: {[(p.pid, p.name()) for p in alive]}"
    while ours(spark_cluster.active_applications()):
        time.sleep(0.2)  # bounded by the test's own time: the master must end it by itself
    assert app_id in ours(spark_cluster.status().get("completedapps", []))

    (control / "block").unlink()
    payload = operator(jrs_env, control, retries=1, conn_id="spark_standalone").execute(context(try_number=2))
    assert payload["status"] == "SUCCEEDED" and payload["reused"] is False
    killed_fence, retry_fence = (int(f) for f in lines(control / "calls"))
    assert lines(control / "done") == [str(retry_fence)] and retry_fence > killed_fence
    assert payload["application_id"] in ours(spark_cluster.status().get("completedapps", []))
    JrsCleanupOperator(task_id="cleanup", jobs=[JOB]).execute({"ti": context()["ti"], "outlet_events": {}})
    assert len(assert_clean_outputs_exist(jrs_env.store)) == 1


@pytest.mark.spark
def test_on_kill_mid_job_cancels_the_sessions_job_and_records_nothing(jrs_env, control):
    import threading

    import pyspark

    from airflow_jrs.exceptions import JobKilledError

    (control / "block").touch()
    op = operator(jrs_env, control)

    def kill_once_running() -> None:
        while not (control / "started").exists():
            time.sleep(0.1)
        op.on_kill()  # what Airflow's SIGTERM handler calls (here from another thread)

    killer = threading.Thread(target=kill_once_running, daemon=True)
    killer.start()
    with pytest.raises(JobKilledError):
        op.execute(context())  # the held Spark task is cancelled although the block file stays
    killer.join()
    assert (control / "block").exists() and lines(control / "done") == []
    assert jrs_env.store.get_entry(JOB) is None  # no result of any kind
    assert pyspark.SparkContext._active_spark_context is None  # the session was stopped

    (control / "block").unlink()
    payload = operator(jrs_env, control, retries=1).execute(context(try_number=2))
    assert payload["reused"] is False and len(lines(control / "done")) == 1
