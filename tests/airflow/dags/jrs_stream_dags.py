"""A streaming DAG for the stop/cancel tests (FLIP-45), shaped by environment variables.

JRS_STREAM_LANDING       landing folder the stream reads (required by the tests)
JRS_STREAM_APP_ARGS      JSON list of extra application args (e.g. ["--available-now"])
JRS_STREAM_STOP_TIMEOUT  stop_timeout of the submit task (default 120)
JRS_TEST_SPARK_CONF      JSON dict of Spark conf (event log dir for launch counting)
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

from airflow.sdk import DAG

from airflow_jrs.operators import JrsSparkSubmitOperator
from jrs_testbench.helpers import ROOT

STREAM_APP = str(ROOT / "tests" / "spark" / "apps" / "stream_app.py")

with DAG("jrs_stream", schedule=None, start_date=datetime(2013, 1, 1, tzinfo=UTC), catchup=False) as dag:
    JrsSparkSubmitOperator(
        task_id="stream",
        application=STREAM_APP,
        application_args=[
            "--input",
            os.environ.get("JRS_STREAM_LANDING", str(Path("/nonexistent"))),
            *json.loads(os.environ.get("JRS_STREAM_APP_ARGS", "[]")),
        ],
        conn_id="spark_local",
        conf=json.loads(os.environ.get("JRS_TEST_SPARK_CONF", "{}")),
        streaming=True,
        stop_timeout=float(os.environ.get("JRS_STREAM_STOP_TIMEOUT", "120")),
    )
