"""The DAG of ``benchmarks/missing_only.py``: two jobs per date (submit >> cleanup each), chained.

Job ids name the date (``bmo_a.<ds>``) so the benchmark commits exactly the jobs it wants
through the store API. spark-submit is the stand-in of :mod:`jrs_testbench.fake_spark` (the
script puts it first on PATH): a missing job runs the real operator, supervisor and cleanup,
without 10-20 s of JVM start. ``end_date`` bounds the scheduler's own catch-up run, whose jobs
the script commits beforehand.
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import DAG

from airflow_jrs.operators import jrs_spark_job
from jrs_testbench.helpers import TINY_APP

with DAG(
    "bench_missing_only",
    schedule="@daily",
    start_date=datetime(2013, 1, 1, tzinfo=UTC),
    end_date=datetime(2017, 12, 31, tzinfo=UTC),
    catchup=False,
    max_active_runs=10,  # as the benchmark's backfills: runs with their logical dates get the same bound
    tags=["jrs", "bench"],
):
    first = jrs_spark_job(
        "a", job_id="bmo_a.{{ ds }}", application=TINY_APP, application_args=["--output", "{jrs_output}"],
        conn_id="spark_local",
    )  # fmt: skip
    second = jrs_spark_job(
        "b", job_id="bmo_b.{{ ds }}", application=TINY_APP, application_args=["--output", "{jrs_output}"],
        conn_id="spark_local",
    )  # fmt: skip
    first >> second
