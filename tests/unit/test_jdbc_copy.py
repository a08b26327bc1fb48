"""JrsSparkJDBCOperator without Spark: the provider internal it uses (pinned), what its
fingerprint covers, and the copies it refuses because their output would leave the fence.

The real copies (spark-submit, Derby) are in tests/airflow/test_spark_jdbc.py."""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from airflow.providers.apache.spark.hooks.spark_jdbc import SparkJDBCHook
from airflow.providers.common.compat.sdk import AirflowFailException

from airflow_jrs.domain.identity import application_fingerprint
from airflow_jrs.exceptions import JrsConfigError, StoreUnavailableError
from airflow_jrs.operators.spark_jdbc import (
    SCRIPT_PATH,
    JrsSparkJDBCOperator,
    _JdbcLauncher,
    copy_definition,
    masked,
    provider_jdbc_arguments,
    table_folder,
)
from airflow_jrs.protocol.guarded_task import planned_fingerprint
from jrs_testbench.fake_spark import install_fake_spark_submit
from jrs_testbench.helpers import free_port


@pytest.fixture
def derby_conn(monkeypatch):
    conn = {"conn_type": "jdbc", "host": "derby", "schema": "src", "login": "app", "password": "s3cret",
            "extra": {"conn_prefix": "jdbc:derby:/data/"}}  # fmt: skip
    monkeypatch.setenv("AIRFLOW_CONN_DERBY_SRC", json.dumps(conn))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL", json.dumps({"conn_type": "spark", "host": "local[1]"}))


def copy(**kwargs) -> JrsSparkJDBCOperator:
    args = {"task_id": "copy", "cmd_type": "jdbc_to_spark", "jdbc_conn_id": "derby_src", "jdbc_table": "APP.T",
            "metastore_table": "t", "spark_conn_id": "spark_local", **kwargs}  # fmt: skip
    return JrsSparkJDBCOperator(**args)


def test_the_providers_jdbc_script_and_arguments_are_as_this_operator_expects(derby_conn):
    """The provider's script, and the arguments its hook builds from a real connection (the
    builder and its connection attribute, provider internals, are pinned per provider version by
    ``tests/unit/test_provider_adapter.py``)."""
    assert Path(SCRIPT_PATH).is_file(), f"the provider no longer ships {SCRIPT_PATH}"
    hook = SparkJDBCHook(
        spark_conn_id="spark_local", conn_id="spark_local", cmd_type="jdbc_to_spark", jdbc_table="APP.T",
        jdbc_conn_id="derby_src", metastore_table="t", save_mode="overwrite",
    )  # fmt: skip
    assert provider_jdbc_arguments(hook) == [
        "-cmdType", "jdbc_to_spark", "-url", "jdbc:derby:/data/derby/src", "-user", "app", "-password", "s3cret",
        "-metastoreTable", "t", "-jdbcTable", "APP.T", "-saveMode", "overwrite",
    ]  # fmt: skip


def test_the_arguments_come_from_the_hook_and_the_spec_never_keeps_the_password(derby_conn):
    args = copy(save_mode="overwrite").jdbc_arguments()
    assert args[args.index("-url") + 1] == "jdbc:derby:/data/derby/src"
    assert masked([*args, "-name", "x"])[args.index("-password") + 1] == "***"
    with pytest.raises(JrsConfigError, match=r"JDBC connection 'nowhere' is not defined or has no host.*conn_prefix"):
        copy(jdbc_conn_id="nowhere").jdbc_arguments()


def test_the_fingerprint_covers_the_copy_not_the_connections_content_nor_the_scripts_path(derby_conn, monkeypatch):
    op = copy(save_mode="overwrite", num_partitions=2)
    assert op.application == "spark_jdbc_script.py"
    assert op.application_args == [
        "cmd_type=jdbc_to_spark", "jdbc_conn_id=derby_src", "jdbc_table=APP.T", "metastore_table=t",
        "save_mode=overwrite", "num_partitions=2",
    ]  # fmt: skip
    # what airflow-jrs plan computes from the task is what the task records
    planned = planned_fingerprint(op)
    assert planned == application_fingerprint("spark_jdbc_script.py", copy_definition(vars(op)), None)
    assert copy_definition(vars(copy(save_mode="append", num_partitions=2))) != op.application_args
    # a new password is not a new copy
    monkeypatch.setenv("AIRFLOW_CONN_DERBY_SRC", json.dumps({"conn_type": "jdbc", "host": "derby", "password": "x"}))
    assert copy_definition(vars(copy(save_mode="overwrite", num_partitions=2))) == op.application_args


