"""JrsSparkSqlOperator on real local SparkSessions and a real Redis.

What is counted, not mocked: Spark applications (event log files), the files the SQL wrote,
the processes of a task (psutil), the store's entries. The second run is a child Python
running the operator's ``execute`` with a task context, as Airflow's task runner would, so
that what it holds of Spark afterwards (a py4j gateway, a JVM child) can be seen.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow.parquet as pq
import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from airflow_jrs.domain.identity import sql_fingerprint
from airflow_jrs.domain.sql_script import fill_placeholders, script_text, split_statements
from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.operators.cleanup import JrsCleanupOperator
from airflow_jrs.operators.spark_sql import JrsSparkSqlOperator, SparkSqlStatementError
from jrs_testbench.invariants import assert_clean_outputs_exist

pytestmark = [pytest.mark.airflow]

DAY = datetime(2013, 1, 1, tzinfo=UTC)
JOB = "d.t.2013-01-01"
HERE = Path(__file__).resolve().parent

#: The tests' job: 25 rows into the fenced output ``daily``, then a figure read back from it.
SQL = """
-- numbers and their parity
CREATE OR REPLACE TEMPORARY VIEW numbers AS
  SELECT id, IF(id % 2 = 0, 'even; or not', 'odd') AS kind FROM range(25);

INSERT OVERWRITE DIRECTORY '{jrs_output.daily}' USING parquet
  SELECT kind, count(*) AS n FROM numbers GROUP BY kind;

