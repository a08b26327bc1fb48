"""JobResultTrigger against a real Redis: serialization, wake-ups, fail-fast, restarts.

Each test runs the trigger the way the triggerer does (iterate ``run()`` for one event, then
close the generator) in ``asyncio.run``; writes happen from a thread, as from another process.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from airflow_jrs.domain.model import utcnow
from airflow_jrs.store import EntryState, JobResult, JobStatus, RedisJobResultStore
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.results.serde import encode_entry
from airflow_jrs.triggers import JobResultTrigger
from jrs_testbench.redis_server import EmbeddedRedis

JOB = "dag.task.2013-01-01"


def connection_of(url: str) -> dict[str, Any]:
    kwargs = redis.Redis.from_url(url).connection_pool.connection_kwargs
    return {"host": kwargs["host"], "port": kwargs["port"], "db": kwargs.get("db", 0)}


def make_trigger(url: str, namespace: str, **kwargs: Any) -> JobResultTrigger:
    kwargs.setdefault("job_ids", [JOB])
    kwargs.setdefault("poll_interval", 60.0)
    return JobResultTrigger(connection=connection_of(url), namespace=namespace, **kwargs)


def subscribers(client: redis.Redis, namespace: str) -> int:
    return int(client.pubsub_numsub(KeySpace(namespace).events)[0][1])


def wait_subscribed(client: redis.Redis, namespace: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if subscribers(client, namespace) >= 1:
                return
        except redis.exceptions.ConnectionError:
            pass
        assert time.monotonic() < deadline, "the trigger never subscribed"
        time.sleep(0.005)


def first_event(trigger: JobResultTrigger, meanwhile: Callable[[], None] | None = None, timeout: float = 10.0):
    """The trigger's first event; ``meanwhile`` runs in a thread while the trigger waits."""

    async def consume() -> Any:
        gen = trigger.run()
        try:
            return await anext(gen)
        finally:
            await gen.aclose()

    async def main() -> Any:
        task = asyncio.create_task(consume())
        if meanwhile is not None:
            await asyncio.to_thread(meanwhile)
        return await asyncio.wait_for(task, timeout)

    return asyncio.run(main())


def succeeded(job_id: str = JOB, **kwargs: Any) -> JobResult:
    return JobResult(job_id=job_id, status=JobStatus.SUCCEEDED, outputs={"out": f"/data/{job_id}"}, **kwargs)


def test_serialize_round_trip_re_instantiates_an_equal_trigger_through_airflow_serde(redis_url, namespace):
    from airflow.providers.common.compat.module_loading import import_string

    try:  # Airflow 3.2+
        from airflow.sdk.serde import deserialize, serialize
    except ImportError:  # Airflow 3.1
        from airflow.serialization.serde import deserialize, serialize  # type: ignore[no-redef]

    trigger = make_trigger(
        redis_url,
        namespace,
        job_ids=[JOB, "other"],
        target_state="clean",
        statuses=["SUCCEEDED", "STOPPED"],
        fail_on_unsuccessful=False,
        poll_interval=5,
    )
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_jrs.triggers.job_result.JobResultTrigger"
    json.dumps(kwargs)  # plain JSON: nothing the triggerer could fail to load
    again = import_string(classpath)(**deserialize(serialize(kwargs)))
    assert again.serialize() == (classpath, kwargs)
    assert kwargs["target_state"] == "clean" and kwargs["statuses"] == ["SUCCEEDED", "STOPPED"]


def test_invalid_arguments_are_refused_with_what_to_use(redis_url, namespace):
    with pytest.raises(ValueError, match="target_state 'done' is not one of"):
        make_trigger(redis_url, namespace, target_state="done")
    with pytest.raises(ValueError, match="statuses"):
        make_trigger(redis_url, namespace, statuses=["OK"])
    with pytest.raises(ValueError, match="not supported"):
        JobResultTrigger(connection={"url": redis_url}, namespace=namespace, job_ids=[JOB])


