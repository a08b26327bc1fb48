"""JrsSparkSubmitOperator and JrsCleanupOperator through Airflow (dag.test), real spark-submit, real Redis.

"Spark did not run" is proven by counting Spark event logs: one file per launched application.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from dag_runner import run_dag

from airflow_jrs.domain.paths import fence_token_of
from airflow_jrs.store import JobStatus

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

JOB = "jrs_tiny.submit.2013-01-01"


@pytest.fixture
def env(jrs_env, monkeypatch):
    monkeypatch.setenv("JRS_TEST_SPARK_CONF", json.dumps(jrs_env.spark_conf()))
    for name in ("JRS_TEST_APP_ARGS", "JRS_TEST_JOB_VERSION", "JRS_TEST_RETRIES", "JRS_TEST_EXEC_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    return jrs_env


def test_first_run_computes_cleanup_commits_and_second_run_starts_no_spark(env):
    states = run_dag()
    assert states == {"submit": "success", "cleanup": "success"}
    assert env.launches() == 1
    entry = env.store.get_entry(JOB)
    assert entry is not None and entry.is_clean
    result = entry.result
    assert result.status is JobStatus.SUCCEEDED
    assert result.application_id and result.application_id.startswith("local-")
    assert result.metrics == {"rows": 10}
    assert result.attempt is not None and result.attempt.dag_id == "jrs_tiny"
    out = result.outputs["output"]
    # the attempt's own folder: fence-<token>-<owner nonce>, the token being the result's fence
    folder = Path(out)
    assert folder.parent == env.output_root / env.namespace / JOB
    assert re.fullmatch(r"fence-\d+-[0-9a-f]{16}", folder.name) and fence_token_of(folder.name) == result.fence
    assert (folder / "data").is_dir()
    assert env.store.client.exists(env.store.keys.intent(JOB)) == 0

    states = run_dag()  # a second run of the same date: same job
    assert states == {"submit": "success", "cleanup": "success"}
    assert env.launches() == 1, "Spark ran again for a committed job"
    assert env.store.get_entry(JOB).result == result


def test_changed_job_version_recomputes_and_keeps_the_old_result_in_history(env, monkeypatch):
    assert run_dag()["submit"] == "success"
    first = env.store.get_entry(JOB).result
    monkeypatch.setenv("JRS_TEST_JOB_VERSION", "2")
    assert run_dag() == {"submit": "success", "cleanup": "success"}
    assert env.launches() == 2
    second = env.store.get_entry(JOB).result
    assert second.fingerprint != first.fingerprint and second.fence > first.fence
    assert [e.result.fingerprint for e in env.store.get_history(JOB)] == [first.fingerprint]
    # cleanup removed the first attempt's staging: only the winner's is left
    job_dir = env.output_root / env.namespace / JOB
    assert [fence_token_of(p.name) for p in job_dir.iterdir()] == [second.fence]


def test_failed_spark_job_records_nothing_that_skips_and_the_next_run_computes(env, monkeypatch):
    monkeypatch.setenv("JRS_TEST_APP_ARGS", json.dumps(["--fail"]))
    states = run_dag()
    assert states["submit"] == "failed"
    assert env.launches() == 1
    entry = env.store.get_entry(JOB)
    # last try: a FAILED result is recorded (sensors fail fast) -- never a reason to skip
    assert entry is not None and entry.result.status is JobStatus.FAILED
    assert env.store.client.exists(env.store.keys.intent(JOB)) == 0
    assert env.store.client.exists(env.store.keys.lease(JOB)) == 0

    monkeypatch.delenv("JRS_TEST_APP_ARGS")
    assert run_dag() == {"submit": "success", "cleanup": "success"}
    assert env.launches() == 2
    assert env.store.get_entry(JOB).result.status is JobStatus.SUCCEEDED
    assert [e.result.status for e in env.store.get_history(JOB)] == [JobStatus.FAILED]


def test_failed_result_names_the_exit_code_the_application_and_its_exception(env, monkeypatch, capfd):
    message = "jrs-probe: input partition 2013-01-01 is empty"
    monkeypatch.setenv("JRS_TEST_APP_ARGS", json.dumps(["--raise", message]))
    assert run_dag()["submit"] == "failed"
    result = env.store.get_entry(JOB).result
    assert result.status is JobStatus.FAILED
    error = result.error or ""
    assert error.startswith("spark-submit exited with code 1")
    assert result.application_id and result.application_id.startswith("local-")  # from the event log line
    assert f"application {result.application_id}" in error
    assert f"ValueError: {message}" in error and "Traceback" not in error.splitlines()[0]
    assert len(error) <= 4096 + 300 and len(error.splitlines()) <= 21
    assert " INFO " not in error  # Spark's shutdown chatter does not push the exception out
    out, err = capfd.readouterr()  # the task log: the summary, with the exception, in one record
    assert any("exited with code 1" in line and "last lines of its output" in line for line in (out + err).splitlines())
    assert f"ValueError: {message}" in out + err


def test_failed_try_with_retries_left_records_no_result_and_the_retry_computes(env, monkeypatch, tmp_path):
    monkeypatch.setenv("JRS_TEST_APP_ARGS", json.dumps(["--fail-once", str(tmp_path / "failed-once")]))
    monkeypatch.setenv("JRS_TEST_RETRIES", "1")
    states = run_dag()
    if states["submit"] == "up_for_retry":  # dag.test left the retry to the next run of the date
        assert env.launches() == 1
        assert env.store.get_entry(JOB) is None, "a try with retries left recorded a result"
        assert env.store.client.exists(env.store.keys.intent(JOB)) == 0
        states = run_dag()
    assert states == {"submit": "success", "cleanup": "success"}
    assert env.launches() == 2  # the failed try and the retry; nothing skipped the retry
    entry = env.store.get_entry(JOB)
    assert entry is not None and entry.is_clean and entry.result.status is JobStatus.SUCCEEDED
    assert env.store.get_history(JOB) == []  # no FAILED result was recorded before the last try


def test_execution_timeout_kills_spark_and_records_nothing(env, monkeypatch):
    monkeypatch.setenv("JRS_TEST_APP_ARGS", json.dumps(["--sleep", "120"]))
    monkeypatch.setenv("JRS_TEST_EXEC_TIMEOUT", "25")
    states = run_dag()
    assert states["submit"] == "failed"
    assert env.store.get_entry(JOB) is None, "a killed attempt wrote a result"
    assert env.store.client.exists(env.store.keys.lease(JOB)) == 0


def test_sigterm_while_spark_runs_kills_it_and_the_task_never_succeeds(env, monkeypatch, redis_client, tmp_path):
    """apache/airflow#73006: on_kill runs on SIGTERM and execute() continues; it must not succeed."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    monkeypatch.setenv("JRS_TEST_APP_ARGS", json.dumps(["--sleep", "120"]))
    code = "from dag_runner import run_dag; import json; print('STATES=' + json.dumps(run_dag()))"
    log = tmp_path / "dag-run.log"  # a file, not a pipe: nobody reads while we poll, a pipe could fill up
    with open(log, "w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=Path(__file__).parent,
            env={**os.environ, "PYTHONPATH": f"{Path(__file__).parent}{os.pathsep}{os.environ['PYTHONPATH']}"},
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        deadline = time.monotonic() + 120
        while not (redis_client.exists(env.store.keys.intent(JOB)) and env.launches() >= 1):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        time.sleep(2)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        proc.kill()
    out = log.read_text(errors="replace")
    states_line = [line for line in out.splitlines() if line.startswith("STATES=")]
    assert states_line, out[-3000:]
    assert json.loads(states_line[0][7:])["submit"] != "success"
    assert env.store.get_entry(JOB) is None, "a killed attempt wrote a result"
    assert redis_client.exists(env.store.keys.lease(JOB)) == 0, "on_kill did not revoke the lease"
    from airflow_jrs.protocol.processes import find_job_processes as find_spark_submit_processes

    survivors = [(p.pid, p.ppid(), p.cmdline()[:3]) for p in find_spark_submit_processes(env.namespace, JOB)]
    assert survivors == [], out[-6000:]
