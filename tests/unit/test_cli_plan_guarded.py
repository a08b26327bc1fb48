"""``airflow-jrs plan`` and ``backfill --missing-only`` see every guarded task, not one class.

The DAGs are parsed by Airflow's DagBag from a temporary folder and use ``@task.jrs_pyspark``,
``JrsSparkSqlOperator`` and the start-in-triggerer submit operator (nothing runs: no Spark, no
JVM); the store is the session's real redis-server. The CLI finds the tasks by their marker
(:mod:`airflow_jrs.protocol.guarded_task`) and must not import the operator modules.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from airflow_jrs.cli import main
from airflow_jrs.compat import dag_bag
from airflow_jrs.domain.identity import default_job_id, function_fingerprint, job_id_for, sql_fingerprint
from airflow_jrs.domain.sql_script import split_statements
from airflow_jrs.protocol.guarded_task import APPLICATION, FUNCTION, KINDS, PIPELINE, SQL, guarded_kind
from airflow_jrs.store import Attempt, JobResult, JobStatus, RedisJobResultStore

SQL_TEXT = "SELECT 1 AS one; INSERT OVERWRITE DIRECTORY '{jrs_output}' USING parquet SELECT 2 AS two"

DAGS = f'''
from datetime import datetime, UTC
from airflow.sdk import DAG, task
from airflow_jrs.operators import JrsCleanupOperator, JrsPySparkOperator
from airflow_jrs.operators.spark_sql import JrsSparkSqlOperator
from airflow_jrs.operators.start_in_triggerer import JrsStartInTriggererSparkSubmitOperator

START = datetime(2013, 1, 1, tzinfo=UTC)


@task.jrs_pyspark(outputs={{"ontime": "ontime"}})
def ontime(carrier: str, spark=None, jrs=None):
    return {{"rows": spark.range(3).count()}}


def per_part(part, spark=None, jrs=None):
    return {{"part": part}}


with DAG("jrs_kinds", schedule="@daily", start_date=START, catchup=False):
    daily = ontime("AA")
    sql = JrsSparkSqlOperator(task_id="sql", sql="{SQL_TEXT}", job_id="sql.{{{{ ds_nodash }}}}")
    submit = JrsStartInTriggererSparkSubmitOperator(task_id="trig", application="/nowhere/app.py")
    JrsCleanupOperator(task_id="cleanup", jobs=[daily.operator, sql, submit])
    ontime.override(task_id="ontime_mapped").expand(carrier=["AA", "UA"])
    JrsPySparkOperator.partial(task_id="parts", python_callable=per_part).expand(op_args=[[1], [2]])

with DAG("jrs_kinds_plain", schedule="@daily", start_date=START, catchup=False):
    ontime("AA")
    JrsSparkSqlOperator(task_id="sql", sql="{SQL_TEXT}")

@task
def carriers():
    return ["AA", "UA"]


with DAG("jrs_kinds_mapped_only", schedule="@daily", start_date=START, catchup=False):
    ontime.expand(carrier=carriers())  # expanded at run time: only a run knows its jobs
'''


@pytest.fixture
def dags(dag_folder):
    return dag_folder("jrs_kinds.py", DAGS)


def commit(store: RedisJobResultStore, job_id: str, fingerprint: str) -> None:
    attempt = Attempt("jrs_kinds", "t", "r", 1)
    store.create_dirty_result(
        JobResult(job_id=job_id, status=JobStatus.SUCCEEDED, attempt=attempt, fingerprint=fingerprint)
    )
    store.mark_result_as_clean(job_id)


def fingerprints(dags: str, dag_id: str) -> dict[str, str]:
    """What each task will record, by the operators' own rules (computed here, not by plan)."""
    dag = dag_bag(dags).dags[dag_id]  # the DAG as parsed: the serialized one keeps no callable
    fn = dag.get_task("ontime").python_callable
    return {
        "ontime": function_fingerprint(fn, ["AA"], {}, None),
        "sql": sql_fingerprint(split_statements(SQL_TEXT), None),
    }


