"""The local deployment's Spark defaults (``scripts/airflow_local.py``, the e2e tests' Airflow):
every spark-submit its workers start writes an event log. One real spark-submit: the spark tier.
Its ports and connections, with no process started: tests/unit/test_local_deployment.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from jrs_testbench.helpers import jrs_env


@pytest.mark.spark
def test_every_spark_submit_of_the_deployment_writes_an_event_log(tmp_path: Path):
    # A user's DAG sets no spark.eventLog.* conf (only the project's DAGs read
    # JRS_SPARK_EVENT_LOG_DIR): the deployment's environment turns event logs on for every
    # spark-submit its workers start, as the local-airflow how-to promises.
    events = tmp_path / "spark-events"
    env = {**os.environ, **jrs_env("redis://127.0.0.1:1/0", "local-test", data_dir=tmp_path, event_log_dir=events)}
    app = tmp_path / "users_app.py"
    app.write_text(
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.appName('users-app').getOrCreate()\n"
        "assert spark.range(3).count() == 3\n"
        "spark.stop()\n"
    )
    done = subprocess.run(
        ["spark-submit", "--master", "local[1]", "--conf", "spark.ui.enabled=false", str(app)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(list(events.iterdir())) == 1, "no event log: the deployment's Spark defaults were not applied"
