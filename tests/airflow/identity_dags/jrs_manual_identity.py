"""The DAGs of the manual-run identity test: one job each, default job ids, the stand-in spark-submit.

``jrs_manual_cli`` is ``@daily`` (a cron *trigger* timetable in Airflow 3.3: a scheduled run's
interval is the instant of its date); ``jrs_manual_rest`` is a cron *data-interval* ``@daily``
(a scheduled run covers ``[date, date + 1 day)``). A run triggered by hand gets another interval
on both: the trigger time (``airflow dags trigger``), or ``[date - 1 day, date]`` (REST, UI, on
the data-interval timetable). ``jrs_subsecond`` is unscheduled: its runs are the ones a test
triggers, with logical dates less than a second apart. ``end_date`` keeps the scheduler's own runs
out of the test.
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import DAG
from airflow.timetables.interval import CronDataIntervalTimetable

from airflow_jrs.operators import jrs_spark_job
from jrs_testbench.dag_shapes import START, daily_dag
from jrs_testbench.helpers import TINY_APP

END = datetime(2013, 1, 31, tzinfo=UTC)
ARGS = {"application": TINY_APP, "application_args": ["--output", "{jrs_output}"], "conn_id": "spark_local"}

with daily_dag("jrs_manual_cli", end_date=END, tags=["jrs", "test"]):
    jrs_spark_job("sales", **ARGS)

with DAG(
    "jrs_manual_rest", schedule=CronDataIntervalTimetable("0 0 * * *", "UTC"), start_date=START, end_date=END,
    catchup=False, tags=["jrs", "test"],
):  # fmt: skip
    jrs_spark_job("sales", **ARGS)

with DAG("jrs_subsecond", schedule=None, start_date=START, tags=["jrs", "test"]):
    jrs_spark_job("sales", **ARGS)