SELECT count(*) AS rows, sum(n) AS numbers FROM parquet.`{jrs_output.daily}`;
"""


def context(try_number: int = 1) -> dict[str, Any]:
    ti = SimpleNamespace(dag_id="d", task_id="t", try_number=try_number, map_index=-1, xcom_push=lambda **kw: None)
    return {"ti": ti, "run_id": "scheduled__2013-01-01", "data_interval_start": DAY, "logical_date": DAY}


def operator(jrs_env: Any, sql: str = SQL, **kwargs: Any) -> JrsSparkSqlOperator:
    return JrsSparkSqlOperator(
        task_id="t", sql=sql, conn_id="spark_local", conf=jrs_env.spark_conf(), outputs={"daily": "daily"}, **kwargs
    )


#: A task process: runs the operator once and reports what this process holds of Spark afterwards.
TASK_PROCESS = """
import json, sys
sys.path.insert(0, sys.argv[1])
import psutil, pyspark
import test_spark_sql as t
from airflow_jrs.operators.spark_sql import JrsSparkSqlOperator
op = JrsSparkSqlOperator(
    task_id="t", sql=t.SQL, conn_id="spark_local", conf=json.loads(sys.argv[2]), outputs={"daily": "daily"},
)
payload = op.execute(t.context())
print(json.dumps({
    "payload": payload,
    "gateway": pyspark.SparkContext._gateway is not None,
    "children": [p.name() for p in psutil.Process().children(recursive=True)],
}), flush=True)
"""


@pytest.mark.spark
def test_the_first_run_writes_under_the_fenced_folder_and_the_second_skips_without_a_session_or_a_jvm(jrs_env):
    payload = operator(jrs_env).execute(context())
    assert payload["status"] == "SUCCEEDED" and payload["reused"] is False
    # the last statement's one row are the job's figures
    assert payload["metrics"] == {"statements": 3, "rows": 2, "numbers": 25}
    daily = Path(payload["outputs"]["daily"])
    fence = jrs_env.store.get_entry(JOB).result.fence
    assert daily.parent.name.startswith(f"fence-{fence}-") and daily.name == "daily"
    table = pq.read_table(str(daily)).to_pydict()
    assert dict(zip(table["kind"], table["n"], strict=True)) == {"even; or not": 13, "odd": 12}
    assert (daily.parent / "_JRS_COMMIT.json").exists()  # written after the last statement
    assert jrs_env.launches() == 1
    import pyspark

    assert pyspark.SparkContext._active_spark_context is None  # the launcher stopped its session

    second = subprocess.Popen(
        [sys.executable, "-c", TASK_PROCESS, str(HERE), json.dumps(jrs_env.spark_conf())],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    out, err = second.communicate(timeout=600)
    assert second.returncode == 0, err[-3000:]
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["payload"]["reused"] is True and seen["payload"]["metrics"] == payload["metrics"]
    # Nothing of Spark in the task process: no py4j gateway, no JVM child, no application.
    assert seen["gateway"] is False and not [name for name in seen["children"] if "java" in name]
    assert jrs_env.launches() == 1

    JrsCleanupOperator(task_id="cleanup", jobs=[JOB]).execute({"ti": context()["ti"], "outlet_events": {}})
    assert len(assert_clean_outputs_exist(jrs_env.store)) == 1


@pytest.mark.spark
def test_a_bad_statement_fails_naming_it_and_records_no_success(jrs_env):
    sql = "CREATE OR REPLACE TEMPORARY VIEW v AS SELECT 1 AS x;\nSELECT no_such_column FROM v;\nSELECT 1"
    with pytest.raises(SparkSqlStatementError) as failed:
        operator(jrs_env, sql, tables=["db.t"]).execute(context())
    message = str(failed.value)
    assert "t: statement 2 of 3 failed (AnalysisException)" in message
    assert "no_such_column" in message and "SELECT no_such_column FROM v" in message
    entry = jrs_env.store.get_entry(JOB)
    assert entry is not None and entry.result.status.value == "FAILED"  # the last try records FAILED
    assert "statement 2 of 3" in (entry.result.error or "")
    import pyspark

    assert pyspark.SparkContext._active_spark_context is None


def test_the_fingerprint_follows_the_statements_and_job_version_not_the_spacing_between_them():
    def fp(sql: str, version: str | None = None) -> str:
        return sql_fingerprint(JrsSparkSqlOperator(task_id="t", sql=sql).statements(), version)

    base = fp("SELECT 1; SELECT 2")
    assert base == fp("\n-- the figures\nSELECT 1;\n\n   SELECT 2;\n")  # between statements: not the computation
    assert base != fp("SELECT 1; SELECT 3")  # a changed statement
    assert base != fp("SELECT 1; SELECT 2", "2")  # job_version
    assert fp("SELECT 1 -- one") != fp("SELECT 1")  # inside a statement everything counts
    # placeholders are filled after the fingerprint: every attempt of one script has the same one
    assert fp("INSERT OVERWRITE DIRECTORY '{jrs_output}' SELECT 1") != fp("INSERT OVERWRITE DIRECTORY '/x' SELECT 1")


def test_a_sql_file_is_fingerprinted_by_its_content(tmp_path):
    script = tmp_path / "job.sql"
    script.write_text("SELECT 1;\nSELECT 2;\n")
    assert script_text(str(script)) == script.read_text()
    first = sql_fingerprint(JrsSparkSqlOperator(task_id="t", sql=str(script)).statements(), None)
    script.write_text("SELECT 1;\nSELECT 3;\n")
    assert first != sql_fingerprint(JrsSparkSqlOperator(task_id="t", sql=str(script)).statements(), None)
    with pytest.raises(JrsConfigError, match=r"does not exist on this worker"):
        script_text(str(tmp_path / "missing.sql"))


def test_a_sql_file_in_the_template_searchpath_is_templated_like_the_providers(tmp_path):
    from airflow.sdk import DAG

    (tmp_path / "job.sql").write_text("SELECT '{{ ds }}' AS day;\nINSERT OVERWRITE DIRECTORY '{jrs_output}' SELECT 1")
    with DAG("d", schedule=None, start_date=DAY, template_searchpath=[str(tmp_path)]):
        op = JrsSparkSqlOperator(task_id="t", sql="job.sql")
    op.render_template_fields({"ds": "2013-01-01", "params": {}})
    # Jinja renders the file's content; the single-brace placeholder waits for the attempt's fence
    assert op.statements() == ["SELECT '2013-01-01' AS day", "INSERT OVERWRITE DIRECTORY '{jrs_output}' SELECT 1"]


def test_statements_split_on_semicolons_outside_quotes_and_comments():
    script = """
    SELECT 'a;b', "c;d", `e;f` FROM t; -- a comment; with a semicolon
    /* a block; comment */
    SELECT 'it\\'s;' ;;
    -- only a comment;
    """
    assert split_statements(script) == ["SELECT 'a;b', \"c;d\", `e;f` FROM t", "SELECT 'it\\'s;'"]
    with pytest.raises(JrsConfigError, match="holds no statement"):
        JrsSparkSqlOperator(task_id="t", sql="-- nothing;\n").statements()


def test_placeholders_are_checked_before_the_attempt_and_filled_at_launch(jrs_env):
    filled = fill_placeholders(
        ["INSERT OVERWRITE DIRECTORY '{jrs_output.daily}' SELECT '{jrs_job_id}', {jrs_fence}, '{jrs_output}'"],
        output="/o/fence-7", outputs={"daily": "/o/fence-7/daily"}, job_id="j", fence=7,
    )  # fmt: skip
    assert filled == ["INSERT OVERWRITE DIRECTORY '/o/fence-7/daily' SELECT 'j', 7, '/o/fence-7'"]
    # a typo fails before the store is touched and before any session
    # (a configuration error: failed without retries, AirflowFailException)
    with pytest.raises(AirflowFailException, match=r"\{jrs_output\.dayly\}.*declared: \['daily'\]"):
        operator(jrs_env, "INSERT OVERWRITE DIRECTORY '{jrs_output.dayly}' SELECT 1").execute(context())
    assert jrs_env.store.get_entry(JOB) is None and jrs_env.launches() == 0


def test_only_sessions_in_the_task_process_are_accepted_and_conf_takes_the_providers_forms(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_SQL_T", json.dumps({"conn_type": "spark_sql", "host": "local[2]"}))
    op = JrsSparkSqlOperator(
        task_id="t", sql="SELECT 1", conn_id="spark_sql_t", conf="spark.sql.shuffle.partitions=3, a.b=c",
        executor_memory="1g",
    )  # fmt: skip
    master, conf = op._session_settings()
    assert master == "local[2]"
    assert conf["spark.sql.shuffle.partitions"] == "3" and conf["a.b"] == "c" and conf["spark.executor.memory"] == "1g"
    assert JrsSparkSqlOperator(task_id="t", sql="SELECT 1")._session_settings()[0] == "local[*]"
    with pytest.raises(JrsConfigError, match="only local"):
        JrsSparkSqlOperator(task_id="t", sql="SELECT 1", master="yarn")._session_settings()
    with pytest.raises(JrsConfigError, match="not key=value"):
        JrsSparkSqlOperator(task_id="t", sql="SELECT 1", conf="oops")._session_settings()


@pytest.mark.spark
def test_on_kill_mid_statement_stops_the_session_and_records_nothing(jrs_env):
    import threading

    import pyspark

    from airflow_jrs.exceptions import JobKilledError

    # statement 2 holds its one Spark task (a JVM sleep) until the kill cancels its job
    sql = "SELECT 1 AS warmup;\nSELECT reflect('java.lang.Thread', 'sleep', bigint(8000)) FROM range(1)"
    op = operator(jrs_env, sql)

    def kill_once_running() -> None:
        while True:
            launcher = op._launcher
            spark = launcher._session if launcher is not None else None
            if spark is not None and spark.sparkContext.statusTracker().getActiveJobsIds():
                break
            time.sleep(0.1)
        op.on_kill()  # what Airflow's SIGTERM handler calls (here from another thread)

    killer = threading.Thread(target=kill_once_running, daemon=True)
    killer.start()
    with pytest.raises(JobKilledError):
        op.execute(context())  # not SparkSqlStatementError: the kill, not the SQL, ended it
    killer.join()
    assert jrs_env.store.get_entry(JOB) is None  # no result of any kind
    assert not list(jrs_env.output_root.rglob("_JRS_COMMIT.json"))  # no marker: nothing vouched for
    assert pyspark.SparkContext._active_spark_context is None


@pytest.mark.spark
def test_the_flights_sql_dag_computes_a_day_once_and_its_second_run_starts_no_session(jrs_env, monkeypatch, tmp_path):
    import importlib.util

    from jrs_testbench.helpers import ROOT

    monkeypatch.setenv("JRS_SPARK_EVENT_LOG_DIR", jrs_env.spark.uri)
    monkeypatch.setenv("JRS_FLIGHTS_LANDING", str(tmp_path / "landing"))

    def dag() -> Any:
        spec = importlib.util.spec_from_file_location(
            f"flights_sql_{time.monotonic_ns()}", ROOT / "dags" / "flights_sql.py"
        )
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.dag

    run = dag().test(logical_date=DAY)
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert set(states.values()) == {"success"}, states
    (entry,) = assert_clean_outputs_exist(jrs_env.store)
    assert entry.job_id == "flights_sql.carriers.2013-01-01"
    assert entry.result.metrics["flights"] == 842 and entry.result.metrics["statements"] == 3
    assert jrs_env.launches() == 1

    run = dag().test(logical_date=DAY)  # the same date again: committed
    assert {str(ti.state) for ti in run.get_task_instances()} == {"success"}
    assert jrs_env.launches() == 1, "a session started for a committed job"
