"""A lease's identity cannot repeat, against a real Redis.

A lost increment: a Redis failover that loses the INCR of the namespace's fence counter (or an
``appendfsync everysec`` crash) hands the same fencing token to two attempts. The token alone
cannot tell them apart; the owner nonce each lease carries can, and every fenced script checks it.

A lost reply: a reply to ACQUIRE or TAKE_OVER lost on the wire makes redis-py send the command
again; the retry must recognise the lease it already took, not wait a TTL for "another attempt".
"""

from __future__ import annotations

import copy
import json
import re
import time
from urllib.parse import urlparse

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from airflow_jrs.domain.paths import fence_name, fence_token_of, spec_path, staging_path
from airflow_jrs.exceptions import LeaseHeldError, LeaseLostError, StaleHeartbeat
from airflow_jrs.store import JobResult, JobStatus, RedisJobResultStore
from airflow_jrs.store.intents import Intent, IntentStore
from airflow_jrs.store.leases.fence import Fence, fence_arg
from airflow_jrs.store.redis import lease_scripts
from airflow_jrs.store.redis.heartbeats import RedisHeartbeats
from airflow_jrs.store.redis.intents import RedisIntentStore
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.leases import RedisJobLease
from jrs_testbench.lossy_proxy import LossyProxy

JOB = "dag.task.2013-01-01"


def lose_the_lease_and_the_incr(client: redis.Redis, namespace: str, token: int) -> None:
    """What a failover to a replica that missed the last writes leaves: the lease key is gone
    and the namespace's fence counter is back where it was before ``token`` was handed out."""
    keys = KeySpace(namespace)
    client.delete(keys.lease(JOB))
    client.set(keys.fence_counter, token - 1)


def intent_of(intents: IntentStore, fence: int) -> Intent:
    return Intent(
        job_id=JOB, fence=fence, spec_uri=intents.spec_uri(JOB, fence), staging=f"/out/{JOB}/x",
        app_name="jrs-app", host="worker-1", pid=4242, started_at=time.time(),
    )  # fmt: skip


def test_a_reissued_token_does_not_let_the_stale_holder_renew_write_or_beat(
    redis_client: redis.Redis, namespace: str, tmp_path
) -> None:
    stale = RedisJobLease(redis_client, namespace, JOB, ttl=30)
    token = int(stale.acquire())  # the bare token; the fence (token and nonce) is stale.token
    stale_fence = stale.token
    beats = RedisHeartbeats(redis_client, namespace)
    beats.beat(JOB, stale_fence, 30_000, host="a", pid=1, child=0, first=True)  # its supervisor runs

    lose_the_lease_and_the_incr(redis_client, namespace, token)
    fresh = RedisJobLease(redis_client, namespace, JOB, ttl=30)
    assert int(fresh.acquire()) == token  # the same token, handed out twice: two holders, unequal fences
    fresh_fence = fresh.token
    assert fresh_fence != stale_fence and len({stale_fence, fresh_fence}) == 2

    # the fresh holder's supervisor starts; the stale one's next beat is refused
    beats.beat(JOB, fresh_fence, 30_000, host="b", pid=2, child=0, first=True)
    with pytest.raises(StaleHeartbeat):
        beats.beat(JOB, stale_fence, 30_000, host="a", pid=1, child=11)
    with pytest.raises(StaleHeartbeat):  # nor may a stale first beat start a second copy
        beats.beat(JOB, stale_fence, 30_000, host="a", pid=1, child=0, first=True)

    store = RedisJobResultStore(redis_client, namespace)
    with pytest.raises(LeaseLostError, match="no longer holds the lease"):
        store.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.SUCCEEDED), fence=stale_fence)
    intents = RedisIntentStore(redis_client, namespace, str(tmp_path / "specs"))
    with pytest.raises(LeaseLostError):
        intents.update(intent_of(intents, stale_fence))
    assert stale.renew() is False and stale.lost.is_set()
    with pytest.raises(LeaseLostError):
        stale.check()
    assert stale.release() is False  # and it cannot free the fresh holder's lease

    # the two attempts never share a staging folder or a spec
    assert staging_path("/out", namespace, JOB, stale_fence) != staging_path("/out", namespace, JOB, fresh_fence)
    assert spec_path("/specs", namespace, JOB, stale_fence) != spec_path("/specs", namespace, JOB, fresh_fence)

    # the fresh holder works on, and users still see the integer fence
    assert fresh.renew() is True
    intents.update(intent_of(intents, fresh_fence))
    entry = store.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.SUCCEEDED), fence=fresh_fence)
    assert entry.result.fence == token and type(store.get_entry(JOB).result.fence) is int
    assert fresh.release() is True


