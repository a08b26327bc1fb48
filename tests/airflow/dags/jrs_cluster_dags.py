"""A DAG whose Spark connection is a standalone master in *cluster* deploy mode, for the tests of
docs/recovery.md's cluster guarantees (tests/airflow/test_cluster_deploy_mode.py).

JRS_CLUSTER_CONN     the AIRFLOW_CONN_* JSON of the Spark connection (set by the test)
JRS_TEST_RETRIES     retries of the submit task (default 0)
JRS_TEST_SPARK_CONF  JSON dict of Spark conf
JRS_TEST_DURABLE     JSON true/false for ``durable`` (default: unset, the parent's default)
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG

from airflow_jrs.operators import JrsSparkSubmitOperator

with DAG("jrs_cluster", schedule=None, start_date=datetime(2013, 1, 1, tzinfo=UTC), catchup=False) as dag:
    JrsSparkSubmitOperator(
        task_id="submit",
        application="/opt/jobs/fake-app.jar",  # standalone cluster mode runs JVM applications only
        java_class="jrs.FakeApp",
        application_args=["--output", "{jrs_output}"],
        conn_id="spark_cluster",
        conf=json.loads(os.environ.get("JRS_TEST_SPARK_CONF", "{}")),
        retries=int(os.environ.get("JRS_TEST_RETRIES", "0")),
        retry_delay=timedelta(seconds=0),
        durable=json.loads(os.environ.get("JRS_TEST_DURABLE", "null")),
    )