def test_jdbc_to_spark_records_the_tables_folder_and_refuses_what_would_leave_the_fence():
    assert copy().outputs == {"table": "warehouse/t"}
    assert table_folder("default.Flights", task_id="c") == "warehouse/flights"
    assert table_folder("spark_catalog.default.`t`", task_id="c") == "warehouse/t"
    with pytest.raises(JrsConfigError, match="names a database other than 'default'"):
        copy(metastore_table="sales.t")
    op = copy(spark_conf={"spark.sql.warehouse.dir": "/shared/warehouse"})
    with pytest.raises(JrsConfigError, match=r"spark_conf sets \['spark.sql.warehouse.dir'\]"):
        op._refuse_fence_escapes()
    # a launch's fence conf goes to that launch only: the operator (run again by dag.test, or a
    # retry in one process) keeps the user's conf, so the next attempt is not refused for it
    again = copy(spark_conf={"spark.executor.memory": "1g"})
    launch_conf = _JdbcLauncher.user_conf(SimpleNamespace(op=again), SimpleNamespace(staging="/o/fence-1-ab"))
    assert launch_conf["spark.sql.warehouse.dir"] == "/o/fence-1-ab/warehouse"
    assert again.conf == {"spark.executor.memory": "1g"}
    again._refuse_fence_escapes()
    # spark_to_jdbc writes a database table: no folder to record, and any conf (its metastore) is the user's
    to_jdbc = copy(cmd_type="spark_to_jdbc", metastore_table="sales.t", spark_conf={"spark.sql.warehouse.dir": "/w"})
    assert to_jdbc.outputs == {}
    to_jdbc._refuse_fence_escapes()


def test_arguments_that_the_operator_defines_itself_are_refused():
    with pytest.raises(JrsConfigError, match="cmd_type must be 'spark_to_jdbc' or 'jdbc_to_spark', got 'both'"):
        copy(cmd_type="both")
    with pytest.raises(JrsConfigError, match="does not take 'application_args'"):
        copy(application_args=["x"])
    with pytest.raises(JrsConfigError, match="needs both jdbc_table and metastore_table"):
        copy(jdbc_table=None)


def test_a_store_that_is_down_fails_the_copy_closed_even_with_on_store_unavailable_run(
    derby_conn, tmp_path, monkeypatch
):
    bin_dir, calls = install_fake_spark_submit(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    fast = "connect_timeout=0.5&read_timeout=0.5&retries=1&retry_backoff=0.05&on_store_unavailable=run"
    monkeypatch.setenv("AIRFLOW_CONN_JRS_DEFAULT", f"redis://127.0.0.1:{free_port()}/0?namespace=t&{fast}")
    monkeypatch.setenv("AIRFLOW__JRS__OUTPUT_ROOT", str(tmp_path / "output"))
    ti = SimpleNamespace(dag_id="d", task_id="copy", try_number=1, map_index=-1, xcom_push=lambda **kw: None)
    day = datetime(2013, 1, 1, tzinfo=UTC)
    with pytest.raises(StoreUnavailableError, match=r"nothing listens at 127\.0\.0\.1"):
        copy().execute({"ti": ti, "run_id": "r", "data_interval_start": day, "logical_date": day})
    assert not calls.exists(), "spark-submit ran without the store"


#: A stand-in spark-submit for the copy: it records its command line and creates the table's
#: folder where the session's warehouse conf and the script's -metastoreTable put it.
_FAKE_COPY = """#!{python}
import os, sys
args = sys.argv[1:]
with open({calls!r}, "a") as fh:
    fh.write(" ".join(args) + "\\n")
conf = dict(a.split("=", 1) for a in args if a.startswith("spark.") and "=" in a)
table = args[args.index("-metastoreTable") + 1].split(".")[-1].lower()
os.makedirs(os.path.join(conf["spark.sql.warehouse.dir"], table))
"""


@pytest.mark.parametrize("template", ["{{ params.table }}", "{{ var.value.t }}", "{{ dag_run.conf['t'] }}"])
def test_a_templated_metastore_table_is_checked_and_named_once_rendered(
    derby_conn, redis_url, namespace, tmp_path, monkeypatch, template
):
    """A template's text is not the table (its dots name no database): nothing is refused or
    recorded from it at parse; the rendered name is checked and its folder recorded at execution."""
    op = copy(metastore_table=template)  # parse time: no false 'database other than default'
    assert op.outputs is None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    (bin_dir / "spark-submit").write_text(_FAKE_COPY.format(python=sys.executable, calls=str(calls)))
    (bin_dir / "spark-submit").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("AIRFLOW_CONN_JRS_DEFAULT", f"{redis_url}?namespace={namespace}")
    monkeypatch.setenv("AIRFLOW__JRS__OUTPUT_ROOT", str(tmp_path / "output"))
    day = datetime(2013, 1, 1, tzinfo=UTC)

    def run(table: str) -> dict:
        task = copy(metastore_table=template, job_id=f"copy.{table}")
        ti = SimpleNamespace(dag_id="d", task_id="copy", run_id="r", try_number=1, map_index=-1,
                             xcom_push=lambda **kw: None)  # fmt: skip
        context = {"ti": ti, "run_id": "r", "data_interval_start": day, "logical_date": day,
                   "params": {"table": table}, "var": {"value": {"t": table}},
                   "dag_run": SimpleNamespace(conf={"t": table})}  # fmt: skip
        task.render_template_fields(context)
        return task.execute(context)

    payload = run("Flights")
    assert payload["outputs"]["table"].endswith("/warehouse/flights"), payload
    assert "-metastoreTable Flights" in calls.read_text()
    with pytest.raises(AirflowFailException, match=r"metastore_table 'sales\.t' names a database other than 'default'"):
        run("sales.t")
    assert calls.read_text().count("\n") == 1, "a refused table started spark-submit"
