"""@task.jrs_pyspark / JrsPySparkOperator on a real Spark Connect server (the ``connect_server`` fixture).

What is counted, not mocked: the server's own views (its event log: sessions and their tagged
operations; its UI REST API: Spark jobs with their tags, status and times), the function's calls
and completions (lines it appends to files), the store's entries and the job's intent. A "task
process" is a child Python running the operator's ``execute`` with a task context, as Airflow's
task runner would; it is SIGKILLed while its query runs on the server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_jrs.launch.connect_launcher import job_tag
from airflow_jrs.operators.pyspark import JrsPySparkOperator
from airflow_jrs.spark.commit import read_commit_marker
from airflow_jrs.store.intent import Intent, IntentStore
from jrs_testbench.helpers import wait_until
from jrs_testbench.spark_connect import SparkConnectServer

pytestmark = [pytest.mark.airflow, pytest.mark.spark]

DAY = datetime(2013, 1, 1, tzinfo=UTC)
JOB = "d.t.2013-01-01"
HERE = Path(__file__).resolve().parent
CONN = "spark_connect_test"


def slow_rows(control: str, spark=None, jrs=None):
    """The tests' job: one write of ``2 * seconds`` rows in 2 partitions, each row sleeping a
    second on the server (``control/seconds`` says how many: not an argument, so the killed
    attempt and its retry have the same fingerprint). Appends its fence to ``control/calls``
    when called and to ``control/done`` when its write returned."""
    ctl = Path(control)
    with (ctl / "calls").open("a") as fh:
        fh.write(f"{jrs.fence}\n")
    seconds = int((ctl / "seconds").read_text())
    df = spark.range(0, 2 * seconds, 1, 2).selectExpr(
        "id", "reflect('java.lang.Thread', 'sleep', cast(1000 as bigint)) AS slept"
    )
    df.write.mode("overwrite").parquet(f"{jrs.output}/data")
    with (ctl / "done").open("a") as fh:
        fh.write(f"{jrs.fence}\n")
    return {"rows": 2 * seconds}


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def context(try_number: int = 1) -> dict[str, Any]:
    ti = SimpleNamespace(dag_id="d", task_id="t", try_number=try_number, map_index=-1, xcom_push=lambda **kw: None)
    return {"ti": ti, "run_id": "scheduled__2013-01-01", "data_interval_start": DAY, "logical_date": DAY}


def operator(control: Path, predecessor: str = "wait", retries: int = 1) -> JrsPySparkOperator:
    return JrsPySparkOperator(
        task_id="t", python_callable=slow_rows, op_kwargs={"control": str(control)}, conn_id=CONN,
        outputs={"data": "data"}, retries=retries, predecessor=predecessor,
    )  # fmt: skip


#: A task process: runs the operator once, prints its payload.
TASK_PROCESS = """
import json, sys
sys.path.insert(0, sys.argv[1])
import test_connect_task as t
payload = t.operator(sys.argv[2]).execute(t.context(int(sys.argv[3])))
print(json.dumps(payload, default=str), flush=True)
"""


def task_process(control: Path, try_number: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-W", "ignore", "-c", TASK_PROCESS, str(HERE), str(control), str(try_number)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def server_time(stamp: str) -> datetime:
    """A UI REST timestamp (``2026-11-24T03:25:01.123GMT``)."""
    return datetime.strptime(stamp.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z")


@pytest.fixture
def control(tmp_path: Path) -> Path:
    folder = tmp_path / "control"
    folder.mkdir()
    return folder


@pytest.fixture
def connect_env(jrs_env: Any, connect_server: SparkConnectServer, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The ``spark_connect_test`` connection (conn type of the Spark provider) on the test server."""
    conn = {"conn_type": "spark_connect", "host": "127.0.0.1", "port": connect_server.port}
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN.upper()}", json.dumps(conn))
    return jrs_env


def intent_of(env: Any) -> Intent | None:
    return IntentStore(env.store.client, env.namespace, "unused").get(JOB)


def kill_mid_query(env: Any, server: SparkConnectServer, control: Path, seconds: int) -> tuple[Intent, str]:
    """Start a task process whose query runs ``seconds`` per partition, SIGKILL it once the server
    runs the query's Spark jobs; returns its intent and the tag of its operations."""
    (control / "seconds").write_text(str(seconds))
    first = task_process(control, try_number=1)
    try:
        intent = wait_until(lambda: first.poll() is None and intent_of(env), "the first attempt's intent")
        assert intent.session_id, f"the intent records no Spark Connect session: {intent}"
        tag = job_tag(env.namespace, JOB, intent.fence)

        def running() -> bool:
            assert first.poll() is None, first.communicate()[1][-3000:]
            return bool(server.running_jobs(intent.session_id, tag))

        wait_until(running, "the first attempt's tagged query to run on the server")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
    # the intent carries the session the server runs the attempt's tagged operations in
    assert intent_of(env) == intent
    ops = server.operations(intent.session_id)
    assert ops and all(tag in op["tags"] for op in ops), ops
    assert server.running_jobs(intent.session_id, tag), "the server stopped the query when its client died"
    return intent, tag


