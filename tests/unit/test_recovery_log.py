"""The job's recovery log (store/recoveries.py) and how show, its JSON and the job view read it.

Real Redis; the end-to-end take-over that writes it through the product is in
tests/e2e/test_crash_ends_the_try.py.
"""

from __future__ import annotations

import json

import pytest

from airflow_jrs.cli import main
from airflow_jrs.settings import settings_for
from airflow_jrs.store.leases.fence import Fence
from airflow_jrs.store.recoveries import ADOPTED, FOUND, RECOVERY_LIMIT, RECOVERY_TTL, RecoveryStep
from airflow_jrs.store.redis.namespace import RedisJobNamespace
from airflow_jrs.views.job import inspect_job
from airflow_jrs.views.json import job_json

JOB = "d.t.2013-01-01"


@pytest.fixture
def jobs(redis_url, namespace, tmp_path):
    jobs = RedisJobNamespace.from_url(
        redis_url, settings_for(namespace, output_root=str(tmp_path), spec_root=str(tmp_path))
    )
    yield jobs
    jobs.close()


def test_only_the_lease_holder_records_newest_first_bounded_and_expiring(jobs, namespace):
    lease = jobs.lease(JOB, ttl=30)
    token = lease.acquire()
    log = jobs.recoveries
    assert log.record(JOB, token, RecoveryStep(FOUND, "found the intent of try 1", predecessor=3))
    assert not log.record(JOB, Fence(int(token), "0" * 16), RecoveryStep(ADOPTED, "an impostor"))  # same token
    assert [(s.event, s.fence, s.predecessor) for s in log.get(JOB)] == [(FOUND, int(token), 3)]
    for n in range(RECOVERY_LIMIT + 3):
        log.record(JOB, token, RecoveryStep(ADOPTED, f"step {n}"))
    steps = log.get(JOB)
    assert len(steps) == RECOVERY_LIMIT and steps[0].text == f"step {RECOVERY_LIMIT + 2}"
    assert steps[0].at is not None and steps[-1].at is not None and steps[0].at >= steps[-1].at
    key = f"jrs:{{{namespace}}}:recoveries:{JOB}"  # the literal, pinned
    raw = jobs.client.lindex(key, 0)
    assert json.loads(raw)["v"] == 1 and 0 < jobs.client.ttl(key) <= RECOVERY_TTL
    lease.release()
    assert not log.record(JOB, token, RecoveryStep(ADOPTED, "after release"))


def test_show_its_json_and_the_job_view_list_the_recovery_steps(jobs, redis_url, namespace, capsys):
    lease = jobs.lease(JOB, ttl=30)
    token = lease.acquire()
    jobs.recoveries.record(JOB, token, RecoveryStep(FOUND, "found the intent of try 1 of d.t", predecessor=7))
    jobs.recoveries.record(JOB, token, RecoveryStep(ADOPTED, "adopted local-1700000000000", predecessor=7))
    jobs.client.lpush(jobs.recoveries.keys.recoveries(JOB), b"{not json")
    doc = job_json(inspect_job(jobs, JOB))
    assert [r["event"] for r in doc["recoveries"]] == ["unreadable", ADOPTED, FOUND]  # shown, never hidden
    assert doc["recoveries"][1]["predecessor"] == 7 and doc["recoveries"][1]["at"]
    base = ["--redis-url", redis_url, "--namespace", namespace]
    main([*base, "show", JOB])
    out = capsys.readouterr().out
    assert "Recoveries" in out and "adopted local-1700000000000" in out and "found the intent of try 1" in out
    main([*base, "show", "--json", JOB])
    assert json.loads(capsys.readouterr().out)["recoveries"][1]["text"] == "adopted local-1700000000000"


def test_show_says_a_finished_heartbeat_ended_with_its_exit_code_not_the_time_left(jobs, redis_url, namespace, capsys):
    """A finished job's heartbeat said "ended, 3467.9s left": an ended one has no time left."""
    token = jobs.lease(JOB, ttl=30).acquire()
    jobs.heartbeats.beat(JOB, token, 30_000, host="h", pid=1, child=0, first=True)
    base = ["--redis-url", redis_url, "--namespace", namespace]
    main([*base, "show", JOB])
    running = [line for line in capsys.readouterr().out.splitlines() if line.startswith("heartbeat:")]
    assert running and "running" in running[0] and "s left" in running[0]
    jobs.heartbeats.end(JOB, token, 3)
    main([*base, "show", JOB])
    ended = [line for line in capsys.readouterr().out.splitlines() if line.startswith("heartbeat:")]
    assert ended and "ended with exit code 3" in ended[0] and "left" not in ended[0], ended
