"""What the Spark Connect launcher will rely on, proved on a real Spark Connect server.

* Tags: ``spark.addTag(tag)`` tags every operation the session starts afterwards;
  ``interruptTag(tag)`` interrupts them, but only from a client of the SAME session (the same
  ``session_id``, any process): a different session's ``interruptTag`` finds nothing.
* Orphans: the server keeps executing an operation after its client process was SIGKILLed; a new
  client that reattaches to the session id (``sc://host:port/;session_id=<uuid>``) can interrupt
  the tagged operations, or wait until the session has no running operation.
* Counting on the server: the event log lists the sessions the server opened and the operations
  they started (with their tags); the UI REST API lists a tagged operation's Spark jobs and their
  status. A client object that is created and never used opens no session.

The client whose death is simulated runs in a child process (``CLIENT``); the test process is the
successor. Every wait has a deadline; nothing depends on how fast the machine is.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from jrs_testbench.helpers import wait_until
from jrs_testbench.spark_connect import SparkConnectServer

pytestmark = pytest.mark.spark

#: A client that tags its session and runs one slow query (2 partitions, ``seconds`` rows each,
#: one second per row, no Python worker on the server): argv = url, tag, seconds.
CLIENT = """
import os, sys
from pyspark.sql import SparkSession
url, tag, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3])
spark = SparkSession.builder.remote(url).create()
spark.addTag(tag)
print("session", spark.session_id, flush=True)
try:
    spark.range(0, 2 * seconds, 1, 2).selectExpr(
        "reflect('java.lang.Thread', 'sleep', cast(1000 as bigint)) AS slept"
    ).collect()
    print("finished", flush=True)
except Exception as exc:
    print("failed", getattr(exc, "getCondition", lambda: None)(), str(exc)[:300], flush=True)
os._exit(0)  # no atexit cleanup RPC: it would outlive the point of the test
"""


@contextmanager
def session(url: str) -> Iterator[Any]:
    """A Connect session on ``url``; stopped after (which RELEASES it on the server)."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(url).create()
    try:
        yield spark
    finally:
        spark.stop()


@contextmanager
def detached(url: str) -> Iterator[Any]:
    """A Connect session on ``url`` left alive on the server: the channel is closed, the session
    not released (``stop()`` would release it, which itself ends its operations)."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(url).create()
    try:
        yield spark
    finally:
        spark.client.close()  # also disarms the client's atexit ML-cache RPC


class Client:
    """The child process of ``CLIENT`` on a session of our choosing."""

    def __init__(self, server: SparkConnectServer, tag: str, seconds: int) -> None:
        self.server = server
        self.tag = tag
        self.session_id = str(uuid.uuid4())
        self.proc = subprocess.Popen(
            [sys.executable, "-W", "ignore", "-c", CLIENT, server.remote(self.session_id), tag, str(seconds)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    def running(self) -> list[dict[str, Any]]:
        return self.server.running_jobs(self.session_id, self.tag)

    def wait_running(self) -> None:
        def started() -> bool:
            if self.proc.poll() is not None:
                pytest.fail(f"client exited ({self.proc.returncode}) before its query ran: {self.proc.stdout.read()}")  # type: ignore[union-attr]
            return bool(self.running())

        wait_until(started, "the client's tagged query to run on the server")

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def output(self) -> str:
        out, _ = self.proc.communicate(timeout=120)
        return out

    def statuses(self) -> list[str]:
        return [j["status"] for j in self.server.jobs(self.session_id, self.tag)]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill()


@pytest.fixture
def clients(connect_server: SparkConnectServer) -> Iterator[Callable[[str, int], Client]]:
    """Start ``CLIENT`` children; each is killed and its session's operations interrupted after."""
    started: list[Client] = []

    def start(tag: str, seconds: int) -> Client:
        client = Client(connect_server, tag, seconds)
        started.append(client)
        return client

    yield start
    for client in started:
        client.close()
        if client.running():
            with session(connect_server.remote(client.session_id)) as spark:
                spark.interruptAll()


def operation_states(spark: Any) -> dict[str, str]:
    """The session's operations and their states, from the server (GetStatus RPC).

    pyspark 4.3 exposes it only as the client's private ``_get_operation_statuses()``."""
    from pyspark.sql.connect.proto import base_pb2

    names = base_pb2.GetStatusResponse.OperationStatus.OperationState
    resp = spark.client._get_operation_statuses()
    return {s.operation_id: names.Name(s.state) for s in resp.operation_statuses}


