"""JrsSparkSubmitOperator(streaming=True) through Airflow (dag.test), real spark-submit, real Redis.

SIGTERM of the task process stops the stream at a batch boundary (STOPPED, with its checkpoint),
the task never succeeds, the next run resumes without rewind and exactly once, and a finished
``Trigger.AvailableNow`` run is skipped on the next run of the same date.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from airflow_jrs.domain.paths import checkpoint_path, stream_output_path
from airflow_jrs.spark.control import batch_ids
from airflow_jrs.store import JobStatus
from jrs_testbench.streams import committed_rows, drop_id_files

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

JOB = "jrs_stream.stream.2013-01-01"
DAG_FILE = Path(__file__).parent / "dags" / "jrs_stream_dags.py"
RUNNER = f"""
import importlib.util, json
from datetime import UTC, datetime
spec = importlib.util.spec_from_file_location("jrs_stream_dags_run", {str(DAG_FILE)!r})
module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
dr = module.dag.test(logical_date=datetime(2013, 1, 1, tzinfo=UTC))
print("STATES=" + json.dumps({{ti.task_id: str(ti.state) for ti in dr.get_task_instances()}}))
"""


def run_stream_dag(
    tmp_path: Path, name: str, *, until=None, sig: int | None = None, then=None, timeout: float = 400
) -> dict:
    """Run the DAG in a child process; once ``until()`` holds, signal it (``sig``, default
    SIGTERM) or call ``then()`` instead. Returns task id -> state."""
    log = tmp_path / f"{name}.log"
    with open(log, "w") as sink:
        proc = subprocess.Popen([sys.executable, "-c", RUNNER], env=dict(os.environ), stdout=sink,
                                stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + timeout
        if until is not None:
            while not until():
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-4000:]
                time.sleep(0.2)
            if then is not None:
                then()
            else:
                proc.send_signal(sig or signal.SIGTERM)
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        proc.kill()
    out = log.read_text(errors="replace")
    line = [x for x in out.splitlines() if x.startswith("STATES=")]
    assert line, out[-4000:]
    return json.loads(line[0][7:])


def test_sigterm_stops_at_a_batch_boundary_and_the_next_runs_resume_then_skip(jrs_env, monkeypatch, tmp_path):
    landing = tmp_path / "landing"
    drop_id_files(landing, range(4), 10)
    monkeypatch.setenv("JRS_STREAM_LANDING", str(landing))
    monkeypatch.setenv("JRS_TEST_SPARK_CONF", json.dumps(jrs_env.spark_conf()))
    monkeypatch.setenv("JRS_STREAM_APP_ARGS", json.dumps(["--trigger", "1", "--row-sleep", "0.3"]))
    checkpoint = checkpoint_path(str(jrs_env.output_root), jrs_env.namespace, JOB)
    output = stream_output_path(str(jrs_env.output_root), jrs_env.namespace, JOB)

    def batch_in_flight() -> bool:
        commits, offsets = batch_ids(checkpoint, "commits"), batch_ids(checkpoint, "offsets")
        return len(commits) >= 1 and len(offsets) > len(commits)

    states = run_stream_dag(tmp_path, "sigterm", until=batch_in_flight)
    assert states["stream"] != "success"
    entry = jrs_env.store.get_entry(JOB)
    assert entry is not None and entry.result.status is JobStatus.STOPPED, entry
    stopped = entry.result
    assert stopped.checkpoint_location == checkpoint
    assert stopped.metrics["boundary"] is True
    assert batch_ids(checkpoint, "offsets") == batch_ids(checkpoint, "commits"), "a batch was interrupted"
    assert stopped.metrics["last_batch_id"] == batch_ids(checkpoint, "commits")[-1]
    assert jrs_env.store.client.exists(jrs_env.store.keys.lease(JOB)) == 0

    # The next run resumes from the checkpoint (AvailableNow: what is there, then finish).
    drop_id_files(landing, range(4, 6), 10)
    monkeypatch.setenv("JRS_STREAM_APP_ARGS", json.dumps(["--available-now"]))
    assert run_stream_dag(tmp_path, "resume") == {"stream": "success"}
    entry = jrs_env.store.get_entry(JOB)
    assert entry.result.status is JobStatus.SUCCEEDED and entry.result.checkpoint_location == checkpoint
    assert [h.result.status for h in jrs_env.store.get_history(JOB)] == [JobStatus.STOPPED]
    commits = batch_ids(checkpoint, "commits")
    assert commits == list(range(len(commits))) and commits[-1] > stopped.metrics["last_batch_id"]
    rows = Counter(committed_rows(output))
    assert sorted(rows) == list(range(60)) and set(rows.values()) == {1}

    launches = jrs_env.launches()
    assert run_stream_dag(tmp_path, "again") == {"stream": "success"}
    assert jrs_env.launches() == launches, "Spark ran again for a finished AvailableNow job"


def test_cli_cancel_during_a_stuck_stop_records_canceled_and_the_task_fails(jrs_env, redis_url, monkeypatch, tmp_path):
    from airflow_jrs.cli import main

    landing = tmp_path / "landing"
    drop_id_files(landing, range(1), 10)
    monkeypatch.setenv("JRS_STREAM_LANDING", str(landing))
    monkeypatch.setenv("JRS_TEST_SPARK_CONF", json.dumps(jrs_env.spark_conf()))
    monkeypatch.setenv("JRS_STREAM_APP_ARGS", json.dumps(["--trigger", "1", "--row-sleep", "30"]))
    checkpoint = checkpoint_path(str(jrs_env.output_root), jrs_env.namespace, JOB)
    cli = ["--redis-url", redis_url, "--namespace", jrs_env.namespace]

    def stop_then_cancel() -> None:
        assert main([*cli, "stop", JOB]) == 0  # waits for batch 0, which takes 300 s
        time.sleep(2)
        assert main([*cli, "cancel", JOB]) == 0

    states = run_stream_dag(
        tmp_path, "cli-cancel", until=lambda: len(batch_ids(checkpoint, "offsets")) == 1, then=stop_then_cancel
    )
    assert states["stream"] == "failed"
    entry = jrs_env.store.get_entry(JOB)
    assert entry is not None and entry.result.status is JobStatus.CANCELED, entry
    assert entry.result.checkpoint_location == checkpoint
    assert batch_ids(checkpoint, "commits") == [], "the canceled batch committed"
    assert jrs_env.store.client.exists(jrs_env.store.keys.lease(JOB)) == 0
    assert jrs_env.store.client.exists(jrs_env.store.keys.intent(JOB)) == 0