def plan(redis_url, namespace, dags, capsys, dag_id="jrs_kinds", last="2013-01-02") -> tuple[int, dict]:
    argv = ["--redis-url", redis_url, "--namespace", namespace, "--json", "plan", "--dag-id", dag_id,
            "--from-date", "2013-01-01", "--to-date", last, "--dags-folder", dags]  # fmt: skip
    capsys.readouterr()
    code = main(argv)
    captured = capsys.readouterr()
    doc = json.loads(captured.out)  # with --json an error is one JSON object on stdout too
    return code, doc if code == 0 else {"err": doc["error"]["message"]}


def test_plan_counts_the_decorator_the_sql_the_triggerer_and_the_mapped_tasks(
    store, redis_url, namespace, dags, capsys
):
    fps = fingerprints(dags, "jrs_kinds")
    commit(store, "jrs_kinds.ontime.2013-01-01", fps["ontime"])
    commit(store, "sql.20130101", fps["sql"])
    commit(store, "jrs_kinds.ontime.2013-01-02", "0" * 64)  # computed by other code or arguments
    commit(store, "sql.20130102", "0" * 64)

    code, doc = plan(redis_url, namespace, dags, capsys)

    assert code == 0, doc
    got = {j["job_id"]: (j["task_id"], j["status"], j["backfill"]) for j in doc["jobs"]}
    mapped = {job_id: got.pop(job_id) for job_id in list(got) if ".map-" in job_id}
    assert mapped == {  # expanded over lists the DAG file writes: one job per map index
        f"jrs_kinds.{task_id}.2013-01-0{day}.map-{index}": (task_id, "missing", "run")
        for task_id in ("ontime_mapped", "parts")
        for day in (1, 2)
        for index in (0, 1)
    }
    assert got == {
        "jrs_kinds.ontime.2013-01-01": ("ontime", "committed", "skip"),
        "sql.20130101": ("sql", "committed", "skip"),
        "jrs_kinds.trig.2013-01-01": ("trig", "missing", "run"),
        "jrs_kinds.ontime.2013-01-02": ("ontime", "committed", "run"),
        "sql.20130102": ("sql", "committed", "run"),
        "jrs_kinds.trig.2013-01-02": ("trig", "missing", "run"),
    }
    changed = [j["reason"] for j in doc["jobs"] if j["status"] == "committed" and j["backfill"] == "run"]
    assert len(changed) == 2 and all("the job changed" in reason for reason in changed)
    assert "left out" not in " ".join(doc["notes"])


def test_backfill_missing_only_plans_a_dag_written_with_the_decorator_and_sql(
    store, redis_url, namespace, dags, capsys
):
    fps = fingerprints(dags, "jrs_kinds_plain")
    for day in ("01", "02", "03"):
        commit(store, f"jrs_kinds_plain.ontime.2013-01-{day}", fps["ontime"])
    for day in ("01", "03"):
        commit(store, f"jrs_kinds_plain.sql.2013-01-{day}", fps["sql"])
    argv = ["--redis-url", redis_url, "--namespace", namespace, "--json", "backfill", "--dag-id", "jrs_kinds_plain",
            "--from-date", "2013-01-01", "--to-date", "2013-01-03", "--dags-folder", dags,
            "--missing-only", "--dry-run"]  # fmt: skip
    capsys.readouterr()

    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [d["run"] for d in doc["dates"]] == [False, True, False]
    assert doc["summary"] == {"dates": 3, "jobs": 6, "dates_to_run": 1, "backfills": 1}
    assert [m["job_id"] for m in doc["dates"][1]["missing"]] == ["jrs_kinds_plain.sql.2013-01-02"]