def assert_one_after_the_other(server: SparkConnectServer, first_session: str, tag: str, retry_session: str) -> float:
    """Every Spark job of the killed attempt ended before the retry's first one started (server
    times); returns the gap in seconds."""
    retry_jobs = wait_until(lambda: server.jobs(retry_session), "the retry's Spark jobs in the UI")
    first_jobs = server.jobs(first_session, tag)
    assert first_jobs and all(j["status"] != "RUNNING" and "completionTime" in j for j in first_jobs), first_jobs
    ended = max(server_time(j["completionTime"]) for j in first_jobs)
    started = min(server_time(j["submissionTime"]) for j in retry_jobs)
    assert ended <= started, f"the retry started {started} before the killed attempt's work ended {ended}"
    return (started - ended).total_seconds()


def test_a_retry_interrupts_the_sigkilled_attempts_query_in_its_recorded_session_before_it_runs(
    connect_env: Any, connect_server: SparkConnectServer, control: Path
) -> None:
    intent, tag = kill_mid_query(connect_env, connect_server, control, seconds=60)
    (control / "seconds").write_text("1")
    began = time.monotonic()
    payload = operator(control, predecessor="stop").execute(context(try_number=2))
    took = time.monotonic() - began
    assert payload["status"] == "SUCCEEDED" and payload["reused"] is False and payload["metrics"] == {"rows": 2}
    killed_fence, retry_fence = (int(f) for f in lines(control / "calls"))
    assert killed_fence == int(intent.fence) and lines(control / "done") == [str(retry_fence)]
    marker = read_commit_marker(payload["outputs"]["data"].rsplit("/", 1)[0])
    assert marker is not None and marker["session_id"] != intent.session_id
    gap = assert_one_after_the_other(connect_server, intent.session_id, tag, marker["session_id"])
    statuses = {j["status"] for j in connect_server.jobs(intent.session_id, tag)}
    assert "SUCCEEDED" not in statuses, statuses  # interrupted, not finished
    assert intent_of(connect_env) is None  # the result's write dropped it
    print(f"\nretry with predecessor=stop: {took:.1f}s in all; the orphan's work ended {gap:.2f}s before the retry's")


def test_a_retry_waits_for_the_sigkilled_attempts_query_then_computes_as_it_never_committed(
    connect_env: Any, connect_server: SparkConnectServer, control: Path
) -> None:
    intent, tag = kill_mid_query(connect_env, connect_server, control, seconds=4)
    (control / "seconds").write_text("1")
    payload = operator(control, predecessor="wait").execute(context(try_number=2))
    assert payload["status"] == "SUCCEEDED" and payload["reused"] is False
    _, retry_fence = (int(f) for f in lines(control / "calls"))
    assert lines(control / "done") == [str(retry_fence)]  # the killed attempt never reached its marker
    marker = read_commit_marker(payload["outputs"]["data"].rsplit("/", 1)[0])
    assert marker is not None
    gap = assert_one_after_the_other(connect_server, intent.session_id, tag, marker["session_id"])
    assert {j["status"] for j in connect_server.jobs(intent.session_id, tag)} == {"SUCCEEDED"}  # ran to its end
    print(f"\nretry with predecessor=wait: the orphan's work ended {gap:.2f}s before the retry's")


def test_a_committed_job_opens_no_session_on_the_server(
    connect_env: Any, connect_server: SparkConnectServer, control: Path
) -> None:
    (control / "seconds").write_text("0")
    payload = operator(control).execute(context())
    assert payload["reused"] is False
    assert os.environ.get("SPARK_CONNECT_MODE_ENABLED") is None  # the launcher's builder leaves no trace
    marker = read_commit_marker(payload["outputs"]["data"].rsplit("/", 1)[0])
    assert marker is not None and marker["session_id"] in connect_server.sessions()
    tag = job_tag(connect_env.namespace, JOB, marker["fence"])
    ops = connect_server.operations(marker["session_id"])
    assert ops and all(tag in op["tags"] for op in ops), ops  # every operation of the attempt is tagged

    quiet = connect_server.barrier()
    before = connect_server.activity(exclude_sessions=[quiet])
    # a whole task process, exit included: an unused Connect client would open its session at exit
    second = task_process(control, try_number=1)
    out, err = second.communicate(timeout=300)
    assert second.returncode == 0, err[-3000:]
    assert json.loads(out.strip().splitlines()[-1])["reused"] is True
    after = connect_server.activity(exclude_sessions=[quiet, connect_server.barrier()])
    assert after == before, f"the skipped task did something on the server: {before} -> {after}"
    assert lines(control / "calls") == [str(marker["fence"])]  # the function was called once


