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
from airflow_jrs.store.intents import Intent
from airflow_jrs.store.redis.intents import RedisIntentStore
from airflow_jrs.store.redis.leases import RedisJobLease
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


def threaded_rows(control: str, spark=None, jrs=None):
    """A function that runs its Spark work from a thread of its own, whose operations carry no tag
    (Connect tags are per thread). While ``control/mode`` says ``fifo``, that work is a query whose
    one task runs ``cat control/fifo``: a read no interrupt ends, so the task runs on after its job
    was cancelled until the test writes to the fifo (the "tasks outlive their job" of a task
    blocked in I/O, made deterministic). Otherwise a quick write of 2 rows. When ``control/watch``
    names ``<session id> <UI URL>``, the call first records in ``control/seen`` how many Spark
    tasks of that session still run on the server (its UI REST API)."""
    import threading
    import urllib.request

    ctl = Path(control)
    if (ctl / "watch").exists():  # before the call is counted: the test releases the fifo once it is
        session_id, ui = (ctl / "watch").read_text().split()
        with urllib.request.urlopen(f"{ui}/api/v1/applications", timeout=10) as resp:
            app = json.loads(resp.read())[0]["id"]
        with urllib.request.urlopen(f"{ui}/api/v1/applications/{app}/jobs", timeout=10) as resp:
            jobs = [j for j in json.loads(resp.read()) if any(f"_Session_{session_id}_" in t for t in j["jobTags"])]
        (ctl / "seen").write_text(str(sum(j["numActiveTasks"] + (j["status"] == "RUNNING") for j in jobs)))
    with (ctl / "calls").open("a") as fh:
        fh.write(f"{jrs.fence}\n")
    failed: list[BaseException] = []

    def work() -> None:
        try:
            if (ctl / "mode").read_text() == "fifo":
                spark.sql(
                    f"SELECT TRANSFORM(id) USING 'cat {ctl / 'fifo'}' AS (line string) FROM range(0, 1, 1, 1)"
                ).collect()
            spark.range(0, 2, 1, 1).write.mode("overwrite").parquet(f"{jrs.output}/data")
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=work, name="the function's own thread")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    with (ctl / "done").open("a") as fh:
        fh.write(f"{jrs.fence}\n")
    return {"rows": 2}


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def context(try_number: int = 1) -> dict[str, Any]:
    ti = SimpleNamespace(dag_id="d", task_id="t", try_number=try_number, map_index=-1, xcom_push=lambda **kw: None)
    return {"ti": ti, "run_id": "scheduled__2013-01-01", "data_interval_start": DAY, "logical_date": DAY}


def operator(
    control: Path, predecessor: str = "wait", retries: int = 1, python_callable: Any = slow_rows, **kwargs: Any
) -> JrsPySparkOperator:
    return JrsPySparkOperator(
        task_id="t", python_callable=python_callable, op_kwargs={"control": str(control)}, conn_id=CONN,
        outputs={"data": "data"}, retries=retries, predecessor=predecessor, **kwargs,
    )  # fmt: skip


#: A task process: runs the operator once, prints its payload.
TASK_PROCESS = """
import json, sys
sys.path.insert(0, sys.argv[1])
import test_connect_task as t
call = getattr(t, sys.argv[4]) if len(sys.argv) > 4 else t.slow_rows
payload = t.operator(sys.argv[2], python_callable=call).execute(t.context(int(sys.argv[3])))
print(json.dumps(payload, default=str), flush=True)
"""


def task_process(control: Path, try_number: int, call: str = "slow_rows") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-W", "ignore", "-c", TASK_PROCESS, str(HERE), str(control), str(try_number), call],
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
    return RedisIntentStore(env.store.client, env.namespace, "unused").get(JOB)


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


