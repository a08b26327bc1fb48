"""OpenLineage on every guarded path, through Airflow's openlineage provider and its real client.

Each run is a real ``dag.test()`` in a child Python (the provider reads its transport once per
process) with the client's file transport: the events on disk are what a lineage backend would
receive, validated against the OpenLineage spec's JSON schemas (``jrs_testbench/lineage.py``).
What Spark receives is read back from each application's own event log (its Spark Properties,
``SparkLaunches.properties``), not from the operator. The composite transport's second member
is an HTTP endpoint that is down: the tasks must not fail for it (issue 43, item 4), and it is
what makes the provider inject transport information into Spark (it injects HTTP ones only).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import test_spark_jdbc

from jrs_testbench.lineage import completes, read_events

pytestmark = [pytest.mark.airflow, pytest.mark.spark]

HERE = Path(__file__).resolve().parent
RUN = """
import importlib.util, json, sys
from datetime import UTC, datetime
spec = importlib.util.spec_from_file_location("jrs_lineage_dags", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
run = module.dag.test(logical_date=datetime(2013, 1, 1, tzinfo=UTC))
print("JRS_STATES", json.dumps({ti.task_id: str(ti.state) for ti in run.get_task_instances()}))
"""
#: One task of each guarded kind; all but Spark Connect start an application of their own.
TASKS = ("submit", "session", "sql", "pipeline", "copy", "connect")
LAUNCHING = ("submit", "session", "sql", "pipeline", "copy")
#: The Derby database (``APP.FLIGHTS``) the JDBC task copies from, and its ``derby_src`` connection.
source = test_spark_jdbc.source
PIPELINE_SPEC = HERE.parents[1] / "dags" / "pipelines" / "daily_counts" / "spark-pipeline.yml"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_dag(env: dict[str, str], cwd: Path) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(HERE / "dags" / "jrs_lineage_dags.py")],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    states = [line for line in done.stdout.splitlines() if line.startswith("JRS_STATES ")]
    assert states, done.stdout[-3000:] + done.stderr[-3000:]
    return dict(json.loads(states[-1].split(" ", 1)[1]))


@pytest.mark.timeout(900)
def test_a_computed_and_a_reused_date_of_every_kind_name_the_jobs_outputs_and_spark_gets_its_parent(
    jrs_env, tmp_path, connect_server, source
):
    events = tmp_path / "lineage"
    events.mkdir()
    events_file = events / "events.jsonl"
    transport = {
        "type": "composite",
        "continueOnFailure": True,
        "transports": {
            "disk": {"type": "file", "log_file_path": str(events_file), "append": True},
            "down": {"type": "http", "url": f"http://127.0.0.1:{closed_port()}", "timeout": 1},
        },
    }
    conf = jrs_env.spark_conf()  # event logs on: what each application received is read from its own
    env = {
        **os.environ,
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport),
        "AIRFLOW__OPENLINEAGE__SPARK_INJECT_PARENT_JOB_INFO": "true",
        "AIRFLOW__OPENLINEAGE__SPARK_INJECT_TRANSPORT_INFO": "true",
        "JRS_TEST_SPARK_CONF": json.dumps(conf),
        "JRS_TEST_PIPELINE_SPEC": str(PIPELINE_SPEC),
        "AIRFLOW_CONN_SPARK_CONNECT_LINEAGE": json.dumps(
            {"conn_type": "spark_connect", "host": "127.0.0.1", "port": connect_server.port}
        ),
        "JRS_TEST_CONNECT_CONN_ID": "spark_connect_lineage",
        "TMPDIR": str(tmp_path / "attempts"),  # the pipelines' attempt folders
    }
    cwd = tmp_path / "cwd"  # what Spark, Derby and the pipelines CLI leave behind stays here
    cwd.mkdir()
    (tmp_path / "attempts").mkdir()

    # The computed date: every task succeeds (the lineage endpoint that is down fails none).
    assert run_dag(env, cwd) == dict.fromkeys(TASKS, "success")
    computed = completes(events_file, "jrs_lineage")
    apps = jrs_env.spark.properties()
    assert len(apps) == len(LAUNCHING), [a.get("spark.app.name") for a in apps]
    # The reused date: Spark does not run, the tasks skip, the events still name the outputs.
    assert run_dag(env, cwd) == dict.fromkeys(TASKS, "skipped")
    assert jrs_env.launches() == len(LAUNCHING), "a reused job started Spark"
    both = completes(events_file, "jrs_lineage")
    assert len(read_events(events_file)) > 2 * len(TASKS)  # every event is schema-valid (read_events)

    for task_id in TASKS:
        first, second = both[task_id]
        assert first == computed[task_id][0]
        stored = jrs_env.store.full_entry(jrs_env.store.get_entry(f"jrs_lineage.{task_id}.2013-01-01")).result
        for event, reused in ((first, False), (second, True)):
            facet = event["run"]["facets"]["jrs_job"]
            assert facet["reused"] is reused, (task_id, facet)
            assert facet["jobId"] == stored.job_id and facet["fence"] == stored.fence
            assert facet.get("applicationId") == stored.application_id  # none for some kinds
            assert facet["computedBy"]["runId"] == stored.attempt.run_id  # the first run, both times
            assert sorted(d["name"] for d in event["outputs"]) == sorted(stored.outputs.values()), task_id
            assert {d["namespace"] for d in event["outputs"]} == {"file"}

    # Spark-side: each application names its task's OpenLineage run as its parent, and the HTTP
    # transport (the one the provider injects).
    runs = {f"jrs_lineage.{t}": both[t][0]["run"]["runId"] for t in LAUNCHING}
    for props in apps:
        parent = props["spark.openlineage.parentJobName"]
        assert props["spark.openlineage.parentRunId"] == runs[parent], props
        assert props["spark.openlineage.transport.type"] == "composite"
        assert props["spark.openlineage.transport.transports.down.type"] == "http"
    assert {p["spark.openlineage.parentJobName"] for p in apps} == set(runs)
    # A session's conf as the function saw it: in the task process, and on the Connect server
    # (the parent only: a session cannot change the server's transport).
    for task_id in ("session", "connect"):
        metrics = jrs_env.store.full_entry(jrs_env.store.get_entry(f"jrs_lineage.{task_id}.2013-01-01")).result.metrics
        assert metrics == {"parent": f"jrs_lineage.{task_id}"}, (task_id, metrics)
