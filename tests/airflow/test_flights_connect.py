"""``flights_pyspark_connect`` (dags/flights_pyspark.py's pipeline on Spark Connect) through
Airflow's ``dag.test()`` on a real Spark Connect server (the ``connect_server`` fixture).

What is counted, not mocked: the server's own views (its event log's sessions and operations,
its UI REST API's Spark jobs; ``SparkConnectServer.activity`` after a ``barrier``), the store's
entries and the commit markers. The first pass computes one date on the server; the second pass
(``dag.test`` again, in this process) and a backfill-style re-run of the committed date in a new
Python process (as a backfill's task processes are: exit included, where an unused Connect
client would open its session) must open no session and start no operation on the server.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from airflow_jrs.launch.connect_launcher import job_tag
from airflow_jrs.spark.commit import read_commit_marker
from jrs_testbench.helpers import ROOT
from jrs_testbench.invariants import assert_clean_outputs_exist
from jrs_testbench.spark_connect import SparkConnectServer

pytestmark = [pytest.mark.airflow, pytest.mark.spark]

DAY = datetime(2013, 1, 1, tzinfo=UTC)
DAG_FILE = ROOT / "dags" / "flights_pyspark.py"
JOBS = {"flights_pyspark_connect.ingest.2013-01-01", "flights_pyspark_connect.ontime.2013-01-01"}

#: A backfill's re-run of the committed date, in a process of its own: parse the DAG file, run
#: the date, print each task's state.
RERUN = """
import importlib.util, json, sys, warnings
from datetime import datetime
warnings.filterwarnings("ignore")
spec = importlib.util.spec_from_file_location("flights_pyspark_rerun", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
run = module.connect_dag.test(logical_date=datetime.fromisoformat(sys.argv[2]))
print(json.dumps({ti.task_id: str(ti.state) for ti in run.get_task_instances()}), flush=True)
"""


def connect_dag() -> Any:
    """Parse the DAG file anew, so the environment of this test is the one it reads."""
    spec = importlib.util.spec_from_file_location(f"flights_pyspark_{time.monotonic_ns()}", DAG_FILE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.connect_dag


def states(run: Any) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


@pytest.fixture
def connect_env(
    jrs_env: Any, connect_server: SparkConnectServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Any:
    """The DAG's default Spark Connect connection (``spark_connect_default``) on the test server."""
    conn = {"conn_type": "spark_connect", "host": "127.0.0.1", "port": connect_server.port, "login": "airflow"}
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT_DEFAULT", json.dumps(conn))
    monkeypatch.delenv("JRS_SPARK_CONNECT_CONN_ID", raising=False)
    monkeypatch.setenv("JRS_FLIGHTS_LANDING", str(tmp_path / "landing"))
    return jrs_env


def test_the_connect_variant_computes_a_date_on_the_server_once_and_its_reruns_start_nothing_there(
    connect_env: Any, connect_server: SparkConnectServer
) -> None:
    server = connect_server
    sessions_before = set(server.sessions())
    run = connect_dag().test(logical_date=DAY)
    assert set(states(run).values()) == {"success"}, states(run)
    entries = {e.job_id: e for e in assert_clean_outputs_exist(connect_env.store)}
    assert set(entries) == JOBS
    ingest, ontime = (entries[f"flights_pyspark_connect.{t}.2013-01-01"] for t in ("ingest", "ontime"))
    assert ingest.result.metrics == {"rows": 842, "date": "2013-01-01"}  # as the local session computes it
    assert ontime.result.metrics["flights"] == 842
    # Each job ran in a session of its own on the server, every operation tagged with its job and fence.
    computed = []
    for entry in (ingest, ontime):
        marker = read_commit_marker(next(iter(entry.result.outputs.values())).rsplit("/", 1)[0])
        assert marker is not None and marker["session_id"] in server.sessions()
        ops = server.operations(marker["session_id"])
        tag = job_tag(connect_env.namespace, entry.job_id, marker["fence"])
        assert ops and all(tag in op["tags"] for op in ops), ops
        computed.append(marker["session_id"])
    assert set(server.sessions()) - sessions_before == set(computed)  # nothing else opened a session

    quiet = server.barrier()
    before = server.activity(exclude_sessions=[quiet])
    run = connect_dag().test(logical_date=DAY)  # the second pass: both jobs are committed
    assert set(states(run).values()) == {"success"}, states(run)
    second = server.barrier()
    after_second = server.activity(exclude_sessions=[quiet, second])
    assert after_second == before, f"the second pass did something on the server: {before} -> {after_second}"

    rerun = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", RERUN, str(DAG_FILE), DAY.isoformat()],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    rerun_states = json.loads(rerun.stdout.strip().splitlines()[-1])
    assert set(rerun_states.values()) == {"success"}, rerun_states
    after_rerun = server.activity(exclude_sessions=[quiet, second, server.barrier()])
    assert after_rerun == before, f"the re-run did something on the server: {before} -> {after_rerun}"

    unchanged = {e.job_id: e.result.fence for e in assert_clean_outputs_exist(connect_env.store)}
    assert unchanged == {job: entry.result.fence for job, entry in entries.items()}  # the same results
    print(f"\nserver activity after the first pass, unchanged by the second and the re-run: {before}")
