"""A guarded submit whose task the crash-retry test SIGKILLs while its application runs
(tests/e2e/test_crash_retry_adopts.py), with a user's everyday settings: the default lease
(60 s TTL, no wait for a held lease) and one retry 5 s later, long before that lease expires.

The application waits for a gate file named in the run's conf, so the test decides when the
orphaned application ends. Manual runs only (``schedule=None``), and the job id comes from the
run's conf: nothing here runs unasked.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG

from airflow_jrs.operators import JrsSparkSubmitOperator
from jrs_testbench.dag_shapes import START, spark_conf
from jrs_testbench.helpers import ROOT

GATED_APP = str(ROOT / "tests" / "spark" / "apps" / "gated_app.py")
SPARK_CONF = spark_conf({"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1"})

with DAG("jrs_e2e_crash_retry", schedule=None, start_date=START, catchup=False, tags=["jrs", "e2e"]) as dag:
    JrsSparkSubmitOperator(
        task_id="submit",
        job_id="{{ dag_run.conf['job_id'] }}",
        application=GATED_APP,
        application_args=["--output", "{jrs_output}", "--gate", "{{ dag_run.conf['gate'] }}"],
        conn_id="spark_local",
        conf=SPARK_CONF,
        env_vars={"PYTHONPATH": str(ROOT)},
        retries=1,
        retry_delay=timedelta(seconds=5),  # shorter than lease_ttl (60 s): the retry meets try 1's lease
    )
