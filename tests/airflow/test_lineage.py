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
TASKS = ("submit", "session", "sql")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_dag(env: dict[str, str]) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(HERE / "dags" / "jrs_lineage_dags.py")],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    states = [line for line in done.stdout.splitlines() if line.startswith("JRS_STATES ")]
    assert states, done.stdout[-3000:] + done.stderr[-3000:]
    return dict(json.loads(states[-1].split(" ", 1)[1]))


def test_a_computed_and_a_reused_date_name_the_jobs_outputs_and_spark_gets_its_parent(jrs_env, tmp_path):
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
    }

    # The computed date: every task succeeds (the lineage endpoint that is down fails none).
    assert run_dag(env) == dict.fromkeys(TASKS, "success")
    computed = completes(events_file, "jrs_lineage")
    apps = jrs_env.spark.properties()
    assert len(apps) == len(TASKS), [a.get("spark.app.name") for a in apps]
    # The reused date: Spark does not run, the tasks skip, the events still name the outputs.
    assert run_dag(env) == dict.fromkeys(TASKS, "skipped")
    assert jrs_env.launches() == len(TASKS), "a reused job started Spark"
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
            assert facet["applicationId"] == stored.application_id
            assert facet["computedBy"]["runId"] == stored.attempt.run_id  # the first run, both times
            assert sorted(d["name"] for d in event["outputs"]) == sorted(stored.outputs.values()), task_id
            assert {d["namespace"] for d in event["outputs"]} == {"file"}

    # Spark-side: each application names its task's OpenLineage run as its parent, and the HTTP
    # transport (the one the provider injects).
    runs = {f"jrs_lineage.{t}": both[t][0]["run"]["runId"] for t in TASKS}
    for props in apps:
        parent = props["spark.openlineage.parentJobName"]
        assert props["spark.openlineage.parentRunId"] == runs[parent], props
        assert props["spark.openlineage.transport.type"] == "composite"
        assert props["spark.openlineage.transport.transports.down.type"] == "http"
    assert {p["spark.openlineage.parentJobName"] for p in apps} == set(runs)
