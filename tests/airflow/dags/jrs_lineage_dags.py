"""A DAG with one task of each in-process guarded kind and a spark-submit, for the lineage tests.

JRS_TEST_SPARK_CONF  JSON dict of Spark conf every task's application gets (event logs)
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime

from airflow.sdk import DAG, task

from airflow_jrs.operators import JrsSparkSqlOperator, JrsSparkSubmitOperator
from jrs_testbench.helpers import TINY_APP

_conf = json.loads(os.environ.get("JRS_TEST_SPARK_CONF", "{}"))

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
        spark.range(3).write.parquet(f"{jrs.output}/rows")
        return {"parent": spark.conf.get("spark.openlineage.parentJobName", "")}

    session()

    JrsSparkSqlOperator(
        task_id="sql",
        sql="INSERT OVERWRITE DIRECTORY '{jrs_output.daily}' USING parquet SELECT id FROM range(3)",
        conn_id="spark_local",
        conf=_conf,
        outputs={"daily": "daily"},
        skip_when_done=True,
    )