def test_a_spark_connect_url_naming_a_session_is_refused_before_anything_runs(
    connect_env: Any, connect_server: SparkConnectServer, control: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    (control / "seconds").write_text("0")
    op = operator(control)
    op.config_kwargs = {"spark.remote": connect_server.remote("5f0c2a9e-1111-4222-8333-444455556666")}
    with pytest.raises(AirflowFailException, match="names a session_id"):  # a JrsConfigError: no retry
        op.execute(context())
    assert lines(control / "calls") == []


def test_on_kill_interrupts_the_attempts_query_and_releases_its_session(
    connect_env: Any, connect_server: SparkConnectServer, control: Path
) -> None:
    """``on_kill`` (and a lost lease, through the same ``stop``) ends the attempt's work on the
    server at once, and its session with it: no SUCCEEDED result, no operation left running."""
    import threading

    from airflow_jrs.launch.connect_launcher import session_running, session_url

    (control / "seconds").write_text("60")
    op = operator(control, predecessor="stop")
    raised: list[BaseException] = []

    def execute() -> None:
        try:
            op.execute(context())
        except BaseException as exc:
            raised.append(exc)

    runner = threading.Thread(target=execute, name="task")
    runner.start()
    try:
        intent = wait_until(lambda: intent_of(connect_env), "the attempt's intent")
        tag = job_tag(connect_env.namespace, JOB, intent.fence)
        wait_until(lambda: connect_server.running_jobs(intent.session_id, tag), "the tagged query on the server")
        began = time.monotonic()
        op.on_kill()
        wait_until(lambda: not connect_server.running_jobs(intent.session_id, tag), "the query to end")
        latency = time.monotonic() - began
        runner.join(timeout=120)
    finally:
        if runner.is_alive():
            with_session = session_url(connect_server.url, intent.session_id)
            from pyspark.sql.connect.client import SparkConnectClient

            SparkConnectClient(connection=with_session).interrupt_all()
    assert not runner.is_alive() and raised, "execute did not fail after on_kill"
    assert "SUCCEEDED" not in {j["status"] for j in connect_server.jobs(intent.session_id, tag)}
    assert not session_running(session_url(connect_server.url, intent.session_id))  # released: SESSION_CLOSED
    assert lines(control / "done") == [] and connect_env.store.get_entry(JOB) is None
    print(f"\non_kill -> no running Spark job of the attempt's tag: {latency:.2f}s ({type(raised[0]).__name__})")


#: A task process whose SIGTERM handler calls ``on_kill`` on the executing (main) thread, as
#: Airflow's task runner does: the handler runs while that thread waits in the query's gRPC stream.
SIGTERM_TASK = """
import signal, sys
sys.path.insert(0, sys.argv[1])
import test_connect_task as t
op = t.operator(sys.argv[2])
signal.signal(signal.SIGTERM, lambda *_: op.on_kill())
try:
    op.execute(t.context(1))
except BaseException as exc:
    print("RAISED", type(exc).__name__, flush=True)
    sys.exit(3)
print("SUCCEEDED", flush=True)
"""


def test_on_kill_from_a_sigterm_handler_on_the_querying_thread_ends_the_query(
    connect_env: Any, connect_server: SparkConnectServer, control: Path
) -> None:
    (control / "seconds").write_text("60")
    task = subprocess.Popen(
        [sys.executable, "-W", "ignore", "-c", SIGTERM_TASK, str(HERE), str(control)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        intent = wait_until(lambda: task.poll() is None and intent_of(connect_env), "the attempt's intent")
        tag = job_tag(connect_env.namespace, JOB, intent.fence)

        def running() -> bool:
            assert task.poll() is None, task.communicate()[1][-3000:]
            return bool(connect_server.running_jobs(intent.session_id, tag))

        wait_until(running, "the tagged query on the server")
        task.send_signal(signal.SIGTERM)
        out, err = task.communicate(timeout=120)
    finally:
        if task.poll() is None:
            task.kill()
    assert task.returncode == 3 and "RAISED" in out, (out, err[-3000:])
    wait_until(lambda: not connect_server.running_jobs(intent.session_id, tag), "the query to end")
    assert "SUCCEEDED" not in {j["status"] for j in connect_server.jobs(intent.session_id, tag)}
    assert lines(control / "done") == [] and connect_env.store.get_entry(JOB) is None
