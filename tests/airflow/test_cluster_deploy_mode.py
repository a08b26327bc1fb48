"""Cluster deploy mode through the real operator (dag.test), real Redis, real folders, the real Spark
provider hook and supervisor; only the standalone cluster is a stand-in
(:mod:`jrs_testbench.fake_standalone`: standalone cluster mode runs no PySpark, and a real master
cannot be made to fail a submission on cue).

"Spark was not submitted again" is counted on the master: one driver per submission.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from dag_runner import DATE

from airflow_jrs.spark.commit import marker_path
from airflow_jrs.store import JobStatus
from airflow_jrs.store.redis.intents import RedisIntentStore
from jrs_testbench.fake_standalone import FakeStandaloneMaster, write_fake_spark_submit

pytestmark = [pytest.mark.airflow, pytest.mark.cluster]

JOB = "jrs_cluster.submit.2013-01-01"
DAG_FILE = Path(__file__).parent / "dags" / "jrs_cluster_dags.py"
_counter = itertools.count()


def run_dag() -> dict[str, str | None]:
    """dag.test() one run of the cluster DAG, parsed again so environment changes take effect."""
    spec = importlib.util.spec_from_file_location(f"jrs_cluster_dags_{next(_counter)}", DAG_FILE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run = module.dag.test(logical_date=DATE)
    return {ti.task_id: (str(ti.state) if ti.state else None) for ti in run.get_task_instances()}


@pytest.fixture
def master(jrs_env, monkeypatch, tmp_path):
    with FakeStandaloneMaster() as fake:
        bin_dir = tmp_path / "bin"
        write_fake_spark_submit(bin_dir)
        monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
        conn = {
            "conn_type": "spark",
            "host": "spark://127.0.0.1",
            "port": fake.port,
            "extra": {"deploy-mode": "cluster", "rest-port": fake.port, "master_webui_url": fake.url},
        }
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", json.dumps(conn))
        monkeypatch.delenv("JRS_TEST_SPARK_CONF", raising=False)
        monkeypatch.setenv("JRS_TEST_RETRIES", "0")
        yield fake


def _finish_with_marker(master: FakeStandaloneMaster, driver_id: str) -> None:
    """The driver writes its data and commit marker last, then ends (as airflow_jrs.spark does)."""
    conf = master.drivers[driver_id]["conf"]
    out = Path(conf["spark.jrs.output_dir"])
    (out / "data").mkdir(parents=True, exist_ok=True)
    (out / "data" / "part-0").write_text("42\n")
    doc = {"v": 1, "application_id": "app-20130101000000-0000", "job_id": conf["spark.jrs.job_id"],
           "fence": int(conf["spark.jrs.fence"]), "metrics": {"rows": 1},
           "written_at": datetime.now(UTC).isoformat()}  # fmt: skip
    Path(marker_path(str(out))).write_text(json.dumps(doc))
    master.set_state(driver_id, "FINISHED")


def test_a_submission_that_fails_while_its_driver_runs_keeps_the_intent_and_the_retry_adopts(
    jrs_env, master, monkeypatch
):
    # spark-submit prints the driver id, then fails (a lost REST poll, a master failover): the
    # driver runs on. The failed try must keep the intent; the next try must find the driver by
    # its id on the master, wait for it, and adopt its output -- never submit a second driver.
    master.submit_exit_code = 1
    monkeypatch.setenv("JRS_TEST_RETRIES", "1")
    store = jrs_env.store
    intents = RedisIntentStore(store.client, store.namespace, "/unused")

    finished = threading.Event()

    def driver_finishes_once_a_successor_holds_the_lease() -> None:
        master.await_request(lambda r: r.startswith("POST /jrs-fake/submit"))
        first_fence = int(master.drivers[master.submissions[0]]["conf"]["spark.jrs.fence"])
        while int(store.client.hget(store.keys.lease(JOB), "token") or 0) <= first_fence:
            if finished.wait(0.1):
                return
        seen = len(master.requests)
        with master.asked:
            master.asked.wait_for(lambda: any(r.startswith("GET /json") for r in master.requests[seen:]), 120)
        if not finished.is_set():
            _finish_with_marker(master, master.submissions[0])

    helper = threading.Thread(target=driver_finishes_once_a_successor_holds_the_lease, daemon=True)
    helper.start()
    try:
        states = run_dag()
        if states["submit"] == "up_for_retry":  # dag.test left the retry to the next run of the date
            intent = intents.get(JOB)
            assert intent is not None, "the failed try dropped the intent while its driver still ran"
            assert intent.application_id == master.submissions[0]
            assert store.get_entry(JOB) is None
            states = run_dag()
    finally:
        finished.set()  # a helper still waiting gives up
        helper.join(timeout=60)
    assert master.submissions == [master.submissions[0]], "a second driver was submitted"
    assert states["submit"] == "success", states
    entry = store.get_entry(JOB)
    assert entry is not None and entry.result.status is JobStatus.SUCCEEDED
    out = master.drivers[master.submissions[0]]["conf"]["spark.jrs.output_dir"]
    assert entry.result.outputs == {"output": out}
    assert (Path(out) / "data" / "part-0").read_text() == "42\n"
    assert intents.get(JOB) is None


def test_a_driver_that_ends_without_its_commit_marker_records_no_success(jrs_env, master):
    # The master says FINISHED but the folder holds no commit marker (an application that never
    # wrote one, or spark-submit returning at submission): an empty folder is never published.
    master.state_on_submit = "FINISHED"
    states = run_dag()
    assert states["submit"] == "failed"
    assert len(master.submissions) == 1
    entry = jrs_env.store.get_entry(JOB)
    assert entry is None or entry.result.status is not JobStatus.SUCCEEDED
    if entry is not None:
        assert "_JRS_COMMIT.json" in (entry.result.error or "")
