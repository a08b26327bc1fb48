"""Sensor DAG for the Airflow tests, shaped by environment variables set before each run
(dag.test parses DAG files from the bundles, see jrs_test_dags.py). No Spark: results are
written straight into the store by the tests.

JRS_SENSOR_JOB_IDS        JSON list of job ids (default ["upstream.job.2013-01-01"])
JRS_SENSOR_MODE           "poke" (default) or "reschedule"
JRS_SENSOR_DEFERRABLE     "1" waits in JobResultTrigger
JRS_SENSOR_TARGET_STATE   "any" (default), "dirty" or "clean"
JRS_SENSOR_TIMEOUT        sensor timeout in seconds (default 60)
JRS_SENSOR_POKE_INTERVAL  seconds between pokes (default 0.2)
JRS_SENSOR_TRIGGER_POLL   the trigger's safety re-read interval (default 300: wake-ups must
                          come from the store's notifications)
JRS_SENSOR_SOFT_FAIL      "1" skips instead of failing
JRS_SENSOR_OUT            file the downstream task writes the sensor's XCom into (JSON)
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG

from airflow_jrs.sensors import JobResultSensor


def record(results: Any, path: str) -> None:
    if path:
        Path(path).write_text(json.dumps(results))


with DAG("jrs_sensor", schedule=None, start_date=datetime(2013, 1, 1, tzinfo=UTC), catchup=False) as dag:
    wait = JobResultSensor(
        task_id="wait",
        job_ids=json.loads(os.environ.get("JRS_SENSOR_JOB_IDS", '["upstream.job.2013-01-01"]')),
        mode=os.environ.get("JRS_SENSOR_MODE", "poke"),
        deferrable=os.environ.get("JRS_SENSOR_DEFERRABLE") == "1",
        target_state=os.environ.get("JRS_SENSOR_TARGET_STATE", "any"),
        timeout=float(os.environ.get("JRS_SENSOR_TIMEOUT", "60")),
        poke_interval=float(os.environ.get("JRS_SENSOR_POKE_INTERVAL", "0.2")),
        trigger_poll_interval=float(os.environ.get("JRS_SENSOR_TRIGGER_POLL", "300")),
        soft_fail=os.environ.get("JRS_SENSOR_SOFT_FAIL") == "1",
        retries=0,
    )
    PythonOperator(
        task_id="consume",
        python_callable=record,
        op_kwargs={"results": wait.output, "path": os.environ.get("JRS_SENSOR_OUT", "")},
    )