def test_interrupt_tag_from_another_process_on_the_same_session_interrupts_the_tagged_query(
    connect_server: SparkConnectServer, clients: Callable[[str, int], Client]
) -> None:
    client = clients("jrs-job-a-fence-7", 60)
    client.wait_running()
    with detached(connect_server.remote(client.session_id)) as spark:
        assert spark.session_id == client.session_id
        began = time.monotonic()
        interrupted = spark.interruptTag(client.tag)
        wait_until(lambda: not client.running(), "the interrupted query's Spark jobs to end")
        latency = time.monotonic() - began
    print(f"\ninterruptTag -> no running Spark job of the tag: {latency:.3f}s")
    tagged_ops = {o["operation_id"] for o in connect_server.operations(client.session_id) if client.tag in o["tags"]}
    assert set(interrupted) == tagged_ops and len(tagged_ops) == 1
    assert "OPERATION_CANCELED" in client.output()
    assert client.statuses() and "SUCCEEDED" not in client.statuses()


def test_interrupt_tag_from_a_different_session_does_not_reach_the_query(
    connect_server: SparkConnectServer, clients: Callable[[str, int], Client]
) -> None:
    client = clients("jrs-job-b-fence-3", 60)
    client.wait_running()
    with session(connect_server.url) as other:
        assert other.session_id != client.session_id
        assert other.interruptTag(client.tag) == []
        assert other.interruptAll() == []
    # still running: the interrupt above went to the other session only
    assert client.running() and client.proc.poll() is None


def test_the_server_keeps_running_a_sigkilled_clients_query_until_a_reattached_client_interrupts_it(
    connect_server: SparkConnectServer, clients: Callable[[str, int], Client]
) -> None:
    client = clients("jrs-job-c-fence-9", 60)
    client.wait_running()
    client.kill()
    assert client.proc.returncode == -signal.SIGKILL
    with detached(connect_server.remote(client.session_id)) as spark:
        states = operation_states(spark)
        assert list(states.values()) == ["OPERATION_STATE_RUNNING"], states
        assert client.running(), "the server stopped the query when its client died"
        began = time.monotonic()
        assert spark.interruptTag(client.tag) == list(states)
        wait_until(lambda: not client.running(), "the orphan's Spark jobs to end")
        latency = time.monotonic() - began
        # the operation's state settles a little after its Spark jobs ended (not one atomic step)
        cancelled = {op: "OPERATION_STATE_CANCELLED" for op in states}
        wait_until(lambda: operation_states(spark) == cancelled, "the orphan's operation state CANCELLED")
    print(f"\norphan interruptTag -> no running Spark job of the tag: {latency:.3f}s")
    assert "SUCCEEDED" not in client.statuses()


def test_a_reattached_client_waits_for_a_sigkilled_clients_query_which_runs_to_its_end(
    connect_server: SparkConnectServer, clients: Callable[[str, int], Client]
) -> None:
    client = clients("jrs-job-d-fence-4", 4)
    client.wait_running()
    client.kill()
    with detached(connect_server.remote(client.session_id)) as spark:
        running = lambda: "OPERATION_STATE_RUNNING" in operation_states(spark).values()  # noqa: E731
        assert running()
        wait_until(lambda: not running(), "the orphan's operation to end")
        # TERMINATING: its Spark work is done and the results wait for a client that never comes
        # (the server drops them after spark.connect.execute.manager.detachedTimeout)
        (state,) = operation_states(spark).values()
        assert state in {"OPERATION_STATE_TERMINATING", "OPERATION_STATE_SUCCEEDED"}
        wait_until(lambda: set(client.statuses()) == {"SUCCEEDED"}, "the orphan's Spark jobs to succeed")


def test_the_event_log_counts_sessions_and_tagged_operations_and_an_unused_client_opens_none(
    connect_server: SparkConnectServer,
) -> None:
    with detached(connect_server.url) as unused:
        unused_id = unused.session_id  # built, never called: no RPC
    with session(connect_server.url) as spark:
        spark.addTag("jrs-count")
        assert spark.range(5).count() == 5
        used_id = spark.session_id
    # events are ordered: once the used session's operation is logged, an earlier session would be too
    ops = wait_until(
        lambda: [o for o in connect_server.operations(used_id) if "jrs-count" in o["tags"]],
        "the used session's tagged operation in the event log",
    )
    assert len(ops) == 1
    sessions = connect_server.sessions()
    assert used_id in sessions and unused_id not in sessions
    jobs = connect_server.jobs(used_id, "jrs-count")
    assert jobs and {j["status"] for j in jobs} == {"SUCCEEDED"}


