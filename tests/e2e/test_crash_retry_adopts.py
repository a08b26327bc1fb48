"""A retry sooner than the lease's TTL adopts its own killed try's Spark: a real scheduler.

With a user's everyday settings (the default 60 s lease, no wait for a held lease) and
``retry_delay`` of 5 s, ``kill -9`` of the task process while its spark-submit runs leaves try 1's
lease alive for most of a minute, its supervisor still running Spark. The retry once found that
lease, could not prove its holder dead (the supervisor runs) and failed at once: the run failed
and needed a clear by hand (issue 41). Airflow starts try 2 only after try 1 ended, so try 2
takes the lease over under a new fence, waits for try 1's application and adopts its output:
the run succeeds with exactly one Spark application.

DAG: ``tests/e2e/dags/jrs_e2e_crash_retry.py``. About 60-90 s (one Spark application, one retry).
"""

from __future__ import annotations

import uuid

import psutil
import pytest

from airflow_jrs.settings import settings_for
from airflow_jrs.store.redis.namespace import RedisJobNamespace
from jrs_testbench.helpers import wait_until

pytestmark = [pytest.mark.airflow, pytest.mark.e2e, pytest.mark.spark, pytest.mark.xdist_group("deployment")]

DAG_ID = "jrs_e2e_crash_retry"


def test_a_retry_before_the_lease_expires_takes_over_from_its_killed_try_and_adopts_its_spark(e2e, tmp_path):
    e2e.airflow.wait_for_dag(DAG_ID)
    e2e.client.unpause(DAG_ID)
    job_id = f"{DAG_ID}.submit.{uuid.uuid4().hex[:8]}"
    gate = tmp_path / "gate"
    launched = e2e.launches()
    run_id = e2e.client.trigger(DAG_ID, "2013-03-01", conf={"job_id": job_id, "gate": str(gate)})["dag_run_id"]
    jobs = RedisJobNamespace.from_url(e2e.redis_url, settings_for(e2e.namespace, output_root="", spec_root=""))
    try:
        beat = wait_until(
            lambda: (b := jobs.heartbeats.get(job_id)) is not None and b.running and b.child and b,
            "spark-submit running under its supervisor",
            timeout=300,
        )
        first = jobs.lease(job_id).peek()
        assert first is not None and first.owner["try_number"] == 1 and first.owner["map_index"] == -1, first
        task = psutil.Process(beat.pid).parent()
        assert task is not None and task.pid == first.owner["pid"], "the supervisor's parent holds the lease"

        task.kill()

        # try 2 holds the job under a newer fence while try 1's lease had most of its minute left
        # and its application still runs (the gate is closed): it took the lease over
        taken = wait_until(
            lambda: (h := jobs.lease(job_id).peek()) is not None and h.owner.get("try_number") == 2 and h,
            "the retry to take over try 1's lease",
            timeout=300,
        )
        assert taken.token > first.token and not gate.exists()
        assert jobs.heartbeats.get(job_id).running, "try 1's application still runs when its retry holds the job"

        gate.touch()  # try 1's application finishes; try 2 adopts its output
        e2e.run(DAG_ID, run_id)
        entry = e2e.store.get_entry(job_id)
        assert entry is not None and entry.result.attempt is not None and entry.result.attempt.try_number == 2
        assert entry.result.application_id and entry.result.application_id.startswith("local-"), entry.result
        assert e2e.launches() - launched == 1, "the retry adopted try 1's application, it did not run Spark again"
        tries = [ti for ti in e2e.client.task_instances(DAG_ID, run_id) if ti["task_id"] == "submit"]
        assert tries[0]["try_number"] == 2 and tries[0]["state"] == "success", tries

        steps = jobs.recoveries.get(job_id)  # newest first
        events = [s.event for s in steps]
        assert events[0] == "adopted" and events[-1] == "took_over", steps
        assert "it is try 1 of this task instance" in steps[-1].text, steps[-1].text
    finally:
        gate.touch()
        jobs.close()