def test_wakes_on_create_without_waiting_for_the_poll_interval(redis_url, redis_client, namespace):
    store = RedisJobResultStore(redis_url, namespace)
    trigger = make_trigger(redis_url, namespace, poll_interval=60)
    # Write only after the trigger's first read found nothing: a write between SUBSCRIBE and
    # that read would be found by the read, and the notification would go untested.
    first_read_empty = threading.Event()
    real_check = trigger._check

    async def check(client: Any) -> Any:
        payload = await real_check(client)
        if payload is None:
            first_read_empty.set()
        return payload

    trigger._check = check  # type: ignore[method-assign]

    def create() -> None:
        assert first_read_empty.wait(10), "the trigger never read the store"
        store.create_dirty_result(succeeded(application_id="local-1"))

    # poll_interval 60 s against first_event's 10 s: only the notification can wake it in time
    event = first_event(trigger, create)
    assert event.payload["status"] == "success"
    [result] = event.payload["results"]
    assert result["job_id"] == JOB and result["state"] == "dirty" and result["status"] == "SUCCEEDED"
    assert result["outputs"] == {"out": f"/data/{JOB}"} and result["application_id"] == "local-1"


def test_result_already_present_yields_at_once(redis_url, namespace):
    RedisJobResultStore(redis_url, namespace).create_dirty_result(succeeded())
    # poll_interval 60 s against first_event's 10 s: the read after SUBSCRIBE must find it
    event = first_event(make_trigger(redis_url, namespace, poll_interval=60))
    assert event.payload["status"] == "success"


def test_failed_result_yields_a_failure_event_naming_the_job(redis_url, redis_client, namespace):
    store = RedisJobResultStore(redis_url, namespace)

    def fail() -> None:
        wait_subscribed(redis_client, namespace)
        store.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.FAILED, error="exit code 1"))

    event = first_event(make_trigger(redis_url, namespace, target_state="clean"), fail)
    assert event.payload["status"] == "failed"
    assert event.payload["job_id"] == JOB and event.payload["result"]["status"] == "FAILED"
    assert JOB in event.payload["message"] and "exit code 1" in event.payload["message"]


def test_without_fail_fast_a_failed_result_is_waited_through_until_a_success_supersedes_it(
    redis_url, redis_client, namespace
):
    store = RedisJobResultStore(redis_url, namespace)
    store.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.FAILED))

    def retry() -> None:
        wait_subscribed(redis_client, namespace)
        time.sleep(0.2)
        store.create_dirty_result(succeeded(), supersede=True)

    event = first_event(make_trigger(redis_url, namespace, fail_on_unsuccessful=False), retry)
    assert event.payload["status"] == "success"
    assert event.payload["results"][0]["status"] == "SUCCEEDED"


def test_clean_target_waits_through_dirty_until_clean(redis_url, redis_client, namespace):
    store = RedisJobResultStore(redis_url, namespace)
    seen_before_clean: list[bool] = []

    async def scenario() -> Any:
        gen = make_trigger(redis_url, namespace, target_state="clean").run()
        task = asyncio.create_task(anext(gen))
        try:
            await asyncio.to_thread(wait_subscribed, redis_client, namespace)
            await asyncio.to_thread(store.create_dirty_result, succeeded())
            await asyncio.sleep(0.3)  # the created message arrived and was judged: not yet
            seen_before_clean.append(task.done())
            await asyncio.to_thread(store.mark_result_as_clean, JOB)
            return await asyncio.wait_for(task, 10)
        finally:
            await gen.aclose()

    event = asyncio.run(scenario())
    assert seen_before_clean == [False]
    assert event.payload["status"] == "success"
    assert event.payload["results"][0]["state"] == "clean"


def test_waits_for_every_job_and_returns_results_in_the_order_asked(redis_url, redis_client, namespace):
    store = RedisJobResultStore(redis_url, namespace)
    store.create_dirty_result(succeeded("b"))

    def create_a() -> None:
        wait_subscribed(redis_client, namespace)
        store.create_dirty_result(succeeded("a"))

    event = first_event(make_trigger(redis_url, namespace, job_ids=["a", "b"]), create_a)
    assert [r["job_id"] for r in event.payload["results"]] == ["a", "b"]


def test_corrupt_entry_yields_an_error_event_naming_the_key_and_is_quarantined(redis_url, redis_client, namespace):
    # The trigger reads through the async store, with the sync store's rules: a corrupt entry
    # is quarantined and reported, never taken for "missing".
    keys = KeySpace(namespace)
    redis_client.set(keys.result(JOB), b"\x80 not json")
    event = first_event(make_trigger(redis_url, namespace))
    assert event.payload["status"] == "error" and event.payload["job_id"] == JOB
    assert event.payload["error"] == "CorruptJobResultError"
    assert "corrupt" in event.payload["message"] and keys.quarantine(JOB) in event.payload["message"]
    assert redis_client.get(keys.result(JOB)) is None
    assert redis_client.get(keys.quarantine(JOB)) == b"\x80 not json"