def test_asking_a_session_id_the_server_never_saw_fails_with_session_not_found(
    connect_server: SparkConnectServer,
) -> None:
    from pyspark.errors.exceptions.connect import SparkConnectException

    with detached(connect_server.remote(str(uuid.uuid4()))) as spark:
        with pytest.raises(SparkConnectException, match="SESSION_NOT_FOUND"):
            operation_states(spark)


def test_stopping_a_reattached_session_releases_it_and_ends_its_running_operations(
    connect_server: SparkConnectServer, clients: Callable[[str, int], Client]
) -> None:
    client = clients("jrs-job-e-fence-5", 60)
    client.wait_running()
    client.kill()
    with session(connect_server.remote(client.session_id)):
        pass  # stop() = ReleaseSession: the server closes the session and interrupts what it runs
    wait_until(lambda: not client.running(), "the released session's Spark jobs to end")
    assert "SUCCEEDED" not in client.statuses()


def test_a_client_that_exits_without_stop_opens_a_session_at_exit(connect_server: SparkConnectServer) -> None:
    """pyspark's atexit hook sends an ML-cache cleanup command for every client not closed, which
    opens its session on the server: a committed job must not even build a Connect session."""
    session_id = str(uuid.uuid4())
    code = "import sys; from pyspark.sql import SparkSession; SparkSession.builder.remote(sys.argv[1]).create()"
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code, connect_server.remote(session_id)], timeout=300, check=False
    )
    assert done.returncode == 0
    assert session_id in wait_until(lambda: connect_server.sessions(), "any session in the event log")
    first = next(o["statement"] for o in connect_server.operations(session_id))
    assert first.startswith("ml_command"), first


def test_the_server_interrupts_an_orphaned_operation_after_its_detached_timeout(
    tmp_path_factory: pytest.TempPathFactory, clients: Callable[[str, int], Client]
) -> None:
    """An operation whose client died is removed and interrupted by the server itself, once its
    response stream ended (``spark.connect.execute.reattachable.senderMaxStreamDuration``, 2m by
    default, 10s here, after the last attach) and ``spark.connect.execute.manager.detachedTimeout``
    (5m by default, 3s here) passed without a reattach. An orphan thus runs at most ~7 minutes by
    default: a successor that waits for it may see it interrupted rather than finished. (With the
    stream's default 2m the drop took 104 s after the SIGKILL; the shorter stream keeps the suite
    short and proves the same mechanism.)"""
    conf = {
        "spark.connect.execute.reattachable.senderMaxStreamDuration": "10s",
        "spark.connect.execute.manager.detachedTimeout": "3s",
        "spark.connect.execute.manager.maintenanceInterval": "1s",
    }
    with SparkConnectServer(tmp_path_factory.mktemp("connect-short-detach"), master="local[1]", conf=conf) as short:
        client = Client(short, "jrs-job-f-fence-6", 120)
        try:
            client.wait_running()
            client.kill()
            killed = time.monotonic()
            wait_until(lambda: not client.running(), "the server to drop the orphaned operation", timeout=300)
            print(f"\norphan dropped by the server {time.monotonic() - killed:.1f}s after its client's SIGKILL")
            assert "SUCCEEDED" not in client.statuses()
            # GetStatus is no witness here: right after the removal it still answered RUNNING for
            # the dropped operation (seen once, 4.3.0); the Spark jobs' status is what counts
            with detached(short.remote(client.session_id)) as spark:
                print(f"\nGetStatus after the orphan was dropped: {operation_states(spark)}")
        finally:
            client.close()


def test_activity_counts_nothing_new_when_nothing_ran_and_one_of_each_for_a_tagged_count(
    connect_server: SparkConnectServer,
) -> None:
    """The counting the committed-path tests will use: snapshot, code under test, barrier, snapshot."""
    before = connect_server.activity()
    quiet = connect_server.barrier()
    assert connect_server.activity(exclude_sessions=[quiet]) == before
    with detached(connect_server.url) as spark:
        spark.addTag("jrs-activity")
        spark.range(3).count()
    loud = connect_server.barrier()
    after = connect_server.activity(exclude_sessions=[quiet, loud])
    assert after["sessions"] == before["sessions"] + 1
    assert after["operations"] >= before["operations"] + 1 and after["jobs"] >= before["jobs"] + 1