def test_the_stale_holder_cannot_clear_or_amend_or_be_taken_over_for_the_fresh_one(
    redis_client: redis.Redis, namespace: str, tmp_path
) -> None:
    stale = RedisJobLease(redis_client, namespace, JOB, ttl=30)
    token = int(stale.acquire())
    successor = RedisJobLease(redis_client, namespace, JOB, ttl=30)
    judged_dead = successor.peek()  # a successor judges the stale holder dead (its pid is gone)
    assert judged_dead is not None and judged_dead.fence == stale.token
    lose_the_lease_and_the_incr(redis_client, namespace, token)
    fresh = RedisJobLease(redis_client, namespace, JOB, ttl=30)
    assert int(fresh.acquire()) == token and fresh.token != stale.token  # the token again, another holder
    intents = RedisIntentStore(redis_client, namespace, str(tmp_path / "specs"))
    intents.update(intent_of(intents, fresh.token))
    with pytest.raises(LeaseLostError):
        intents.clear(JOB, stale.token)
    with pytest.raises(LeaseLostError):
        intents.amend(intent_of(intents, stale.token))
    assert intents.get(JOB) is not None
    # the verdict was about the stale holder: it must not take the fresh holder's lease away
    with pytest.raises(LeaseHeldError):
        successor.take_over(judged_dead)
    assert fresh.renew() is True


@pytest.fixture
def lossy(redis_url: str):
    url = urlparse(redis_url)
    with LossyProxy(url.hostname or "127.0.0.1", url.port or 6379) as proxy:
        client = redis.Redis(port=proxy.port, retry=Retry(NoBackoff(), 3))
        client.ping()  # connect before a reply is lost
        for script in (lease_scripts.ACQUIRE_LEASE, lease_scripts.TAKE_OVER_LEASE):
            client.script_load(script)  # so that the lost reply is the script's, not a NOSCRIPT
        yield proxy, client
        client.close()


def test_a_lost_reply_to_acquire_is_retried_into_the_lease_it_took(lossy, namespace: str) -> None:
    proxy, client = lossy
    lease = RedisJobLease(client, namespace, JOB, ttl=30)
    proxy.drop_next_reply()
    token = lease.acquire()  # before the fix: LeaseHeldError naming this very attempt
    assert proxy.dropped == 1
    holder = lease.peek()
    assert holder is not None and holder.fence == token and holder.nonce == lease.nonce
    assert lease.renew() is True and lease.release() is True


def test_a_lost_reply_to_take_over_is_retried_into_the_lease_it_took(lossy, namespace: str) -> None:
    proxy, client = lossy
    dead = RedisJobLease(client, namespace, JOB, ttl=30)
    dead.acquire()
    successor = RedisJobLease(client, namespace, JOB, ttl=30)
    holder = successor.peek()
    assert holder is not None
    proxy.drop_next_reply()
    token = successor.take_over(holder)  # before the fix: LeaseHeldError naming the successor itself
    assert proxy.dropped == 1
    assert token is not None and token > holder.token
    assert successor.renew() is True and dead.renew() is False


def test_users_see_the_integer_token_while_the_nonce_travels_with_the_fence(
    redis_client: redis.Redis, namespace: str, tmp_path
) -> None:
    lease = RedisJobLease(redis_client, namespace, JOB, ttl=30)
    fence = lease.acquire()
    assert re.fullmatch(r"[0-9a-f]{16}", lease.nonce) and fence.nonce == lease.nonce
    assert f"fence {fence}" == f"fence {int(fence)}" and json.dumps({"fence": fence}) == f'{{"fence": {int(fence)}}}'
    assert copy.deepcopy(fence).nonce == fence.nonce and Fence.parse(fence.identity) == fence
    assert fence.identity == f"{int(fence)}:{lease.nonce}" and fence_arg(None) == "" and fence_arg(5) == "5"
    # the staging folder and the spec carry the nonce; readers find the token in old and new names
    name = fence_name(fence)
    assert name == f"fence-{int(fence)}-{lease.nonce}" and fence_name(5) == "fence-5"
    assert [fence_token_of(n) for n in (name, f"{name}.json", "fence-5", "stream", "fence-x")] == [
        int(fence), int(fence), 5, None, None,
    ]  # fmt: skip
    # an intent keeps it, so a successor addresses this attempt and no other holder of its token
    intents = RedisIntentStore(redis_client, namespace, str(tmp_path / "specs"))
    intents.record(intent_of(intents, fence), {"application": "app.py"})
    read = intents.get(JOB)
    assert read is not None and read.fence == fence and read.fence.nonce == lease.nonce  # type: ignore[attr-defined]
    assert json.loads(redis_client.get(KeySpace(namespace).intent(JOB)))["fence"] == int(fence)
    assert intents.live_fences(JOB) == {name}
    lease.release()
