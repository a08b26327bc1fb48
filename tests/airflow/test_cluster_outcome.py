"""What a cluster-mode attempt concludes when spark-submit ends, through the real operator (dag.test),
real Redis, real folders, the real provider hook and supervisor; only the standalone cluster is a
stand-in (:mod:`jrs_testbench.fake_standalone`).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from test_cluster_deploy_mode import JOB, _finish_with_marker, master, run_dag  # noqa: F401  (master: fixture)

from airflow_jrs.spark.commit import marker_path
from airflow_jrs.store import JobStatus
from airflow_jrs.store.redis.intents import RedisIntentStore

pytestmark = [pytest.mark.airflow, pytest.mark.cluster]


def test_a_failed_submission_whose_driver_committed_is_published_at_once(jrs_env, master):  # noqa: F811
    # spark-submit waits for the driver, which writes its output and commit marker and ends; then
    # spark-submit fails (a lost connection). The output is complete: SUCCEEDED now, on the last try.
    master.submit_waits, master.submit_exit_code = True, 1

    def driver_commits() -> None:
        master.await_request(lambda r: r.startswith("GET /v1/submissions/status/"))
        _finish_with_marker(master, master.submissions[0])

    helper = threading.Thread(target=driver_commits, daemon=True)
    helper.start()
    states = run_dag()
    helper.join(timeout=60)
    assert states["submit"] == "success", "the committed output of this attempt's driver was not published"
    entry = jrs_env.store.get_entry(JOB)
    assert entry is not None and entry.result.status is JobStatus.SUCCEEDED
    assert RedisIntentStore(jrs_env.store.client, jrs_env.namespace, "/unused").get(JOB) is None
    assert len(master.submissions) == 1


def test_the_last_try_while_the_driver_runs_names_the_driver_and_what_to_do(jrs_env, master, capfd):  # noqa: F811
    master.submit_exit_code = 1  # spark-submit fails; the driver runs on
    states = run_dag()
    assert states["submit"] == "failed"
    out = "".join(capfd.readouterr())
    driver = master.submissions[0]
    assert master.drivers[driver]["state"] == "RUNNING"
    assert jrs_env.store.get_entry(JOB) is None
    assert RedisIntentStore(jrs_env.store.client, jrs_env.namespace, "/unused").get(JOB) is not None
    assert "this was the last try" in out and driver in out and "airflow-jrs intents" in out, out[-3000:]


@pytest.mark.parametrize("bound", [{"fence": 99}, {"job_id": "another.job"}, {"job_id": None, "fence": None}], ids=str)
def test_a_marker_that_does_not_name_the_predecessor_is_not_adopted(jrs_env, master, bound):  # noqa: F811
    # The first try's driver runs on after spark-submit failed (the intent stays); it ends with a
    # marker that names another fence or job, or none (not written for this attempt). The retry
    # must not publish that folder as the job's output: it submits anew.
    master.submit_exit_code = 1
    run_dag()
    first = master.submissions[0]
    assert RedisIntentStore(jrs_env.store.client, jrs_env.namespace, "/unused").get(JOB) is not None
    _finish_with_marker(master, first)
    out = Path(master.drivers[first]["conf"]["spark.jrs.output_dir"])
    doc = json.loads(Path(marker_path(str(out))).read_text())
    Path(marker_path(str(out))).write_text(json.dumps({**doc, **bound}))
    master.submit_exit_code, master.state_on_submit = 0, "FINISHED"  # the new driver ends without a marker
    run_dag()
    assert len(master.submissions) == 2, "a marker not naming the predecessor was adopted"
    entry = jrs_env.store.get_entry(JOB)
    assert entry is None or entry.result.status is not JobStatus.SUCCEEDED
