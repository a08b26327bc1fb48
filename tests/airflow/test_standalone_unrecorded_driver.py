"""A standalone cluster-mode attempt killed before it recorded its driver id, through the real operator
(dag.test in a process of its own, killed with SIGKILL), real Redis, the real provider hook and
supervisor; only the standalone cluster is a stand-in (:mod:`jrs_testbench.fake_standalone`).

The master lists drivers by id only, so the successor cannot tell whether that attempt's driver
runs: it must not submit a second driver while a driver accepted since then is live.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_cluster_deploy_mode import JOB, master, run_dag  # noqa: F401  (master: the fixture)

from airflow_jrs.store.redis.intents import RedisIntentStore

pytestmark = [pytest.mark.airflow, pytest.mark.cluster]
HERE = Path(__file__).parent


def test_a_driver_whose_id_was_never_recorded_is_not_run_twice(jrs_env, master, monkeypatch, tmp_path, capfd):  # noqa: F811
    monkeypatch.setenv("AIRFLOW__JRS__LEASE_TTL", "6")  # the killed attempt's lease and heartbeat expire soon
    master.hang_before_id = True
    code = "import json, test_cluster_deploy_mode as t; print('STATES=' + json.dumps(t.run_dag()))"
    with open(tmp_path / "killed-run.log", "w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-c", code], cwd=HERE, stdout=sink, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ['PYTHONPATH']}"}, start_new_session=True,
        )  # fmt: skip
    try:
        master.await_request(lambda r: r.startswith("POST /jrs-fake/submit"))
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the task, its supervisor and spark-submit: nothing printed the id
        proc.wait(timeout=60)
    intents = RedisIntentStore(jrs_env.store.client, jrs_env.namespace, "/unused")
    assert intents.get(JOB) is not None and intents.get(JOB).application_id is None
    master.hang_before_id = False
    driver = master.submissions[0]
    while jrs_env.store.client.exists(jrs_env.store.keys.lease(JOB)):
        time.sleep(0.2)  # the killed attempt's lease expires
    capfd.readouterr()
    states = run_dag()
    out = "".join(capfd.readouterr())
    assert len(master.submissions) == 1, "a second driver was submitted beside one whose id nobody recorded"
    assert states["submit"] == "failed"
    assert driver in out and "died before it recorded its driver id" in out, out[-3000:]
    master.set_state(driver, "KILLED")  # the user killed it: the next run submits again
    master.state_on_submit = "FINISHED"
    run_dag()
    assert len(master.submissions) == 2
