"""The store, the lease and the sensor's trigger on a real Redis Cluster (3 primaries, 3 replicas).

The store contract suite runs against the cluster too (``tests/contract``, backend
``redis-cluster``); these tests add what only a cluster has: namespaces spread over primaries,
leases and the trigger through a cluster client, and a primary lost mid-write.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid

import pytest
import redis

from airflow_jrs.exceptions import LeaseHeldError, LeaseLostError
from airflow_jrs.hooks.jrs import async_connection_kwargs
from airflow_jrs.store import JobResult, JobStatus, RedisJobResultStore
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.leases import RedisJobLease
from airflow_jrs.triggers import JobResultTrigger

pytestmark = pytest.mark.cluster


@pytest.fixture
def cluster_client(redis_cluster):
    client = redis_cluster.client()
    yield client
    client.close()


def namespaces_on_two_primaries(cluster) -> tuple[str, str]:
    """Two fresh namespaces whose keys (one hash slot each) live on different primaries."""
    first = f"t-{uuid.uuid4().hex[:12]}"
    port = cluster.primary_for(KeySpace(first).dirty).port
    for _ in range(100):
        other = f"t-{uuid.uuid4().hex[:12]}"
        if cluster.primary_for(KeySpace(other).dirty).port != port:
            return first, other
    raise AssertionError("100 namespaces all hashed to one primary")


def test_each_namespace_lives_on_one_primary_and_namespaces_spread_over_primaries(redis_cluster, cluster_client):
    ns_a, ns_b = namespaces_on_two_primaries(redis_cluster)
    for ns in (ns_a, ns_b):
        store = RedisJobResultStore(cluster_client, ns)
        store.create_dirty_result(JobResult(job_id="j.1", status=JobStatus.SUCCEEDED))
        store.create_dirty_result(JobResult(job_id="j.2", status=JobStatus.FAILED))
        store.mark_result_as_clean("j.1")
        keys = KeySpace(ns)
        slots = {cluster_client.keyslot(k) for k in (keys.result("j.1"), keys.dirty, keys.index, keys.history("j.2"))}
        assert len(slots) == 1  # one slot: each Lua script touches one node
        primary = redis.Redis(port=redis_cluster.primary_for(keys.dirty).port)
        assert primary.exists(keys.result("j.1"), keys.result("j.2"), keys.index) == 3
        primary.close()
    assert redis_cluster.primary_for(KeySpace(ns_a).dirty).port != redis_cluster.primary_for(KeySpace(ns_b).dirty).port


def test_lease_fences_and_revokes_through_a_cluster_client(cluster_client, namespace):
    store = RedisJobResultStore(cluster_client, namespace)
    first = RedisJobLease(cluster_client, namespace, "j.lease", ttl=30)
    token = first.acquire()
    with pytest.raises(LeaseHeldError):
        RedisJobLease(cluster_client, namespace, "j.lease", ttl=30).acquire()
    assert first.peek().fence == token and first.renew()
    assert first.revoke()  # on a fresh cluster client of its own
    second = RedisJobLease(cluster_client, namespace, "j.lease", ttl=30)
    fresh = second.acquire()  # the token and the second holder's nonce (a bare int is not its identity)
    assert int(fresh) == token + 1
    with pytest.raises(LeaseLostError):  # the first holder's fence is stale now
        store.create_dirty_result(JobResult(job_id="j.lease", status=JobStatus.SUCCEEDED), fence=token)
    store.create_dirty_result(JobResult(job_id="j.lease", status=JobStatus.SUCCEEDED), fence=fresh)
    assert store.get_entry("j.lease").result.fence == token + 1


def test_sensor_trigger_wakes_on_a_result_written_through_the_cluster(cluster_client, namespace):
    connection = async_connection_kwargs(cluster_client, "jrs_default")
    assert connection["cluster"] is True
    trigger = JobResultTrigger(connection=connection, namespace=namespace, job_ids=["j.wait"], poll_interval=300)
    store = RedisJobResultStore(cluster_client, namespace)
    events: list = []

    async def first_event():
        async for event in trigger.run():
            events.append(event)
            return

    runner = threading.Thread(target=lambda: asyncio.run(first_event()), daemon=True)
    runner.start()
    # Subscribed when the events channel has a subscriber on some node (PUBLISH reaches every node).
    deadline = time.monotonic() + 30
    while not any(
        redis.Redis(port=n.port).pubsub_numsub(KeySpace(namespace).events)[0][1] for n in trigger_nodes(cluster_client)
    ):
        assert time.monotonic() < deadline, "the trigger never subscribed"
        time.sleep(0.05)
    store.create_dirty_result(JobResult(job_id="j.wait", status=JobStatus.SUCCEEDED))
    runner.join(60)  # a 300 s poll interval: only the notification can end the wait this soon
    assert events and events[0].payload["status"] == "success"
    assert events[0].payload["results"][0]["job_id"] == "j.wait"


def trigger_nodes(client: redis.RedisCluster) -> list:
    return client.get_nodes()


def test_a_url_with_cluster_true_reaches_the_cluster_as_the_connection_does(redis_cluster, namespace, capsys):
    """``--redis-url`` and ``JobNamespace.from_url`` take the connection's spelling: ``cluster=true``
    makes a cluster client (redis-py's own URL parser passes it on to a plain connection, which
    fails at the first command)."""
    from airflow_jrs.cli import main
    from airflow_jrs.store.redis.clients import client_from_url

    url = f"{redis_cluster.url}?cluster=true"
    client = client_from_url(url)
    try:
        assert isinstance(client, redis.RedisCluster) and client.ping()
    finally:
        client.close()
    main(["--redis-url", url, "--namespace", namespace, "--json", "list"])  # an empty namespace: exit 1
    answer = json.loads(capsys.readouterr().out)
    assert answer["entries"] == [] and answer["namespace_empty"] is True and answer["namespace"] == namespace
