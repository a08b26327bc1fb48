"""DAGs for the end-to-end tests (a second bundle beside the project's ``dags/``).

``jrs_e2e_triggerer``: the flights DAG's shape (two submit/cleanup pairs, the second one's
arguments pulled from the first one's XCom) on the tiny application, every task starting in
the triggerer (``start_in_triggerer``). Event logs go to
``JRS_SPARK_EVENT_LOG_DIR`` when set (one file per Spark application: the tests count them).
"""

from __future__ import annotations

from airflow_jrs.operators import jrs_spark_job
from jrs_testbench.dag_shapes import daily_dag, spark_conf
from jrs_testbench.helpers import ROOT, TINY_APP

SPARK_CONF = spark_conf({"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"})
SPARK_ENV = {"PYTHONPATH": str(ROOT)}

with daily_dag("jrs_e2e_triggerer", max_active_runs=2, tags=["jrs", "e2e"]) as dag:
    first = jrs_spark_job(
        "tiny",
        start_in_triggerer=True,
        application=TINY_APP,
        application_args=["--output", "{jrs_output}", "--rows", "5"],
        conn_id="spark_local",
        conf=SPARK_CONF,
        env_vars=SPARK_ENV,
    )
    # A template that reads XCom, rendered in the triggerer as on a worker (like flights' ontime).
    rows = "{{ ti.xcom_pull(task_ids='tiny.submit')['metrics']['rows'] + 1 }}"
    second = jrs_spark_job(
        "tiny2",
        start_in_triggerer=True,
        application=TINY_APP,
        application_args=["--output", "{jrs_output}", "--rows", rows],
        conn_id="spark_local",
        conf=SPARK_CONF,
        env_vars=SPARK_ENV,
    )
    first >> second