def assert_tasks_ended_before(server: SparkConnectServer, first_session: str, retry_session: str) -> None:
    """Every Spark *task* of the killed session ended (launch + duration, server times) before the
    retry's first job was submitted: a cancelled job ends before its tasks do."""
    retry_jobs = wait_until(lambda: server.jobs(retry_session), "the retry's Spark jobs in the UI")
    first_started = min(server_time(j["submissionTime"]) for j in retry_jobs).timestamp()
    app = server.application_id()
    tasks = [
        task
        for job in server.jobs(first_session)
        for stage in job["stageIds"]
        for task in server._rest(f"applications/{app}/stages/{stage}/0/taskList")
    ]
    assert tasks
    for task in tasks:
        ended = server_time(task["launchTime"]).timestamp() + task["duration"] / 1000
        assert ended <= first_started, f"a task of the killed session ended after the retry's first job: {task}"


def test_a_retry_interrupts_the_sigkilled_attempts_query_in_its_recorded_session_before_it_runs(
    connect_env: Any, connect_server: SparkConnectServer, control: Path
) -> None:
    # (each row sleeps through reflect, which swallows the interrupt: the orphan's tasks run on to
    # the end of their partition after the interrupt ended its job, and the retry waits for them)
    intent, tag = kill_mid_query(connect_env, connect_server, control, seconds=20)
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
    assert_tasks_ended_before(connect_server, intent.session_id, marker["session_id"])
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
    from airflow.providers.common.compat.sdk import AirflowFailException

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

    (control / "seconds").write_text("15")  # rows of 1 s: its tasks run on to the end of their partition
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


# -- work the function starts from its own threads, and tasks that outlive their job --


def blocking_fifo(control: Path) -> Path:
    """``threaded_rows`` in its blocking mode: its query's task reads this fifo until released."""
    fifo = control / "fifo"
    os.mkfifo(fifo)
    (control / "mode").write_text("fifo")
    return fifo


