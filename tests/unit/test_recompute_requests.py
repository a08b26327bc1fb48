"""When a run's recompute request first met a job (:mod:`airflow_jrs.store.recompute_requests`). Real Redis."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from datetime import UTC, datetime

import redis.asyncio as aioredis

from airflow_jrs.domain.recompute import Request, RequestSeen, Verdict, verdict
from airflow_jrs.store import JobResult, JobResultEntry, JobStatus, RedisJobResultStore
from airflow_jrs.store.leases.lease import JobLease
from airflow_jrs.store.recompute_requests import REQUEST_TTL
from airflow_jrs.store.redis import results as store_redis
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.leases import RedisJobLease
from airflow_jrs.store.redis.recompute_requests import RedisRecomputeRequests, seen_async

JOB = "d.t.2013-01-01"
T0 = datetime(2024, 3, 1, tzinfo=UTC)


def test_the_key_is_pinned():
    assert KeySpace("prod").recompute_requests(JOB) == "jrs:{prod}:recompute:d.t.2013-01-01"


def test_the_first_meeting_wins_and_expires_with_a_ttl(redis_url, namespace):
    store = RedisJobResultStore(redis_url, namespace)
    requests = RedisRecomputeRequests(store.client, namespace)
    assert requests.seen(JOB, "run-1") is None
    first = requests.first_seen(JOB, "run-1")
    RedisJobLease(store.client, namespace, "d.t.other").acquire()  # the namespace's counter moves on
    assert requests.first_seen(JOB, "run-1") == first  # a retry: the mark never moves
    second = requests.first_seen(JOB, "run-2")
    assert (first.fence, second.fence) == (0, 1) and first.at <= second.at
    assert requests.seen(JOB, "run-1") == first
    assert 0 < store.client.ttl(store.keys.recompute_requests(JOB)) <= REQUEST_TTL

    async def read() -> RequestSeen | None:
        client = aioredis.Redis.from_url(redis_url)
        try:
            return await seen_async(client, namespace, JOB, "run-2")
        finally:
            await client.aclose()

    assert asyncio.run(read()) == second  # the triggerer reads the same


def test_the_mark_is_the_fence_counter_the_lease_in_flight_and_the_servers_time(redis_url, namespace):
    """Pinned literally: what the worker, the triggerer and ``plan`` of any host read back."""
    store = RedisJobResultStore(redis_url, namespace)
    RedisJobLease(store.client, namespace, "d.t.other").acquire()
    m = RedisJobLease(store.client, namespace, JOB)
    m.acquire()
    seconds, micros = store.client.time()
    before = seconds * 1000 + micros // 1000
    seen = RedisRecomputeRequests(store.client, namespace).first_seen(JOB, "run-1")
    doc = json.loads(store.client.hget(f"jrs:{{{namespace}}}:recompute:{JOB}", "run-1"))
    assert (doc["fence"], doc["in_flight"]) == (2, 2) == (seen.fence, seen.in_flight)
    seconds, micros = store.client.time()
    assert before <= doc["at_ms"] <= seconds * 1000 + micros // 1000  # Redis TIME, not this host's clock
    assert seen.at == datetime.fromtimestamp(doc["at_ms"] / 1000, tz=UTC)


def test_an_unreadable_mark_counts_as_not_seen_and_is_replaced_so_the_request_acts_once(redis_url, namespace):
    store = RedisJobResultStore(redis_url, namespace)
    store.client.hset(store.keys.recompute_requests(JOB), "run-1", "garbage")
    store.client.hset(store.keys.recompute_requests(JOB), "run-2", T0.isoformat())  # a draft's time-only row
    requests = RedisRecomputeRequests(store.client, namespace)
    assert requests.seen(JOB, "run-1") is None
    first = requests.first_seen(JOB, "run-1")
    assert first.fence == 0 and requests.first_seen(JOB, "run-1") == first == requests.seen(JOB, "run-1")
    assert requests.seen(JOB, "run-2") is None and requests.first_seen(JOB, "run-2").fence == 0


# -- finding 7: the request is ordered by fences, not by two hosts' clocks ----------------------
#: A created_at far before any request: the writer's clock is slow (or the requester's fast).
SKEWED = datetime(2000, 1, 1, tzinfo=UTC)


def _skewed(entry: JobResultEntry) -> JobResultEntry:
    """The stored entry as a host with a slow clock would have stamped it."""
    return replace(entry, created_at=SKEWED)


def _request_verdict(store: RedisJobResultStore, namespace: str, request_key: str) -> Verdict:
    seen = RedisRecomputeRequests(store.client, namespace).seen(JOB, request_key)
    entry = _skewed(store.get_entry(JOB))
    return verdict(Request(everything=True), task_id="t", job_id=JOB, entry=entry, first_seen=seen)


def _commit(store: RedisJobResultStore, namespace: str, lease: JobLease | None = None) -> None:
    lease = lease or RedisJobLease(store.client, namespace, JOB)
    if lease.token is None:
        lease.acquire()
    store.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.SUCCEEDED), fence=lease.token)
    lease.release()


def test_a_result_fenced_after_the_request_meets_it_whatever_the_clocks_say(redis_url, namespace):
    """The requesting host's clock runs fast (or the writer's slow): the result's created_at is
    before the recorded request, but its lease was taken after the request met the job, so the
    request is met; a retry of the run must not recompute a second time."""
    store = RedisJobResultStore(redis_url, namespace)
    _commit(store, namespace)  # the result the request is about
    RedisRecomputeRequests(store.client, namespace).first_seen(JOB, "run-1")
    assert _request_verdict(store, namespace, "run-1").recompute is True  # not met yet: acts
    store.forget_result(JOB)
    _commit(store, namespace)  # the recompute, stamped by a host whose clock is behind
    found = _request_verdict(store, namespace, "run-1")
    assert found.recompute is False, found.reason
    assert "met already" in found.reason


def test_a_result_the_request_met_in_flight_meets_it_one_finished_before_does_not(redis_url, namespace):
    """A recompute request acts once: run S meets its request while run M computes the job; M's result, written
    after the request, meets it, even when M's host stamps it with an earlier time. A result
    whose lease was taken and released before the request does not, even when stamped later."""
    store = RedisJobResultStore(redis_url, namespace)
    m = RedisJobLease(store.client, namespace, JOB)
    m.acquire()
    RedisRecomputeRequests(store.client, namespace).first_seen(JOB, "run-s")
    _commit(store, namespace, m)
    assert _request_verdict(store, namespace, "run-s").recompute is False

    store.forget_result(JOB)
    _commit(store, namespace)  # finished before run-t's request
    RedisRecomputeRequests(store.client, namespace).first_seen(JOB, "run-t")
    entry = replace(store.get_entry(JOB), created_at=datetime(2999, 1, 1, tzinfo=UTC))  # a fast writer clock
    seen = RedisRecomputeRequests(store.client, namespace).seen(JOB, "run-t")
    assert verdict(Request(everything=True), task_id="t", job_id=JOB, entry=entry, first_seen=seen).recompute


def _server_time(store: RedisJobResultStore) -> datetime:
    seconds, micros = store.client.time()
    return datetime.fromtimestamp(seconds, tz=UTC).replace(microsecond=micros)


def test_a_results_creation_time_is_the_servers_clock_not_the_writers(redis_url, namespace, monkeypatch):
    """``jrs_recompute_at`` is compared with ``created_at``: both sides of that comparison must not
    depend on which host wrote the result. A writer whose clock is decades slow still stamps the
    server's time."""
    store = RedisJobResultStore(redis_url, namespace)
    monkeypatch.setattr(store_redis, "utcnow", lambda: SKEWED)  # the writer's clock
    before = _server_time(store).replace(microsecond=0)
    created = store.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.SUCCEEDED)).created_at
    after = _server_time(store)
    assert created is not None and before <= created <= after, created
    assert store.get_entry(JOB).created_at == created
