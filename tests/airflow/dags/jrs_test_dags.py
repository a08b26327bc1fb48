"""DAGs for the Airflow tests. dag.test() parses DAG files from the configured bundles, so test
DAGs live in a file; each test shapes them through environment variables set before the run.

JRS_TEST_APP_ARGS     JSON list of extra application args for tiny_app (default [])
JRS_TEST_SPARK_CONF   JSON dict of Spark conf (event log dir for launch counting)
JRS_TEST_JOB_VERSION  job_version of the submit task
JRS_TEST_RETRIES      retries of the submit task (default 0)
JRS_TEST_EXEC_TIMEOUT execution_timeout of the submit task in seconds (default none)
JRS_TEST_SKIP_WHEN_DONE  "1" raises a skip instead of succeeding on a stored result
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG

from airflow_jrs.operators import JrsCleanupOperator, JrsSparkSubmitOperator
from jrs_testbench.helpers import TINY_APP

_timeout = os.environ.get("JRS_TEST_EXEC_TIMEOUT")

with DAG("jrs_tiny", schedule=None, start_date=datetime(2013, 1, 1, tzinfo=UTC), catchup=False) as dag:
    submit = JrsSparkSubmitOperator(
        task_id="submit",
        application=TINY_APP,
        application_args=["--output", "{jrs_output}", *json.loads(os.environ.get("JRS_TEST_APP_ARGS", "[]"))],
        conn_id="spark_local",
        conf=json.loads(os.environ.get("JRS_TEST_SPARK_CONF", "{}")),
        job_version=os.environ.get("JRS_TEST_JOB_VERSION") or None,
        retries=int(os.environ.get("JRS_TEST_RETRIES", "0")),
        retry_delay=timedelta(seconds=0),
        execution_timeout=timedelta(seconds=float(_timeout)) if _timeout else None,
        skip_when_done=os.environ.get("JRS_TEST_SKIP_WHEN_DONE") == "1",
    )
    JrsCleanupOperator(task_id="cleanup", jobs=[submit])
