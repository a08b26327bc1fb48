"""JobNamespace: one object hands out a namespace's results, leases, intents and heartbeats, each
with the configured settings, also on the fresh client a signal handler writes through."""

from __future__ import annotations

import pytest
import redis

from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.protocol import settings_for
from airflow_jrs.store.redis.clients import connection_of
from airflow_jrs.store.redis.namespace import RedisJobNamespace


@pytest.fixture
def jobs(redis_url, namespace, tmp_path):
    settings = settings_for(
        namespace, output_root=str(tmp_path / "out"), spec_root=str(tmp_path / "specs"), durability="aof",
        index_limit=7, history_limit=3, lease_ttl=4.0,
    )  # fmt: skip
    jobs = RedisJobNamespace.from_url(redis_url, settings)
    yield jobs
    jobs.close()


def test_every_store_it_hands_out_has_the_configured_settings(jobs, namespace, tmp_path):
    results = jobs.results
    assert (results.namespace, results.index_limit, results.history_limit) == (namespace, 7, 3)
    assert str(results.durability) == "aof"
    assert jobs.intents.spec_root == str(tmp_path / "specs")
    assert jobs.lease("d.t.1", dag_id="d").ttl == 4.0
    assert jobs.heartbeats.namespace == namespace and jobs.stop_requests.namespace == namespace


def test_a_fresh_namespace_for_a_signal_handler_keeps_durability_and_limits_on_its_own_connection(jobs):
    """A STOPPED/CANCELED result written from on_kill once went through a store rebuilt by hand,
    without the configured durability and index limit (launch/streaming.py)."""
    jobs.results.ping()
    fresh = jobs.fresh()
    try:
        assert fresh.client is not jobs.client
        assert fresh.client.connection_pool is not jobs.client.connection_pool
        assert fresh.settings == jobs.settings
        assert (fresh.results.index_limit, str(fresh.results.durability)) == (7, "aof")
        fresh.results.ping()
    finally:
        fresh.close()
    jobs.results.ping()  # the original client is untouched


def test_the_connection_it_hands_a_supervisor_names_the_same_server(jobs, redis_url):
    assert jobs.connection is not None
    assert f"{jobs.connection['host']}:{jobs.connection['port']}" in redis_url


def test_a_namespace_handed_no_connection_takes_it_from_its_client_when_first_asked(redis_url, namespace, tmp_path):
    # what the hook builds (JrsHook.jobs): nothing looked up until a launch asks
    client = redis.Redis.from_url(redis_url)
    jobs = RedisJobNamespace(client, settings_for(namespace, output_root=str(tmp_path), spec_root=str(tmp_path)))
    try:
        assert jobs.connection is None
        handed = jobs.connection_kwargs()
        assert handed == connection_of(client, "the Redis URL")
        assert f"{handed['host']}:{handed['port']}" in redis_url
        assert jobs.connection == handed  # kept: the launcher's check and its supervisor see one value
        fresh = jobs.fresh()
        assert fresh.connection == handed
        fresh.close()
    finally:
        jobs.close()


def test_a_unix_socket_cannot_be_handed_on_and_the_error_names_where_the_client_came_from(namespace, tmp_path):
    client = redis.Redis(unix_socket_path=str(tmp_path / "redis.sock"))
    settings = settings_for(namespace, output_root=str(tmp_path), spec_root=str(tmp_path))
    jobs = RedisJobNamespace(client, settings, source="jrs connection 'prod'")
    with pytest.raises(JrsConfigError, match=r"^jrs connection 'prod' uses a Unix socket; .*Use a TCP address"):
        jobs.connection_kwargs()
    assert jobs.connection is None  # nothing that could be handed on was kept
