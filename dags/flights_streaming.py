"""flights_streaming: delays per carrier as the hours of 2013-01-01 land, stopped and resumed safely.

    land_hours (drops one CSV per hour of flights into the landing folder)
        >> carrier_delays (JrsSparkSubmitOperator(streaming=True): one stream, one checkpoint)

One stream per date (job id ``flights_streaming.carrier_delays.2013-01-01``), with one checkpoint
for every attempt and run of it. By default the application processes what has landed and
finishes (``Trigger.AvailableNow``): SUCCEEDED, and the next run of the date skips like any batch
job. In ``continuous`` mode it runs until stopped: mark the task failed, let
``execution_timeout`` fire, or run ``airflow-jrs stop flights_streaming.carrier_delays.2013-01-01``,
and the stream stops after the micro-batch in flight commits (STOPPED, with its checkpoint);
``airflow-jrs cancel`` (or a second kill) ends it at once (CANCELED). Either way the next run of
the date resumes with no gap and no duplicate. See docs/streaming.md.

Configuration (environment; all optional):

* ``JRS_FLIGHTS_STREAM_LANDING``: landing folder (default ``$AIRFLOW_HOME/jrs/stream-landing``)
* ``JRS_FLIGHTS_STREAM_MODE``: ``available_now`` (default: process what landed, then finish; the
  run succeeds) or ``continuous`` (a processing-time trigger every 10 s until stopped)
* ``JRS_FLIGHTS_LANDING``: where ``flights.csv`` is extracted (as for ``flights_daily``)
* ``JRS_SPARK_CONN_ID``: Spark connection (default ``spark_local``)
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG, task

from airflow_jrs.operators import JrsSparkSubmitOperator

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

APP = HERE / "flights" / "apps" / "carrier_delays_stream.py"
_HOME = os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow"))
STREAM_LANDING = os.environ.get("JRS_FLIGHTS_STREAM_LANDING") or os.path.join(_HOME, "jrs", "stream-landing")
FLIGHTS_LANDING = os.environ.get("JRS_FLIGHTS_LANDING") or os.path.join(_HOME, "jrs", "landing")
MODE = os.environ.get("JRS_FLIGHTS_STREAM_MODE", "available_now")

with DAG(
    "flights_streaming",
    schedule=None,
    start_date=datetime(2013, 1, 1, tzinfo=UTC),
    catchup=False,
    tags=["jrs", "example", "streaming"],
) as dag:

    @task
    def land_hours() -> list[str]:
        """The generator: one landing file per scheduled hour of 2013-01-01 (idempotent)."""
        from flights.data import ensure_landing
        from flights.hours import drop_hour, flights_by_hour

        hours = flights_by_hour(Path(ensure_landing(FLIGHTS_LANDING)) / "flights.csv")
        return [str(drop_hour(STREAM_LANDING, hour, rows)) for hour, rows in sorted(hours.items())]

    carrier_delays = JrsSparkSubmitOperator(
        task_id="carrier_delays",
        application=str(APP),
        application_args=["--landing", STREAM_LANDING, *(["--available-now"] if MODE == "available_now" else [])],
        conn_id=os.environ.get("JRS_SPARK_CONN_ID", "spark_local"),
        conf={"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"},
        streaming=True,
        stop_timeout=60,
        execution_timeout=timedelta(hours=12) if MODE == "continuous" else None,
    )
    land_hours() >> carrier_delays
