"""The DAG of the missing-only backfill test: two jobs per date, on the stand-in spark-submit.

Job ids name the date (``mo_a.<ds>``), so the test commits exactly the jobs it wants through the
store API. ``end_date`` keeps the scheduler's own catch-up run (catchup=False still makes the
latest interval) outside the test's range.
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow_jrs.operators import jrs_spark_job
from jrs_testbench.dag_shapes import daily_dag
from jrs_testbench.helpers import TINY_APP

with daily_dag("jrs_missing_only", end_date=datetime(2013, 1, 31, tzinfo=UTC), tags=["jrs", "test"]):
    first = jrs_spark_job(
        "a", job_id="mo_a.{{ ds }}", application=TINY_APP, application_args=["--output", "{jrs_output}"],
        conn_id="spark_local",
    )  # fmt: skip
    second = jrs_spark_job(
        "b", job_id="mo_b.{{ ds }}", application=TINY_APP, application_args=["--output", "{jrs_output}"],
        conn_id="spark_local",
    )  # fmt: skip
    first >> second
