"""A one-task DAG for the tests of Airflow's executor safeguard (tests/airflow/test_executor_safeguard.py).

JRS_TEST_ALLOW_NESTED  "0" builds the submit task with ``allow_nested_operators=False`` (default "1")
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from airflow.sdk import DAG

from airflow_jrs.operators import JrsSparkSubmitOperator
from jrs_testbench.helpers import TINY_APP

with DAG("jrs_safeguard", schedule=None, start_date=datetime(2013, 1, 1, tzinfo=UTC), catchup=False) as dag:
    JrsSparkSubmitOperator(
        task_id="submit",
        application=TINY_APP,
        application_args=["--output", "{jrs_output}"],
        conn_id="spark_local",
        allow_nested_operators=os.environ.get("JRS_TEST_ALLOW_NESTED", "1") == "1",
    )
