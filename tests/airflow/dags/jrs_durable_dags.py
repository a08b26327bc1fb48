"""A standalone cluster-mode DAG with ``durable`` (the parent's ResumableJobMixin) and one job id for
every run, for tests/airflow/test_durable_reattach.py: two runs of two dates share one job, so a
second run stands for a cleared task or a backfill (another run, another task state store).

JRS_CLUSTER_CONN     the AIRFLOW_CONN_SPARK_CLUSTER JSON (set by the test's fixture)
JRS_TEST_RETRIES     retries of the submit task (default 0)
JRS_TEST_DURABLE     "true" / "false" / unset (the parent's default)
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG

from airflow_jrs.operators import JrsSparkSubmitOperator

durable = os.environ.get("JRS_TEST_DURABLE")

with DAG("jrs_durable", schedule=None, start_date=datetime(2013, 1, 1, tzinfo=UTC), catchup=False) as dag:
    JrsSparkSubmitOperator(
        task_id="submit",
        job_id="jrs_durable.submit",  # one job for every run: another run finds the same intent
        application="/opt/jobs/fake-app.jar",  # standalone cluster mode runs JVM applications only
        java_class="jrs.FakeApp",
        application_args=["--output", "{jrs_output}"],
        conn_id="spark_cluster",
        retries=int(os.environ.get("JRS_TEST_RETRIES", "0")),
        retry_delay=timedelta(seconds=0),
        status_poll_interval=1,
        **({} if durable is None else {"durable": json.loads(durable)}),
    )
