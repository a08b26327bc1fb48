"""One client policy for every client: a sync client, an async store and a trigger built for the
same ``[jrs]`` settings get the same connection kwargs and retries (policy_options is the one place
a client setting is named; a trigger carries it as one serialized value)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from airflow_jrs.hooks import jrs as hook_module
from airflow_jrs.hooks.jrs import JrsHook
from airflow_jrs.store.redis import clients
from airflow_jrs.triggers import JobResultTrigger

#: What the trigger sets for itself (it reconnects itself; a health check at its poll interval).
TRIGGER_OWN = {"health_check_interval", "socket_keepalive", "client_name"}


@pytest.fixture
def hook(monkeypatch, redis_url, namespace) -> JrsHook:
    monkeypatch.setenv("AIRFLOW_CONN_JRS_DEFAULT", f"{redis_url}?namespace={namespace}")
    monkeypatch.setenv("AIRFLOW__JRS__CONNECT_TIMEOUT", "3.5")
    monkeypatch.setenv("AIRFLOW__JRS__READ_TIMEOUT", "4.5")
    monkeypatch.setenv("AIRFLOW__JRS__RETRIES", "5")
    monkeypatch.setenv("AIRFLOW__JRS__RETRY_BACKOFF", "0.3")
    return JrsHook()


def with_new_field(monkeypatch, name: str, value: Any) -> None:
    """A new client setting, as a new row of the settings table would add it to policy_options."""
    original = clients.policy_options

    def policy_options(settings: Any) -> dict[str, Any]:
        return {**original(settings), name: value}

    monkeypatch.setattr(clients, "policy_options", policy_options)
    monkeypatch.setattr(hook_module, "policy_options", policy_options)


def connection_kwargs(client: Any) -> dict[str, Any]:
    return dict(client.connection_pool.connection_kwargs)


def retry_numbers(client: Any) -> tuple[int, float, float]:
    retry = client.get_retry()
    return retry._retries, retry._backoff._base, retry._backoff._cap


def trigger_client(hook: JrsHook) -> Any:
    """The client of a trigger the sensor would defer to, after the triggerer's round trip."""
    trigger = JobResultTrigger(
        connection=hook.async_connection_kwargs(),
        client_policy=hook.client_policy(),  # as the sensor defers: one value next to the connection
        namespace=hook.namespace,
        job_ids=["a.b.c"],
        poll_interval=5,
    )
    kwargs = json.loads(json.dumps(trigger.serialize()[1]))  # plain JSON through the triggerer
    return JobResultTrigger(**kwargs)._new_store().client


def test_the_policy_is_plain_json_and_names_the_settings(hook):
    policy = hook.client_policy()
    assert json.loads(json.dumps(policy)) == policy
    assert policy == {
        "socket_connect_timeout": 3.5,
        "socket_timeout": 4.5,
        "retries": 5,
        "retry_backoff": 0.3,
        "retry_backoff_max": 2.0,
    }


def test_sync_and_async_clients_of_the_same_settings_get_the_same_policy(hook):
    sync, store = hook.get_conn(), hook.get_async_store()
    try:
        keys = {k for k in hook.client_policy() if k not in ("retries", "retry_backoff", "retry_backoff_max")}
        assert {k: connection_kwargs(sync)[k] for k in keys} == {k: connection_kwargs(store.client)[k] for k in keys}
        assert retry_numbers(sync) == retry_numbers(store.client) == (5, 0.3, 2.0)
    finally:
        hook.close()
        asyncio.run(store.aclose())


def test_a_new_policy_field_reaches_sync_async_and_trigger_clients(hook, monkeypatch):
    with_new_field(monkeypatch, "encoding_errors", "replace")
    sync, store = hook.get_conn(), hook.get_async_store(client_name="x")
    client = trigger_client(hook)
    try:
        assert connection_kwargs(sync)["encoding_errors"] == "replace"
        assert connection_kwargs(store.client)["encoding_errors"] == "replace"
        assert connection_kwargs(client)["encoding_errors"] == "replace"
        shared = set(connection_kwargs(sync)) & set(connection_kwargs(client))
        policy = (set(hook.client_policy()) & shared) - TRIGGER_OWN  # the trigger's own: the test below
        assert {k: connection_kwargs(sync)[k] for k in policy} == {k: connection_kwargs(client)[k] for k in policy}
    finally:
        hook.close()
        asyncio.run(store.aclose())
        asyncio.run(client.aclose())


def test_the_trigger_keeps_its_own_choices_over_the_policy(hook, monkeypatch):
    with_new_field(monkeypatch, "health_check_interval", 99)
    client = trigger_client(hook)
    try:
        given = connection_kwargs(client)
        assert given["health_check_interval"] == 5  # its poll interval, not the policy's
        assert given["socket_timeout"] == 4.5 and given["socket_connect_timeout"] == 3.5
        assert client.get_retry()._retries == 0  # it reconnects and re-reads itself
    finally:
        asyncio.run(client.aclose())


def test_a_trigger_serialized_before_client_policy_still_loads(redis_url, namespace):
    """The triggerer may hold a trigger of the previous release across an upgrade."""
    old_kwargs = {
        "connection": {"host": "127.0.0.1", "port": 6379, "db": 0},
        "namespace": namespace,
        "job_ids": ["a.b.c"],
        "target_state": "any",
        "statuses": ["SUCCEEDED"],
        "fail_on_unsuccessful": True,
        "poll_interval": 60.0,
        "max_backoff": 30.0,
        "connect_timeout": 3.0,
        "read_timeout": 4.0,
    }
    trigger = JobResultTrigger(**old_kwargs)
    assert trigger.serialize()[1]["client_policy"] == {"socket_connect_timeout": 3.0, "socket_timeout": 4.0}
    client = trigger._new_store().client
    try:
        assert connection_kwargs(client)["socket_connect_timeout"] == 3.0
        assert connection_kwargs(client)["socket_timeout"] == 4.0
    finally:
        asyncio.run(client.aclose())