def release(fifo: Path) -> None:
    """Let ``cat`` read a line and end (nothing happens when no task reads the fifo any more)."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # ENXIO: no reader
        return
    try:
        os.write(fd, b"released\n")
    finally:
        os.close(fd)


def session_tasks(server: SparkConnectServer, session_id: str) -> int:
    """Spark tasks of the session still running on the server (its UI REST API), ended jobs included."""
    return sum(j["numActiveTasks"] + (j["status"] == "RUNNING") for j in server.jobs(session_id))


def reading(fifo: Path) -> bool:
    """Does the query's task read the fifo now (its ``cat``, a child of the server's task)?"""
    import psutil

    for proc in psutil.process_iter(["cmdline"]):
        if str(fifo) in (proc.info["cmdline"] or []):
            return True
    return False


def wait_untagged_query(env: Any, server: SparkConnectServer, alive: Any, fifo: Path) -> Intent:
    """The attempt's intent, once its function's thread runs its query on the server and the
    query's task reads the fifo; checks the premise: that query carries none of the attempt's
    tags (it ran from another thread)."""
    intent = wait_until(lambda: alive() and intent_of(env), "the attempt's intent")
    assert intent.session_id
    running = wait_until(lambda: alive() and server.running_jobs(intent.session_id), "the thread's query to run")
    tag = job_tag(env.namespace, JOB, intent.fence)
    assert not any(tag in t for j in running for t in j["jobTags"]), running  # untagged: a thread of its own
    wait_until(lambda: alive() and reading(fifo), "the query's task to read the fifo")
    return intent


class Output:
    """What the task logged so far (the fd-level capture, read as it grows)."""

    def __init__(self, capfd: pytest.CaptureFixture[str]) -> None:
        self.capfd, self.text = capfd, ""

    def has(self, needle: str) -> bool:
        out, err = self.capfd.readouterr()
        self.text += out + err
        return needle in self.text


WAITING = "still run on the server"  # the product's line: it waits for the cancelled job's tasks


@pytest.mark.parametrize("how", ["on_kill", "lost lease"])
def test_a_stopped_attempt_interrupts_its_functions_own_threads_and_ends_only_after_their_tasks(
    connect_env: Any, connect_server: SparkConnectServer, control: Path, capfd: pytest.CaptureFixture[str], how: str
) -> None:
    """On_kill and a lost lease interrupted the attempt's tag only, so the query the
    function ran from its own thread (no tag) ran on; and once interrupted, the attempt ended while
    the cancelled job's task still ran on the server. Now the whole session is interrupted, and
    execute returns (failure recorded, lease let go) only once the server shows none of its tasks."""
    import threading

    fifo = blocking_fifo(control)
    op = operator(control, predecessor="stop", python_callable=threaded_rows, lease_ttl=6)
    raised: list[BaseException] = []
    seen: dict[str, Any] = {}

    def execute() -> None:
        try:
            op.execute(context())
        except BaseException as exc:
            raised.append(exc)
        finally:  # the server's view at the moment execute returned
            seen["tasks at return"] = session_tasks(connect_server, seen["session"])

    runner = threading.Thread(target=execute, name="task")
    runner.start()
    log = Output(capfd)
    try:
        intent = wait_untagged_query(connect_env, connect_server, runner.is_alive, fifo)
        seen["session"] = intent.session_id
        if how == "on_kill":
            op.on_kill()
        else:  # a successor proved the holder dead and took the lease: the renewer finds it lost
            successor = RedisJobLease(connect_env.store.client, connect_env.namespace, JOB, ttl=60, owner={"test": how})
            holder = successor.peek()
            assert holder is not None and successor.take_over(holder) is not None
        wait_until(
            lambda: not connect_server.running_jobs(intent.session_id),
            "the query of the function's own thread to be interrupted", timeout=90,
        )  # fmt: skip
        assert session_tasks(connect_server, intent.session_id) > 0  # its job ended; its task reads the fifo
        wait_until(lambda: not runner.is_alive() or log.has(WAITING), "execute to end or to wait for the task")
        release(fifo)
        runner.join(timeout=120)
    finally:
        release(fifo)
        runner.join(timeout=60)
    assert not runner.is_alive() and raised, "execute did not fail"
    assert seen["tasks at return"] == 0, f"execute returned while the server still ran its tasks: {seen}"
    assert "SUCCEEDED" not in {j["status"] for j in connect_server.jobs(intent.session_id)}
    assert lines(control / "done") == [] and connect_env.store.get_entry(JOB) is None


def test_a_retry_interrupts_the_killed_functions_own_thread_and_starts_after_its_tasks_are_gone(
    connect_env: Any, connect_server: SparkConnectServer, control: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The successor's side: ``predecessor="stop"`` interrupted the killed
    attempt's tag (missing its function's own thread), and went ahead as soon as the server said
    the operation ended, while the cancelled job's task still ran. Observed on the server: the
    retry's function is called when no task of the killed session runs, and every task of it
    ended before the retry's first Spark job was submitted."""
    import threading

    fifo = blocking_fifo(control)
    first = task_process(control, try_number=1, call="threaded_rows")
    try:
        intent = wait_untagged_query(connect_env, connect_server, lambda: first.poll() is None, fifo)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
    assert connect_server.running_jobs(intent.session_id), "the server stopped the query when its client died"
    (control / "mode").write_text("quick")
    (control / "watch").write_text(f"{intent.session_id} {connect_server.ui_url}")
    done: list[Any] = []
    retry = threading.Thread(
        target=lambda: done.append(
            operator(control, predecessor="stop", python_callable=threaded_rows).execute(context(try_number=2))
        ),
        name="retry",
    )  # fmt: skip
    retry.start()
    log = Output(capfd)
    try:
        wait_until(
            lambda: not connect_server.running_jobs(intent.session_id),
            "the retry to interrupt the query of the killed function's own thread", timeout=90,
        )  # fmt: skip
        wait_until(
            lambda: len(lines(control / "calls")) == 2 or not retry.is_alive() or log.has(WAITING),
            "the retry to call the function or to wait for the killed attempt's task",
        )  # fmt: skip
        release(fifo)
        retry.join(timeout=180)
    finally:
        release(fifo)
        retry.join(timeout=60)
    assert done and done[0]["status"] == "SUCCEEDED" and done[0]["reused"] is False, (done, log.text[-3000:])
    assert (control / "seen").read_text() == "0", "the retry's function ran beside the killed attempt's task"
    marker = read_commit_marker(done[0]["outputs"]["data"].rsplit("/", 1)[0])
    assert marker is not None
    assert "SUCCEEDED" not in {j["status"] for j in connect_server.jobs(intent.session_id)}
    assert_tasks_ended_before(connect_server, intent.session_id, marker["session_id"])
