"""A batch job stopped through the one stop path, through Airflow (dag.test), real spark-submit.

``airflow-jrs stop`` on a running batch job: its supervisor terminates spark-submit (SIGTERM,
then SIGKILL after a grace period); the task records CANCELED naming who asked, and fails without
a retry (someone asked for it), even with retries left. A cancel that comes after the application
wrote its commit marker (Spark still shutting down) came too late: the output is complete, so the
task records it SUCCEEDED and succeeds, although spark-submit was terminated.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from airflow_jrs.cli import main
from airflow_jrs.spark.commit import MARKER_NAME, read_commit_marker
from airflow_jrs.store import JobStatus
from airflow_jrs.store.redis.heartbeats import RedisHeartbeats

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

JOB = "jrs_tiny.submit.2013-01-01"
HERE = Path(__file__).parent


def ask_while_it_runs(
    jrs_env: Any, redis_client: Any, redis_url: str, tmp_path: Path, kind: str, ready: Callable[[], bool]
) -> tuple[dict[str, Any], str]:
    """dag.test() the tiny DAG in a process of its own; once spark-submit runs under its supervisor
    and ``ready()``, ``airflow-jrs <kind> JOB``. The task states and the run's output."""
    code = "from dag_runner import run_dag; import json; print('STATES=' + json.dumps(run_dag()))"
    log = tmp_path / "dag-run.log"
    beats = RedisHeartbeats(redis_client, jrs_env.namespace)
    with open(log, "w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-c", code], cwd=HERE, stdout=sink, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ['PYTHONPATH']}"},
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while not ((b := beats.get(JOB)) is not None and b.running and b.child and jrs_env.launches() >= 1
                   and ready()):  # fmt: skip
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        assert main(["--redis-url", redis_url, "--namespace", jrs_env.namespace, kind, JOB]) == 0
        proc.wait(timeout=180)
    finally:
        proc.kill()
    out = log.read_text(errors="replace")
    states = [line for line in out.splitlines() if line.startswith("STATES=")]
    assert states, out[-3000:]
    return json.loads(states[0][7:]), out


def test_cli_stop_of_a_running_batch_job_terminates_it_records_canceled_and_does_not_retry(
    jrs_env, monkeypatch, redis_url, redis_client, tmp_path
):
    monkeypatch.setenv("JRS_TEST_SPARK_CONF", json.dumps(jrs_env.spark_conf()))
    monkeypatch.setenv("JRS_TEST_APP_ARGS", json.dumps(["--sleep", "120"]))
    monkeypatch.setenv("JRS_TEST_RETRIES", "1")
    beats = RedisHeartbeats(redis_client, jrs_env.namespace)
    states, out = ask_while_it_runs(jrs_env, redis_client, redis_url, tmp_path, "stop", lambda: True)
    assert states["submit"] == "failed", out[-3000:]
    entry = jrs_env.store.get_entry(JOB)
    assert entry is not None and entry.result.status is JobStatus.CANCELED, out[-3000:]
    assert "stop requested by airflow-jrs stop" in entry.result.error
    assert beats.get(JOB).exit_code == 143, "spark-submit was not terminated with SIGTERM"
    assert jrs_env.launches() == 1, "the task retried a job someone asked to stop"
    assert redis_client.exists(jrs_env.store.keys.lease(JOB), jrs_env.store.keys.intent(JOB)) == 0


def end_lingering_drivers(output_root: Path) -> None:
    """End the application's Python: in local mode it is the JVM's child and outlives a terminated
    spark-submit until it next calls the JVM (here: after ``--linger``). Nothing of a test stays."""
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if any(str(output_root) in part for part in proc.info["cmdline"] or []):
                proc.kill()


def test_a_cancel_after_the_commit_marker_keeps_the_output_as_succeeded(
    jrs_env, monkeypatch, redis_url, redis_client, tmp_path
):
    # The application wrote its data and its marker, then lingers before spark.stop() (Spark
    # shutting down): a cancel now ends spark-submit (143), and the output must not be thrown away.
    monkeypatch.setenv("JRS_TEST_SPARK_CONF", json.dumps(jrs_env.spark_conf()))
    monkeypatch.setenv("JRS_TEST_APP_ARGS", json.dumps(["--linger", "120"]))
    monkeypatch.setenv("JRS_TEST_RETRIES", "1")
    markers = lambda: list(jrs_env.output_root.rglob(MARKER_NAME))  # noqa: E731
    try:
        states, out = ask_while_it_runs(jrs_env, redis_client, redis_url, tmp_path, "cancel", lambda: bool(markers()))
    finally:
        end_lingering_drivers(jrs_env.output_root)
    ended = RedisHeartbeats(redis_client, jrs_env.namespace).get(JOB).exit_code
    assert ended in (128 + signal.SIGTERM, 128 + signal.SIGKILL), f"the cancel did not end spark-submit ({ended})"
    assert states["submit"] == "success", out[-3000:]
    (marker,) = markers()
    entry = jrs_env.store.get_full_entry(JOB)
    assert entry is not None and entry.result.status is JobStatus.SUCCEEDED, out[-3000:]
    assert entry.result.outputs["output"] == str(marker.parent)
    assert entry.result.metrics == read_commit_marker(str(marker.parent))["metrics"] == {"rows": 10}
    assert "came after the application wrote this attempt's commit marker" in out
    assert jrs_env.launches() == 1, "the finished output was computed again"
    assert redis_client.exists(jrs_env.store.keys.lease(JOB), jrs_env.store.keys.intent(JOB)) == 0