def test_a_dag_whose_guarded_tasks_are_all_mapped_says_so(redis_url, namespace, dags, capsys):
    code, doc = plan(redis_url, namespace, dags, capsys, dag_id="jrs_kinds_mapped_only")
    assert code == 1
    assert "has no guarded task" in doc["err"] and "besides mapped ones" in doc["err"]
    assert "@task.jrs_pyspark" in doc["err"]


def test_every_guarded_operator_carries_the_marker_and_the_cleanup_does_not():
    from airflow_jrs.decorators.pyspark import _JrsPySparkDecoratedOperator
    from airflow_jrs.operators import JrsCleanupOperator, JrsPySparkOperator, JrsSparkSubmitOperator
    from airflow_jrs.operators.spark_pipelines import JrsSparkPipelinesOperator
    from airflow_jrs.operators.spark_sql import JrsSparkSqlOperator
    from airflow_jrs.operators.start_in_triggerer import (
        JrsStartInTriggererCleanupOperator,
        JrsStartInTriggererSparkSubmitOperator,
    )

    assert guarded_kind(JrsSparkSubmitOperator) == APPLICATION
    assert guarded_kind(JrsStartInTriggererSparkSubmitOperator) == APPLICATION
    assert guarded_kind(JrsPySparkOperator) == FUNCTION
    assert guarded_kind(_JrsPySparkDecoratedOperator) == FUNCTION
    assert guarded_kind(JrsSparkSqlOperator) == SQL
    assert guarded_kind(JrsSparkPipelinesOperator) == PIPELINE
    assert guarded_kind(JrsCleanupOperator) is None and guarded_kind(JrsStartInTriggererCleanupOperator) is None
    assert set(KINDS) == {APPLICATION, FUNCTION, SQL, PIPELINE}


def test_a_marker_with_an_unknown_kind_is_refused_by_name():
    class Odd:
        jrs_guarded = "scala"

    with pytest.raises(Exception, match=r"Odd\.jrs_guarded is 'scala'; it must be one of"):
        guarded_kind(Odd)


def test_an_empty_or_missing_job_id_means_the_default_one_everywhere():
    context = {"ti": SimpleNamespace(dag_id="d", task_id="t", map_index=-1), "logical_date": None, "run_id": "m"}
    assert job_id_for(None, context) == job_id_for("", context) == default_job_id(context) == "d.t.run-m"
    assert job_id_for("flights.20130101", context) == "flights.20130101"
    with pytest.raises(Exception, match="contains"):
        job_id_for("bad id", context)


def test_the_cli_imports_no_operator_decorator_sensor_or_trigger_module():
    package = Path(__file__).parents[2] / "airflow_jrs"
    found = {}
    for path in sorted((package / "cli").glob("*.py")):
        modules = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                modules |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
            elif isinstance(node, ast.Import):
                modules |= {alias.name for alias in node.names}
        upward = sorted(
            m
            for m in modules
            for layer in ("operators", "decorators", "sensors", "triggers")
            if m == f"airflow_jrs.{layer}" or m.startswith(f"airflow_jrs.{layer}.")
        )
        if upward:
            found[path.name] = upward
    assert len(list((package / "cli").glob("*.py"))) >= 5  # the check sees the CLI
    assert found == {}


def test_the_refusal_names_every_guarded_operator_kind():
    """The "no guarded task" refusal and docs/how-to/backfill.md list the operators a plan looks at:
    a guarded operator added to the package is named there too (it or the operator it extends)."""
    import airflow_jrs.operators as operators
    from airflow_jrs.actions.planning.job_ids import GUARDED_OPERATORS
    from airflow_jrs.operators.guarded import GuardedJob

    named = {name.strip() for name in GUARDED_OPERATORS.split(",")}
    for name in operators.__all__:
        cls = getattr(operators, name)
        if isinstance(cls, type) and issubclass(cls, GuardedJob):
            assert {c.__name__ for c in cls.__mro__} & named, f"{name} is not named in GUARDED_OPERATORS"
