"""A mapped guarded submit (two map indexes) for the browser test of the task instance's
*Job result* tab: Airflow fills ``{MAP_INDEX}`` in the tab's link only for mapped tasks.

Each map index is a job of its own (``<dag>.submit.<date>.map-<i>``). No cleanup task: the tab
shows a dirty result as well as a clean one. Event logs as in ``jrs_e2e_dags``.
"""

from __future__ import annotations

from airflow.sdk import DAG

from airflow_jrs.operators import JrsSparkSubmitOperator
from jrs_testbench.dag_shapes import START, spark_conf
from jrs_testbench.helpers import ROOT, TINY_APP

SPARK_CONF = spark_conf({"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"})

with DAG("jrs_e2e_mapped", schedule=None, start_date=START, catchup=False, tags=["jrs", "e2e"]) as dag:
    JrsSparkSubmitOperator.partial(
        task_id="submit",
        application=TINY_APP,
        conn_id="spark_local",
        conf=SPARK_CONF,
        env_vars={"PYTHONPATH": str(ROOT)},
    ).expand(application_args=[["--output", "{jrs_output}", "--rows", str(rows)] for rows in (1, 2)])
