"""DAGs of the CeleryExecutor tests (tests/e2e/test_celery.py), a bundle of their own.

``jrs_celery_takeover``: one submit/cleanup pair on the tests' tiny application, sleeping long
enough that a test can kill the Celery worker that runs it while its Spark application
computes on the standalone cluster (connection ``spark_standalone``, client deploy mode). The
submit task has retries with no delay: Airflow retries it as soon as it noticed the dead
worker's task, on the other worker. ``end_date`` in the past and ``catchup=False``: unpausing
creates no run by itself.
"""

from __future__ import annotations

from datetime import timedelta

from airflow_jrs.operators import jrs_spark_job
from jrs_testbench.dag_shapes import daily_dag, spark_conf
from jrs_testbench.helpers import ROOT, TINY_APP

#: The application's arguments (the tests precompute the job's fingerprint from them).
TAKEOVER_ARGS = ["--output", "{jrs_output}", "--rows", "5", "--sleep", "20"]
SPARK_CONF = spark_conf(
    {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "1",
        "spark.driver.memory": "512m",
        "spark.executor.memory": "512m",
        # One core each: a second application of the job would get the cluster's other core and run
        # at once, so the tests' check that it never does means something.
        "spark.cores.max": "1",
    }
)

with daily_dag("jrs_celery_takeover", max_active_runs=2, tags=["jrs", "e2e", "celery"]) as dag:
    jrs_spark_job(
        "slow",
        application=TINY_APP,
        application_args=TAKEOVER_ARGS,
        conn_id="spark_standalone",
        conf=SPARK_CONF,
        env_vars={"PYTHONPATH": str(ROOT)},
        retries=2,
        retry_delay=timedelta(0),
        lease_wait_timeout=120,
    )
