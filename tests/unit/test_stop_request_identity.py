"""A stop or cancel reaches the attempt it names, not another one holding the same token (after a
failover two attempts can), against a real Redis.

A failover that lost the fence counter's INCR hands token N to two attempts (A, then B; their
owner nonces differ). A's ``on_kill`` asks to cancel "its" attempt: it must not reach B, which
would record CANCELED and stay unrun. A person names the token the CLI shows: that still reaches
the attempt holding it.
"""

from __future__ import annotations

import itertools
import logging
import time

import redis

from airflow_jrs.protocol import JobNamespace, settings_for
from airflow_jrs.protocol.run import JobRun
from airflow_jrs.protocol.stopping import asked_to_end, cancel_on_kill
from airflow_jrs.spark.control import CANCEL, STOP
from airflow_jrs.store import Attempt
from airflow_jrs.store.intents import Intent
from airflow_jrs.store.leases.fence import Fence
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.namespace import RedisJobNamespace
from airflow_jrs.store.stop_requests import addresses

JOB = "dag.task.2013-01-01"


def lose_the_lease_and_its_writes(client: redis.Redis, namespace: str, token: int) -> None:
    """What a failover to a replica that missed A's last writes leaves: no lease, no intent, no
    heartbeat of A, and the fence counter back where it was before A's token was handed out."""
    keys = KeySpace(namespace)
    client.delete(keys.lease(JOB), keys.intent(JOB), keys.heartbeat(JOB))
    client.set(keys.fence_counter, token - 1)


def start(jobs: JobNamespace, host: str) -> JobRun:
    """An attempt that holds the lease, recorded its intent and whose supervisor beats."""
    lease = jobs.lease(JOB, ttl=30)
    fence = lease.acquire()
    intent = Intent(
        job_id=JOB, fence=fence, spec_uri=jobs.intents.spec_uri(JOB, fence), staging=f"/out/{JOB}/{host}",
        app_name="jrs-app", host=host, pid=4242, started_at=time.time(),
    )  # fmt: skip
    jobs.intents.record(intent, {"application": "app.py"})
    jobs.heartbeats.beat(JOB, fence, 30_000, host=host, pid=1, child=0, first=True)
    return JobRun(jobs, jobs.results, jobs.intents, lease, JOB, "fp", Attempt("d", "t", "r", 1), False, {"output": ""})


def beat(jobs: JobNamespace, run: JobRun) -> str | None:
    """What B's supervisor is told with its next beat."""
    return jobs.heartbeats.beat(JOB, run.lease.token, 30_000, host="b", pid=1, child=11)


def test_an_on_kill_of_one_attempt_never_cancels_another_holding_the_same_token(
    redis_url, redis_client, namespace, tmp_path
) -> None:
    settings = settings_for(namespace, output_root=str(tmp_path / "out"), spec_root=str(tmp_path / "specs"))
    jobs = RedisJobNamespace.from_url(redis_url, settings)
    try:
        a = start(jobs, "a")
        lose_the_lease_and_its_writes(redis_client, namespace, a.lease.token)
        b = start(jobs, "b")
        assert int(a.lease.token) == int(b.lease.token) and a.lease.token.nonce != b.lease.token.nonce

        # A's task is killed: its on_kill asks through the one stop path, with A's fence
        alive = itertools.chain([True], itertools.repeat(False)).__next__
        cancel_on_kill(a, a.lease.token, alive, logging.getLogger("test"))
        assert beat(jobs, b) is None, "A's on_kill reached B's supervisor"
        assert asked_to_end(b, b.lease.token) is None, "B would record CANCELED for A's kill"
        assert jobs.stop_requests.ask(JOB, a.lease.token, STOP, by="A's successor") is None

        # a person names the token the CLI shows: it reaches the attempt that holds it
        asked = jobs.stop_requests.ask(JOB, int(b.lease.token), CANCEL, by="airflow-jrs cancel")
        assert asked is not None and asked.fence.nonce is None
        assert beat(jobs, b) == CANCEL
        found = asked_to_end(b, b.lease.token)
        assert found is not None and found.by == "airflow-jrs cancel"

        # B's own on_kill names B whole, and B's supervisor obeys it
        redis_client.delete(KeySpace(namespace).control(JOB))
        cancel_on_kill(b, b.lease.token, itertools.chain([True], itertools.repeat(False)).__next__, logging.getLogger())
        assert beat(jobs, b) == CANCEL
        request = asked_to_end(b, b.lease.token)
        assert request is not None and request.by == "on_kill" and request.fence.identity == b.lease.token.identity
    finally:
        jobs.close()


def test_which_fences_a_request_addresses() -> None:
    a, b = Fence(7, "a1" * 8), Fence(7, "c3" * 8)
    assert addresses(a, a) and not addresses(a, b) and not addresses(b, a)
    assert addresses(7, a) and addresses(7, b) and addresses(a, 7)  # a person's token; an attempt without nonce
    assert not addresses(Fence(8, "a1" * 8), a) and not addresses(8, a)
