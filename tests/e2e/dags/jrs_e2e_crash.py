"""A guarded submit whose task the crash test SIGKILLs while its application runs
(tests/e2e/test_crash_ends_the_try.py).

The application waits for a gate file named in the run's conf, so the test decides when the
orphaned application ends; one retry (1 s apart) recovers it: it takes the dead try's lease
over at once and waits for the orphan as long as it takes. The lease's TTL is also the orphan's
heartbeat TTL: at 6 s a supervisor stalled for about a second on a loaded machine fenced itself
and killed the application the test waits on (a gate saw it), so it is 20 s. Manual runs only
(``schedule=None``), and the job id comes from the run's conf: nothing here runs unasked.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG

from airflow_jrs.operators import JrsSparkSubmitOperator
from jrs_testbench.dag_shapes import START, spark_conf
from jrs_testbench.helpers import ROOT

GATED_APP = str(ROOT / "tests" / "spark" / "apps" / "gated_app.py")
SPARK_CONF = spark_conf({"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1"})

with DAG("jrs_e2e_crash", schedule=None, start_date=START, catchup=False, tags=["jrs", "e2e"]) as dag:
    JrsSparkSubmitOperator(
        task_id="submit",
        job_id="{{ dag_run.conf['job_id'] }}",
        application=GATED_APP,
        application_args=["--output", "{jrs_output}", "--gate", "{{ dag_run.conf['gate'] }}"],
        conn_id="spark_local",
        conf=SPARK_CONF,
        env_vars={"PYTHONPATH": str(ROOT)},
        retries=1,
        retry_delay=timedelta(seconds=1),
        lease_ttl=20,
        lease_wait_timeout=600,
    )
