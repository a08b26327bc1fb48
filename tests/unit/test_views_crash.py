"""During a crash the views say what runs: the task process gone, its supervisor still running
Spark, the lease's time left and what the retry will do (issue 41: they said "running").

A real task process is started and SIGKILLed (its pid, start time and pid space recorded in the
lease as an attempt records them); a real live process stands in for its supervisor; real Redis.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from airflow_jrs.cli import main
from airflow_jrs.settings import settings_for
from airflow_jrs.store.intents import Intent
from airflow_jrs.store.leases.lease import JobLease, default_owner, process_identity
from airflow_jrs.store.namespace import JobNamespace
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.leases import RedisJobLease
from airflow_jrs.store.redis.namespace import RedisJobNamespace
from airflow_jrs.views.job import inspect_job
from airflow_jrs.views.json import job_json

JOB = "v.t.2013-01-01"
TRY_1 = {"dag_id": "v", "task_id": "t", "run_id": "r1", "map_index": -1, "try_number": 1}


@pytest.fixture
def jobs(redis_url, namespace, tmp_path) -> Iterator[JobNamespace]:
    jobs = RedisJobNamespace.from_url(
        redis_url, settings_for(namespace, output_root=str(tmp_path), spec_root=str(tmp_path))
    )
    yield jobs
    jobs.close()


@pytest.fixture
def supervisor() -> Iterator[subprocess.Popen[bytes]]:
    """A live process standing in for the supervisor that outlived its task."""
    proc = subprocess.Popen(["sleep", "600"])
    yield proc
    proc.kill()
    proc.wait()


def killed_task() -> dict:
    """The owner record of a task process that was SIGKILLed (kill -9), as its lease keeps it."""
    task = subprocess.Popen(["sleep", "600"])
    owner = {**default_owner(**TRY_1), "pid": task.pid, **process_identity(task.pid)}
    task.kill()
    task.wait()
    return owner


def crash(jobs: JobNamespace, owner: dict, supervisor_pid: int) -> JobLease:
    """What a kill -9 of try 1 leaves: its lease (60 s TTL), its intent, its supervisor's heartbeat."""
    lease = RedisJobLease(jobs.client, jobs.namespace, JOB, ttl=60, owner=owner)
    token = lease.acquire()
    jobs.intents.update(Intent(JOB, token, "file:///spec", "/staging", "app", owner["host"], owner["pid"], 0.0,
                               submit_pid=supervisor_pid + 1))  # fmt: skip
    jobs.heartbeats.beat(JOB, token, 60_000, host=owner["host"], pid=supervisor_pid, child=supervisor_pid + 1,
                         first=True)  # fmt: skip
    return lease


def cli(redis_url: str, namespace: str, *args: str) -> None:
    main(["--redis-url", redis_url, "--namespace", namespace, *args])


def test_a_killed_tasks_job_says_its_process_is_gone_and_its_supervisor_still_runs_spark(
    jobs, redis_url, namespace, supervisor, capsys
):
    owner = killed_task()
    crash(jobs, owner, supervisor.pid)

    doc = job_json(inspect_job(jobs, JOB))
    now = doc["holder_state"]
    assert now["state"] == "task_gone" and now["seen_gone"] is True, now
    assert (now["task_pid"], now["supervisor_pid"], now["submit_pid"]) == (owner["pid"], supervisor.pid,
                                                                           supervisor.pid + 1)  # fmt: skip
    assert f"its task process (pid {owner['pid']} on host {owner['host']}) is gone" in now["text"]
    assert f"its supervisor (pid {supervisor.pid} on host {owner['host']}) still runs spark-submit" in now["text"]
    assert 55 < now["expires_in_s"] <= 60 and f"The lease expires in {now['expires_in_s']:g} s" in now["next"]
    assert "The task's retry takes it over at once" in now["next"] and "adopts its output" in now["next"]
    assert doc["streaming"] is False, "a batch job: the page offers no stream's stop"

    cli(redis_url, namespace, "show", JOB)
    shown = capsys.readouterr().out
    assert "the job is running" not in shown and "no result yet: its task process is gone" in shown, shown
    assert f"now: Try 1 of v.t (run r1) holds the lease, but its task process (pid {owner['pid']}" in shown

    cli(redis_url, namespace, "--json", "intents")
    (listed,) = json.loads(capsys.readouterr().out)["intents"]
    assert listed["holder_state"]["state"] == "task_gone"
    assert listed["verdict"].startswith(f"task process gone, its supervisor (pid {supervisor.pid}) still runs Spark")
    assert "running: its attempt holds the lease" not in listed["verdict"]


def test_from_another_host_a_holder_silent_for_half_its_ttl_reads_as_gone_not_running(jobs, supervisor):
    """The API server cannot see a worker's processes: a lease not renewed for half its TTL (a
    live task renews every third of it) tells it, on the Redis server's clock."""
    owner = {**killed_task(), "host": "worker-2"}
    crash(jobs, owner, supervisor.pid)
    assert job_json(inspect_job(jobs, JOB))["holder_state"]["state"] == "running", "renewed just now: running"

    jobs.client.pexpire(KeySpace(jobs.namespace).lease(JOB), 25_000)  # 35 s without a renewal
    now = job_json(inspect_job(jobs, JOB))["holder_state"]
    assert now["state"] == "task_gone" and now["seen_gone"] is False and 35 <= now["silent_s"] < 36, now
    assert "has not renewed the lease for 35 s (a live task renews it every 20 s)" in now["text"], now["text"]


def test_a_live_holder_still_reads_as_running(jobs, redis_url, namespace, supervisor, capsys):
    crash(jobs, default_owner(**TRY_1), supervisor.pid)  # this test's own process: alive
    now = job_json(inspect_job(jobs, JOB))["holder_state"]
    assert now["state"] == "running" and now["text"].startswith("Try 1 of v.t (run r1) holds the lease"), now
    cli(redis_url, namespace, "intents")
    assert "running: its attempt holds the lease" in capsys.readouterr().out
