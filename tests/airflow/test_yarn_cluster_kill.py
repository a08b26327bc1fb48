"""A kill or cancel of a YARN cluster-mode batch job through the real operator, real Redis, the real
provider hook and supervisor; only the ResourceManager is a stand-in (:mod:`jrs_testbench.fake_yarn`).

In YARN cluster mode terminating spark-submit ends only the client: the application runs on. The
provider's own ``on_kill`` sends its YARN kill only while spark-submit lives, and the supervisor has
terminated it by then; airflow-jrs stops the application through the ResourceManager itself.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_cluster_deploy_mode import JOB, run_dag

from airflow_jrs.cli import main
from airflow_jrs.store import JobStatus
from airflow_jrs.store.redis.heartbeats import RedisHeartbeats
from airflow_jrs.store.redis.intents import RedisIntentStore
from jrs_testbench.fake_yarn import FakeResourceManager, write_fake_yarn_cli, write_fake_yarn_spark_submit

pytestmark = [pytest.mark.airflow, pytest.mark.cluster]
HERE = Path(__file__).parent


@pytest.fixture(params=["rm-address", "yarn-cli-only"])
def rm(request, jrs_env, monkeypatch, tmp_path):
    """A ResourceManager the connection names (``yarn_resourcemanager_webapp_address``), or one only
    the ``yarn`` CLI reaches (the connection names no address: the provider's CLI kill)."""
    with FakeResourceManager() as fake:
        bin_dir = tmp_path / "bin"
        write_fake_yarn_spark_submit(bin_dir)
        write_fake_yarn_cli(bin_dir)
        monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
        monkeypatch.setenv("JRS_FAKE_YARN_RM", fake.url)
        extra = {"deploy-mode": "cluster"}
        if request.param == "rm-address":
            extra["yarn_resourcemanager_webapp_address"] = fake.url
        conn = {"conn_type": "spark", "host": "yarn", "extra": extra}
        fake.address_known = request.param == "rm-address"  # type: ignore[attr-defined]
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", json.dumps(conn))
        monkeypatch.delenv("JRS_TEST_SPARK_CONF", raising=False)
        monkeypatch.setenv("JRS_TEST_RETRIES", "0")
        monkeypatch.setenv("JRS_TEST_DURABLE", "false")  # durable needs yarn_track_via_rm_api, as in the parent
        yield fake


def _await_running(jrs_env, rm: FakeResourceManager, alive=lambda: True) -> str:
    """The application id once it runs on YARN and its spark-submit is supervised."""
    beats = RedisHeartbeats(jrs_env.store.client, jrs_env.namespace)
    deadline = time.monotonic() + 180
    while not (rm.submissions and (b := beats.get(JOB)) is not None and b.running and b.child):
        assert alive() and time.monotonic() < deadline, "the application never ran"
        time.sleep(0.2)
    return rm.submissions[0]


def test_on_kill_kills_the_yarn_application_not_only_spark_submit(jrs_env, rm, tmp_path):
    code = "import json, test_cluster_deploy_mode as t; print('STATES=' + json.dumps(t.run_dag()))"
    log = tmp_path / "dag-run.log"
    with open(log, "w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-c", code], cwd=HERE, stdout=sink, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ['PYTHONPATH']}"},
        )  # fmt: skip
    try:
        app_id = _await_running(jrs_env, rm, alive=lambda: proc.poll() is None)
        proc.send_signal(signal.SIGTERM)  # the task is killed: on_kill
        proc.wait(timeout=180)
    finally:
        proc.kill()
    out = log.read_text(errors="replace")
    assert rm.state(app_id) == "KILLED", "on_kill left the YARN application running:\n" + out[-3000:]
    assert len(rm.submissions) == 1


def test_cancel_kills_the_yarn_application_before_canceled_is_recorded(jrs_env, rm, redis_url):
    def cancel() -> None:
        _await_running(jrs_env, rm)
        main(["--redis-url", redis_url, "--namespace", jrs_env.namespace, "cancel", JOB])

    helper = threading.Thread(target=cancel, daemon=True)
    helper.start()
    states = run_dag()
    helper.join(timeout=60)
    assert states["submit"] == "failed"
    entry = jrs_env.store.get_entry(JOB)
    if rm.address_known:  # airflow-jrs can ask the ResourceManager: it kills the application
        assert rm.state(rm.submissions[0]) == "KILLED", "CANCELED was recorded while the application ran on"
        assert entry is not None and entry.result.status is JobStatus.CANCELED
    else:  # it cannot tell whether the application runs: nothing recorded, the intent stays
        assert entry is None or entry.result.status is not JobStatus.CANCELED, "CANCELED recorded; it may run"
        intent = RedisIntentStore(jrs_env.store.client, jrs_env.namespace, "/unused").get(JOB)
        assert intent is not None and intent.application_id == rm.submissions[0], "the intent was dropped"


@pytest.mark.parametrize("rm", ["yarn-cli-only"], indirect=True)
def test_a_retry_that_cannot_ask_yarn_submits_nothing_and_says_what_to_do(jrs_env, rm, redis_url, capfd):
    # The connection names no ResourceManager web address: a canceled attempt keeps its intent (its
    # application may run on); the next run cannot ask YARN, so it must submit nothing and say why.
    def cancel() -> None:
        _await_running(jrs_env, rm)
        main(["--redis-url", redis_url, "--namespace", jrs_env.namespace, "cancel", JOB])

    helper = threading.Thread(target=cancel, daemon=True)
    helper.start()
    run_dag()
    helper.join(timeout=60)
    capfd.readouterr()
    states = run_dag()
    out = "".join(capfd.readouterr())
    assert states["submit"] == "failed"
    assert len(rm.submissions) == 1, "a second application was submitted beside the first"
    assert "cannot ask the YARN ResourceManager" in out and "airflow-jrs intents" in out, out[-3000:]
