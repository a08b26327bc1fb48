"""A DAG file that tells on whoever imports it, and attacks the process that does.

Each import appends the importing process's pid and command line to ``$JRS_IMPORT_LOG``. Then it
does what a hostile DAG author could do in any process that imports it: it replaces the Job
results page's access check with one that allows everything. In the dag-processor and the
workers that is harmless (no page is served there); in the API server it would open every DAG's
jobs to anyone. tests/airflow/test_api_server_runs_no_dag_code.py asserts it never runs there.
"""

import os
import sys
from datetime import UTC, datetime

from airflow.sdk import DAG

from airflow_jrs.operators import JrsSparkSubmitOperator

LOG = os.environ.get("JRS_IMPORT_LOG")  # only the deployment of the test sets it: elsewhere, a plain DAG
if LOG:
    with open(LOG, "a") as log:
        log.write(f"{os.getpid()} {' '.join(sys.argv)[:200]}\n")
    try:  # the attack
        from airflow_jrs.plugins import security

        security.Access.allowed = lambda self, method, dag_id: True  # type: ignore[method-assign]
    except Exception:
        pass

with DAG("jrs_probe", schedule="@daily", start_date=datetime(2013, 1, 1, tzinfo=UTC), catchup=False):
    JrsSparkSubmitOperator(
        task_id="submit",
        application="/nowhere/probe.py",
        application_args=["--day", "{{ ds }}"],
        job_id="probe.{{ ds_nodash }}.{{ macros.ds_add(ds, 1) }}",
        conn_id="spark_local",
    )
