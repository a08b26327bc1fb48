"""The mapped-submit DAG of tests/airflow/test_mapped_jobs.py: one job per region and date.

``regions`` is one ``JrsSparkSubmitOperator`` expanded over two regions, with the default job
ids (``jrs_mapped_regions.regions.<ds>.map-0`` and ``.map-1``); ``region_cleanup`` names the
mapped task and must commit both. spark-submit is the test's stand-in (one line per launch,
the output and its commit marker written). ``end_date`` keeps the scheduler's own catch-up run
outside the tests' dates.
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow_jrs.operators import JrsCleanupOperator, JrsSparkSubmitOperator
from jrs_testbench.dag_shapes import daily_dag
from jrs_testbench.helpers import TINY_APP

REGIONS = [["--output", "{jrs_output}", "--region", "eu"], ["--output", "{jrs_output}", "--region", "us"]]

with daily_dag("jrs_mapped_regions", end_date=datetime(2013, 1, 31, tzinfo=UTC), tags=["jrs", "test"]):
    regions = JrsSparkSubmitOperator.partial(task_id="regions", application=TINY_APP, conn_id="spark_local").expand(
        application_args=REGIONS
    )
    JrsCleanupOperator(task_id="region_cleanup", jobs=[regions])
