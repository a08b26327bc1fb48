"""What a retry of a Spark Connect job checks before it asks the server about its predecessor's
session, on real Spark Connect servers: one started with ``spark.ui.enabled=false`` (its Spark
tasks can never be seen) and the shared ``connect_server`` fixture (another port).

The attempts are ``JrsPySparkOperator.execute`` with a task context, as Airflow's task runner
calls it; what is counted: the function's calls (lines it appends to a file), the store's entry,
the job's intent and recovery log, the servers' own answers (the session's state, the event log
and UI REST API of the fixture server).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_jrs.launch.connect_launcher import session_url
from airflow_jrs.launch.connect_server import SESSION_GONE, session_state
from airflow_jrs.operators.pyspark import JrsPySparkOperator
from airflow_jrs.spark.commit import read_commit_marker
from airflow_jrs.store.intents import Intent
from airflow_jrs.store.recoveries import WAITED
from airflow_jrs.store.redis.intents import RedisIntentStore
from airflow_jrs.store.redis.recoveries import RedisRecoveries
from jrs_testbench.spark_connect import SparkConnectServer

pytestmark = [pytest.mark.airflow, pytest.mark.spark]

DAY = datetime(2013, 1, 1, tzinfo=UTC)
JOB = "d.t.2013-01-01"
CONN = "spark_connect_checks"


def counted_rows(control: str, spark=None, jrs=None):
    """Appends its fence to ``control/calls``, asks the server for a count (the session has done
    Spark work), then fails while ``control/fail`` exists, else writes 3 rows."""
    ctl = Path(control)
    with (ctl / "calls").open("a") as fh:
        fh.write(f"{jrs.fence}\n")
    assert spark.range(0, 5, 1, 2).count() == 5
    if (ctl / "fail").exists():
        raise ValueError("the function failed")
    spark.range(3).write.mode("overwrite").parquet(f"{jrs.output}/data")
    return {"rows": 3}


def calls(control: Path) -> list[str]:
    path = control / "calls"
    return path.read_text().split() if path.exists() else []


def fence_of(payload: dict[str, Any]) -> int:
    """The fence of the attempt that wrote the task's output (its commit marker names it)."""
    marker = read_commit_marker(payload["outputs"]["data"].rsplit("/", 1)[0])
    assert marker is not None, payload
    return int(marker["fence"])


def context(try_number: int) -> dict[str, Any]:
    ti = SimpleNamespace(dag_id="d", task_id="t", try_number=try_number, map_index=-1, xcom_push=lambda **kw: None)
    return {"ti": ti, "run_id": "scheduled__2013-01-01", "data_interval_start": DAY, "logical_date": DAY}


def operator(control: Path) -> JrsPySparkOperator:
    return JrsPySparkOperator(
        task_id="t", python_callable=counted_rows, op_kwargs={"control": str(control)}, conn_id=CONN,
        outputs={"data": "data"}, retries=2, predecessor="wait",
    )  # fmt: skip


def point_connection_at(monkeypatch: pytest.MonkeyPatch, server: SparkConnectServer) -> None:
    conn = {"conn_type": "spark_connect", "host": "127.0.0.1", "port": server.port, "login": "airflow"}
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN.upper()}", json.dumps(conn))


def intent_of(env: Any) -> Intent | None:
    return RedisIntentStore(env.store.client, env.namespace, "unused").get(JOB)


