"""A batch job stopped through the one stop path, through Airflow (dag.test), real spark-submit.

``airflow-jrs stop`` on a running batch job: its supervisor terminates spark-submit (SIGTERM,
then SIGKILL after a grace period); the task records CANCELED naming who asked, and fails without
a retry (someone asked for it), even with retries left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_jrs.cli import main
from airflow_jrs.store import JobStatus
from airflow_jrs.store.heartbeats import Heartbeats

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

JOB = "jrs_tiny.submit.2013-01-01"
HERE = Path(__file__).parent


def test_cli_stop_of_a_running_batch_job_terminates_it_records_canceled_and_does_not_retry(
    jrs_env, monkeypatch, redis_url, redis_client, tmp_path
):
    monkeypatch.setenv("JRS_TEST_SPARK_CONF", json.dumps(jrs_env.spark_conf()))
    monkeypatch.setenv("JRS_TEST_APP_ARGS", json.dumps(["--sleep", "120"]))
    monkeypatch.setenv("JRS_TEST_RETRIES", "1")
    code = "from dag_runner import run_dag; import json; print('STATES=' + json.dumps(run_dag()))"
    log = tmp_path / "dag-run.log"
    beats = Heartbeats(redis_client, jrs_env.namespace)
    with open(log, "w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-c", code], cwd=HERE, stdout=sink, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ['PYTHONPATH']}"},
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while not ((b := beats.get(JOB)) is not None and b.running and b.child and jrs_env.launches() >= 1):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        assert main(["--redis-url", redis_url, "--namespace", jrs_env.namespace, "stop", JOB]) == 0
        proc.wait(timeout=180)
    finally:
        proc.kill()
    out = log.read_text(errors="replace")
    states = [line for line in out.splitlines() if line.startswith("STATES=")]
    assert states and json.loads(states[0][7:])["submit"] == "failed", out[-3000:]
    entry = jrs_env.store.get_entry(JOB)
    assert entry is not None and entry.result.status is JobStatus.CANCELED, out[-3000:]
    assert "stop requested by airflow-jrs stop" in entry.result.error
    assert beats.get(JOB).exit_code == 143, "spark-submit was not terminated with SIGTERM"
    assert jrs_env.launches() == 1, "the task retried a job someone asked to stop"
    assert redis_client.exists(jrs_env.store.keys.lease(JOB), jrs_env.store.keys.intent(JOB)) == 0
