"""A DAG with a task of every guarded kind, for the lineage tests (tests/airflow/test_lineage.py).

JRS_TEST_SPARK_CONF       JSON dict of Spark conf every task's application gets (event logs)
JRS_TEST_PIPELINE_SPEC    the spark-pipeline.yml of the Pipelines task
JRS_TEST_CONNECT_CONN_ID  the Spark Connect connection of the Connect task
JRS_TEST_JDBC_CONN_ID     the JDBC connection (a Derby database with APP.FLIGHTS) of the JDBC task
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime

from airflow.sdk import DAG, task

from airflow_jrs.operators import (
    JrsSparkJDBCOperator,
    JrsSparkPipelinesOperator,
    JrsSparkSqlOperator,
    JrsSparkSubmitOperator,
)
from jrs_testbench.helpers import TINY_APP

_conf = json.loads(os.environ.get("JRS_TEST_SPARK_CONF", "{}"))


def _parent(spark):
    """What Spark's OpenLineage listener would read as this session's parent task."""
    return {"parent": spark.conf.get("spark.openlineage.parentJobName", "")}


with DAG("jrs_lineage", schedule=None, start_date=datetime(2013, 1, 1, tzinfo=UTC), catchup=False) as dag:
    JrsSparkSubmitOperator(
        task_id="submit",
        application=TINY_APP,
        application_args=["--output", "{jrs_output}"],
        conn_id="spark_local",
        conf=_conf,
        skip_when_done=True,
    )

    @task.jrs_pyspark(conn_id="spark_local", config_kwargs=_conf, outputs={"rows": "rows"}, skip_when_done=True)
    def session(spark=None, jrs=None):
        spark.range(3).write.parquet(jrs.outputs["rows"])
        return _parent(spark)

    session()

    JrsSparkSqlOperator(
        task_id="sql",
        sql="INSERT OVERWRITE DIRECTORY '{jrs_output.daily}' USING parquet SELECT id FROM range(3)",
        conn_id="spark_local",
        conf=_conf,
        outputs={"daily": "daily"},
        skip_when_done=True,
    )

    JrsSparkPipelinesOperator(
        task_id="pipeline",
        pipeline_spec=os.environ.get("JRS_TEST_PIPELINE_SPEC", "spark-pipeline.yml"),
        conf=_conf,
        outputs={"daily": "warehouse/daily"},
        skip_when_done=True,
    )

    JrsSparkJDBCOperator(
        task_id="copy",
        cmd_type="jdbc_to_spark",
        jdbc_table="APP.FLIGHTS",
        metastore_table="flights",
        save_format="parquet",
        jdbc_conn_id=os.environ.get("JRS_TEST_JDBC_CONN_ID", "derby_src"),
        jdbc_driver="org.apache.derby.jdbc.EmbeddedDriver",
        spark_conn_id="spark_local",
        spark_conf=_conf,
        skip_when_done=True,
    )

    @task.jrs_pyspark(
        task_id="connect",
        conn_id=os.environ.get("JRS_TEST_CONNECT_CONN_ID", "spark_connect_default"),
        outputs={"rows": "rows"},
        skip_when_done=True,
    )
    def connect(spark=None, jrs=None):
        spark.range(3).write.parquet(jrs.outputs["rows"])
        return _parent(spark)

    connect()
