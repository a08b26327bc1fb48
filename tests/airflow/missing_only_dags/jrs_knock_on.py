"""A downstream job whose input is its upstream's output: recomputing the upstream recomputes it.

``down``'s arguments carry ``up``'s output folder (from ``up``'s XCom), which lives under the
fence of the attempt that wrote it: when ``up`` computes again its folder moves, ``down``'s
fingerprint changes and it computes again too. tests/airflow/test_ui_dates.py checks that a
range "Recompute" preview of ``up`` lists ``down`` and that the launches that follow are exactly
the previewed jobs (issue 41: the preview under-counted on Airflow 3.2).
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow_jrs.operators import jrs_spark_job
from jrs_testbench.dag_shapes import daily_dag
from jrs_testbench.helpers import TINY_APP

UP_OUTPUT = "{{ ti.xcom_pull(task_ids='up.submit')['outputs']['data'] }}"

with daily_dag("jrs_knock_on", end_date=datetime(2013, 1, 31, tzinfo=UTC), tags=["jrs", "test"]):
    up = jrs_spark_job(
        "up", job_id="ko_up.{{ ds }}", application=TINY_APP, application_args=["--output", "{jrs_output}"],
        outputs={"data": "data"}, conn_id="spark_local",
    )  # fmt: skip
    down = jrs_spark_job(
        "down", job_id="ko_down.{{ ds }}", application=TINY_APP,
        application_args=["--output", "{jrs_output}", "--input", UP_OUTPUT], conn_id="spark_local",
    )  # fmt: skip
    up >> down
