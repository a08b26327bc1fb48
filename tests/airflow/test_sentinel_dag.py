"""A DAG against a Sentinel-managed store keeps running across a failover (real spark-submit).

The store is a real Sentinel group on loopback (a primary, two replicas, three sentinels; the
primary refuses writes without a replica: ``min-replicas-to-write 1``), reached by the one
spelling of docs/operations/redis.md, with ``durability = replicas:1``. The primary is killed
while the guarded spark-submit runs: the worker's lease renewals, the supervisor's beats beside
spark-submit and the commit all follow the new primary without a restart, the job runs once,
its result is committed, and a second run of the date starts no Spark.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from typing import Any

import pytest
from dag_runner import run_dag

from jrs_testbench.redis_sentinel import EmbeddedSentinelGroup

pytestmark = [pytest.mark.spark, pytest.mark.airflow, pytest.mark.cluster]

JOB = "jrs_tiny.submit.2013-01-01"


@pytest.fixture
def group(tmp_path_factory):
    with EmbeddedSentinelGroup(tmp_path_factory.mktemp("sentinel")) as found:
        yield found


@pytest.fixture
def redis_url(group):
    """The store the jrs connection names (``jrs_env`` reads it): the Sentinel group's."""
    return group.url()


@pytest.fixture
def env(jrs_env, monkeypatch):
    monkeypatch.setenv("JRS_TEST_SPARK_CONF", json.dumps(jrs_env.spark_conf()))
    monkeypatch.setenv("JRS_TEST_APP_ARGS", json.dumps(["--sleep", "6"]))
    monkeypatch.setenv("AIRFLOW__JRS__DURABILITY", "replicas:1")
    for name in ("JRS_TEST_JOB_VERSION", "JRS_TEST_RETRIES", "JRS_TEST_EXEC_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    return jrs_env


def test_a_failover_while_the_job_runs_changes_nothing_the_dag_sees(env, group):
    keys = env.store.keys
    failovers: list[Any] = []

    def fail_over_once_spark_runs() -> None:  # dag.test() must have the main thread (signals)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                if env.store.client.exists(keys.intent(JOB)):  # written right before spark-submit starts
                    failovers.append(group.fail_over("kill"))
                    return
            time.sleep(0.1)

    chaos = threading.Thread(target=fail_over_once_spark_runs, name="failover", daemon=True)
    chaos.start()
    states = run_dag()
    chaos.join(120)
    assert failovers, "the guarded spark-submit never started, or the failover never finished"
    assert states == {"submit": "success", "cleanup": "success"}, states
    assert env.launches() == 1
    entry = env.store.get_entry(JOB)
    assert entry is not None and entry.is_clean
    assert int(env.store.client.info("server")["tcp_port"]) == failovers[0].new_port
    assert run_dag() == {"submit": "success", "cleanup": "success"}
    assert env.launches() == 1, "Spark ran again for a job committed across the failover"