def test_periodic_re_read_finds_a_result_whose_message_was_lost(redis_url, redis_client, namespace):
    """An entry written without a notification (a lost message) is found by the poll_interval re-read."""

    def write_silently() -> None:
        wait_subscribed(redis_client, namespace)
        raw = encode_entry(succeeded(), EntryState.DIRTY, utcnow())
        redis_client.set(KeySpace(namespace).result(JOB), raw)  # no PUBLISH

    event = first_event(make_trigger(redis_url, namespace, poll_interval=0.3), write_silently)
    assert event.payload["status"] == "success"


@pytest.fixture
def own_redis(tmp_path):
    with EmbeddedRedis(tmp_path / "restart") as server:
        yield server


@pytest.mark.parametrize("wait_for_resubscribe", [True, False], ids=["after-resubscribe", "before-resubscribe"])
def test_survives_a_redis_restart(own_redis, namespace, wait_for_resubscribe):
    """Restart Redis under a waiting trigger; the result written afterwards still wakes it.

    Written before the trigger re-subscribed, the message is lost: the re-read after the
    reconnect must find the entry (poll_interval is far too long to help).
    """
    client = redis.Redis.from_url(own_redis.url)
    trigger = make_trigger(own_redis.url, namespace, poll_interval=120, max_backoff=0.5)

    def restart_then_create() -> None:
        wait_subscribed(client, namespace)
        own_redis.restart()
        if wait_for_resubscribe:
            wait_subscribed(client, namespace)
        RedisJobResultStore(own_redis.url, namespace).create_dirty_result(succeeded())

    try:
        event = first_event(trigger, restart_then_create, timeout=30)
    finally:
        client.close()
    assert event.payload["status"] == "success"
    assert event.payload["results"][0]["job_id"] == JOB


def test_closes_its_connections_when_done(redis_url, redis_client, namespace):
    """The server drops a closed connection from CLIENT LIST on its own event-loop turn, so
    the count is awaited, not read once (CI saw 2 for a moment on a loaded machine). The
    trigger stays referenced meanwhile: a leaked client could not be rescued by the GC."""
    name = f"jrs-trigger:{namespace}"
    store = RedisJobResultStore(redis_url, namespace)
    while_waiting: list[int] = []

    def count(c: redis.Redis) -> int:
        return sum(1 for conn in c.client_list() if conn.get("name") == name)

    def create() -> None:
        wait_subscribed(redis_client, namespace)
        while_waiting.append(count(redis_client))
        store.create_dirty_result(succeeded())

    trigger = make_trigger(redis_url, namespace)
    assert first_event(trigger, create).payload["status"] == "success"
    assert while_waiting[0] >= 1
    deadline = time.monotonic() + 10.0
    while (left := count(redis_client)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert left == 0, f"{left} connection(s) of {trigger!r} still open 10 s after its event"


def test_sensor_hands_the_trigger_plain_connection_kwargs_with_credentials_and_tls():
    from airflow_jrs.hooks.jrs import async_connection_kwargs as trigger_connection_kwargs

    plain = redis.Redis(host="redis.internal", port=6380, db=3, username="jrs", password="s3cret")
    assert trigger_connection_kwargs(plain, "jrs_default") == {
        "host": "redis.internal",
        "port": 6380,
        "db": 3,
        "username": "jrs",
        "password": "s3cret",
    }
    tls = redis.Redis(host="redis.internal", ssl=True, ssl_cert_reqs="required", ssl_ca_certs="/ca.pem")
    kwargs = trigger_connection_kwargs(tls, "jrs_default")
    assert kwargs["ssl"] is True and kwargs["ssl_ca_certs"] == "/ca.pem" and kwargs["ssl_cert_reqs"] == "required"
    json.dumps(kwargs)
    JobResultTrigger(connection=kwargs, namespace="prod", job_ids=[JOB])  # accepted as they are


def test_refused_credentials_end_the_wait_with_an_error_instead_of_retrying_forever(own_redis, namespace):
    admin = redis.Redis.from_url(own_redis.url)
    admin.config_set("requirepass", "right")
    admin.close()
    trigger = make_trigger(own_redis.url, namespace)
    trigger.connection["password"] = "wrong"
    event = first_event(trigger, timeout=10)
    assert event.payload["status"] == "error"
    assert "refused" in event.payload["message"] and namespace in event.payload["message"]