@pytest.fixture(scope="module")
def server_without_ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkConnectServer]:
    """A Spark Connect server that runs no Spark UI: the tasks of its sessions can never be seen."""
    server = SparkConnectServer(
        tmp_path_factory.mktemp("connect-no-ui"), master="local[1]", conf={"spark.ui.enabled": "false"}
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def control(tmp_path: Path) -> Path:
    folder = tmp_path / "control"
    folder.mkdir()
    return folder


def fail_once_on(env: Any, server: SparkConnectServer, control: Path) -> Intent:
    """Try 1 on ``server`` (no UI): the function fails after Spark work, so the attempt cannot
    see whether the cancelled work's tasks still run: it records nothing, its intent (naming the
    session) stays, and it released its session (the server reports it gone)."""
    from airflow.providers.common.compat.sdk import AirflowException

    (control / "fail").write_text("")
    with pytest.raises(AirflowException, match=r"cannot see whether Spark tasks .*spark\.ui\.enabled=false"):
        operator(control).execute(context(try_number=1))
    intent = intent_of(env)
    assert intent is not None and intent.session_id, "the failed attempt left no intent naming its session"
    assert env.store.get_entry(JOB) is None
    assert session_state(session_url(server.url, intent.session_id)) == SESSION_GONE
    (control / "fail").unlink()
    return intent


def test_a_retry_on_a_server_without_ui_waits_the_bound_for_the_gone_sessions_tasks_then_computes(
    jrs_env: Any, server_without_ui: SparkConnectServer, control: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, every retry raised TasksUnknown (the server never shows tasks) although the server
    reported the failed attempt's session gone: the job was wedged until a person stepped in.
    Now the retry waits [jrs] connect_unseen_tasks_wait, records that in the job's recovery log,
    and computes."""
    point_connection_at(monkeypatch, server_without_ui)
    monkeypatch.setenv("AIRFLOW__JRS__CONNECT_UNSEEN_TASKS_WAIT", "2")
    failed = fail_once_on(jrs_env, server_without_ui, control)

    payload = operator(control).execute(context(try_number=2))

    assert payload["status"] == "SUCCEEDED" and payload["reused"] is False and payload["metrics"] == {"rows": 3}
    assert calls(control) == [str(failed.fence), str(fence_of(payload))], "the function ran other than twice"
    assert intent_of(jrs_env) is None  # the result's write dropped it
    waited = [s for s in RedisRecoveries(jrs_env.store.client, jrs_env.namespace).get(JOB) if s.event == WAITED]
    assert len(waited) == 1 and waited[0].predecessor == int(failed.fence), waited  # a step keeps the token
    assert f"session {failed.session_id} (gone; its cancelled tasks unseen, waited for 2s)" in waited[0].text


def test_a_retry_whose_connection_names_another_server_than_the_predecessors_fails_closed_asking_it_nothing(
    jrs_env: Any,
    server_without_ui: SparkConnectServer,
    connect_server: SparkConnectServer,
    control: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The predecessor's session is on server A; the connection now names server B (another
    port). B never held that session, so it answers "not found", which read as "nothing runs":
    before, the retry computed on B beside whatever still ran on A. Now it starts nothing, opens
    no session on B, keeps the predecessor's intent, and says what to do; pointed back at A, the
    next try recovers as usual."""
    from airflow.providers.common.compat.sdk import AirflowFailException

    point_connection_at(monkeypatch, server_without_ui)
    monkeypatch.setenv("AIRFLOW__JRS__CONNECT_UNSEEN_TASKS_WAIT", "1")
    failed = fail_once_on(jrs_env, server_without_ui, control)
    a, b = f"127.0.0.1:{server_without_ui.port}", f"127.0.0.1:{connect_server.port}"

    point_connection_at(monkeypatch, connect_server)
    quiet = connect_server.barrier()
    before = connect_server.activity(exclude_sessions=[quiet])
    with pytest.raises(AirflowFailException) as raised:  # a person must act: retrying cannot fix it
        operator(control).execute(context(try_number=2))
    message = str(raised.value)
    assert f"session {failed.session_id}" in message and f"opened on {a}, but the connection now names {b}" in message
    assert "Point the connection (or spark.remote) back at " + a in message and "delete the job's intent" in message
    after = connect_server.activity(exclude_sessions=[quiet, connect_server.barrier()])
    assert after == before, f"the retry did something on server B: {before} -> {after}"
    assert calls(control) == [str(failed.fence)], "the function ran on server B"
    assert intent_of(jrs_env) == failed and jrs_env.store.get_entry(JOB) is None

    point_connection_at(monkeypatch, server_without_ui)
    payload = operator(control).execute(context(try_number=3))
    assert payload["status"] == "SUCCEEDED" and calls(control) == [str(failed.fence), str(fence_of(payload))]
