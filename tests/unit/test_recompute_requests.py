"""When a run's recompute request first met a job (:mod:`airflow_jrs.store.requests`). Real Redis."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import redis.asyncio as aioredis

from airflow_jrs.store import KeySpace, RedisJobResultStore
from airflow_jrs.store.requests import REQUEST_TTL, RecomputeRequests, seen_async

JOB = "d.t.2013-01-01"
T0 = datetime(2024, 3, 1, tzinfo=UTC)


def test_the_key_is_pinned():
    assert KeySpace("prod").recompute_requests(JOB) == "jrs:{prod}:recompute:d.t.2013-01-01"


def test_the_first_meeting_wins_and_expires_with_a_ttl(redis_url, namespace):
    store = RedisJobResultStore(redis_url, namespace)
    requests = RecomputeRequests(store.client, namespace)
    assert requests.seen(JOB, "run-1") is None
    assert requests.first_seen(JOB, "run-1", now=T0) == T0
    assert requests.first_seen(JOB, "run-1", now=T0 + timedelta(days=3)) == T0  # a retry: the time never moves
    assert requests.first_seen(JOB, "run-2", now=T0 + timedelta(days=3)) == T0 + timedelta(days=3)
    assert requests.seen(JOB, "run-1") == T0
    assert 0 < store.client.ttl(store.keys.recompute_requests(JOB)) <= REQUEST_TTL

    async def read() -> datetime | None:
        client = aioredis.Redis.from_url(redis_url)
        try:
            return await seen_async(client, namespace, JOB, "run-2")
        finally:
            await client.aclose()

    assert asyncio.run(read()) == T0 + timedelta(days=3)  # the triggerer reads the same


def test_an_unreadable_time_counts_as_not_seen_and_is_replaced_so_the_request_acts_once(redis_url, namespace):
    store = RedisJobResultStore(redis_url, namespace)
    store.client.hset(store.keys.recompute_requests(JOB), "run-1", "garbage")
    requests = RecomputeRequests(store.client, namespace)
    assert requests.seen(JOB, "run-1") is None
    assert requests.first_seen(JOB, "run-1", now=T0) == T0
    assert requests.first_seen(JOB, "run-1", now=T0 + timedelta(days=1)) == T0
