"""The flights shape for counting XCom calls and Redis round trips per committed date.

``ingest.submit >> ingest.cleanup >> ontime.submit >> ontime.cleanup`` (``jrs_spark_job``), where
ontime's arguments pull ingest's output, as ``dags/flights_daily.py`` does. Two DAGs: default job
ids (``jrs_xcom_default``) and templated ones (``jrs_xcom_templated``: ``xf.<name>.{{ ds }}``);
``jrs_xcom_skip_when_done``: ingest skips with ``skip_when_done`` (everything after it is skipped).
Every job is committed beforehand by the test, so no Spark runs.
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import DAG

from airflow_jrs.operators import jrs_spark_job
from jrs_testbench.helpers import TINY_APP

INGEST_ARGS = ["--output", "{jrs_output}"]
ONTIME_ARGS = [
    "--output",
    "{jrs_output}",
    "--flights",
    "{{ ti.xcom_pull(task_ids='ingest.submit')['outputs']['output'] }}",
]

VARIANTS = (
    ("jrs_xcom_default", None, False),
    ("jrs_xcom_templated", "xf.{name}.{{{{ ds }}}}", False),
    ("jrs_xcom_skip_when_done", None, True),
)

for dag_id, template, skip_when_done in VARIANTS:
    with DAG(dag_id, schedule=None, start_date=datetime(2013, 1, 1, tzinfo=UTC), catchup=False) as dag:
        ingest = jrs_spark_job(
            "ingest",
            job_id=template.format(name="ingest") if template else None,
            application=TINY_APP,
            application_args=INGEST_ARGS,
            conn_id="spark_local",
            skip_when_done=skip_when_done,
        )
        ontime = jrs_spark_job(
            "ontime",
            job_id=template.format(name="ontime") if template else None,
            application=TINY_APP,
            application_args=ONTIME_ARGS,
            conn_id="spark_local",
        )
        ingest >> ontime
    globals()[dag_id] = dag
