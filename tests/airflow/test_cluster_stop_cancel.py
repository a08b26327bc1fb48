"""A stop, cancel or kill of a cluster-mode batch job through the real operator (dag.test), real Redis,
the real provider hook and supervisor; only the standalone cluster is a stand-in
(:mod:`jrs_testbench.fake_standalone`).

In cluster deploy mode terminating spark-submit ends only the client: the driver runs on in the
cluster. CANCELED (which lets a cleared task submit again) may be recorded only once the cluster
says the driver ended; otherwise the intent stays, so no second driver is ever submitted beside it.
A driver that finishes with its commit marker while it is being stopped is published, not canceled.
"""

from __future__ import annotations

import threading

import pytest
from test_cluster_deploy_mode import JOB, _finish_with_marker, master, run_dag  # noqa: F401  (master: the fixture)

from airflow_jrs.cli import main
from airflow_jrs.store import JobStatus
from airflow_jrs.store.redis.heartbeats import RedisHeartbeats
from airflow_jrs.store.redis.intents import RedisIntentStore
from jrs_testbench.fake_standalone import FakeStandaloneMaster

pytestmark = [pytest.mark.airflow, pytest.mark.cluster]


def _cancel_once_running(jrs_env, redis_url: str, fake: FakeStandaloneMaster, before_cancel=None) -> threading.Thread:
    """Once the driver was submitted and its spark-submit is supervised: ``airflow-jrs cancel``."""
    beats = RedisHeartbeats(jrs_env.store.client, jrs_env.namespace)

    def cancel() -> None:
        fake.await_request(lambda r: r.startswith("POST /jrs-fake/submit"))
        fake.await_request(lambda r: r.startswith("GET /v1/submissions/status/"))  # spark-submit waits
        while not ((b := beats.get(JOB)) is not None and b.running and b.child):
            threading.Event().wait(0.1)
        if before_cancel is not None:
            before_cancel()
        main(["--redis-url", redis_url, "--namespace", jrs_env.namespace, "cancel", JOB])

    thread = threading.Thread(target=cancel, daemon=True)
    thread.start()
    return thread


def test_cancel_of_a_cluster_driver_kills_the_driver_before_canceled_is_recorded(jrs_env, master, redis_url):  # noqa: F811
    master.submit_waits = True
    helper = _cancel_once_running(jrs_env, redis_url, master)
    states = run_dag()
    helper.join(timeout=60)
    driver = master.submissions[0]
    assert master.drivers[driver]["state"] == "KILLED", "CANCELED was recorded while the driver ran on"
    assert states["submit"] == "failed"
    entry = jrs_env.store.get_entry(JOB)
    assert entry is not None and entry.result.status is JobStatus.CANCELED
    assert RedisIntentStore(jrs_env.store.client, jrs_env.namespace, "/unused").get(JOB) is None


def test_cancel_while_the_cluster_cannot_be_asked_keeps_the_intent_and_records_nothing(
    jrs_env,
    master,  # noqa: F811
    redis_url,
):
    master.submit_waits = True

    def masters_go_standby() -> None:
        master.status = "STANDBY"

    helper = _cancel_once_running(jrs_env, redis_url, master, before_cancel=masters_go_standby)
    states = run_dag()
    helper.join(timeout=60)
    assert states["submit"] == "failed"
    assert len(master.submissions) == 1
    entry = jrs_env.store.get_entry(JOB)
    assert entry is None or entry.result.status is not JobStatus.CANCELED, "CANCELED recorded; the driver may run"
    intent = RedisIntentStore(jrs_env.store.client, jrs_env.namespace, "/unused").get(JOB)
    assert intent is not None and intent.application_id == master.submissions[0], "the intent was dropped"


def test_a_driver_that_commits_while_it_is_being_canceled_is_published(jrs_env, master, redis_url):  # noqa: F811
    # The kill reaches the cluster as the driver writes its marker and ends: its output is complete.
    master.submit_waits, master.ignore_kill = True, True

    def driver_commits_on_the_kill() -> None:
        master.await_request(lambda r: "kill" in r)
        _finish_with_marker(master, master.submissions[0])

    helper = _cancel_once_running(jrs_env, redis_url, master)
    committer = threading.Thread(target=driver_commits_on_the_kill, daemon=True)
    committer.start()
    states = run_dag()
    helper.join(timeout=60)
    committer.join(timeout=60)
    assert states["submit"] == "success", "the output the driver committed was not published"
    entry = jrs_env.store.get_entry(JOB)
    assert entry is not None and entry.result.status is JobStatus.SUCCEEDED
    assert RedisIntentStore(jrs_env.store.client, jrs_env.namespace, "/unused").get(JOB) is None
    assert len(master.submissions) == 1
