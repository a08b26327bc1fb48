"""JrsHook: the connection URL and [jrs] config resolve once, with explicit precedence and clear errors."""

from __future__ import annotations

import pytest
import redis

from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.hooks.jrs import JrsHook, _JrsRedisHook


@pytest.fixture
def conn(monkeypatch):
    def set_url(url: str, conn_id: str = "jrs_default") -> None:
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", url)

    for name in ("NAMESPACE", "LEASE_TTL", "CLEAN_TTL", "DELETE_ON_COMMIT", "CONN_ID"):
        monkeypatch.delenv(f"AIRFLOW__JRS__{name}", raising=False)
    return set_url


def test_url_parts_reach_the_redis_client(conn):
    conn("redis://alice:s3cret@redis.example:6380/3?namespace=prod&ssl=true&ssl_cert_reqs=none")
    hook = JrsHook()
    kwargs = hook.get_conn().connection_pool.connection_kwargs
    assert (kwargs["host"], kwargs["port"], kwargs["db"]) == ("redis.example", 6380, 3)
    assert (kwargs["username"], kwargs["password"]) == ("alice", "s3cret")
    assert hook.get_conn().connection_pool.connection_class.__name__ == "SSLConnection"
    assert hook.namespace == "prod"


@pytest.mark.parametrize(
    ("url", "connection_class"),
    [
        ("redis://127.0.0.1:6379/0?ssl=false", "Connection"),
        ("redis://127.0.0.1:6379/0?ssl=False&ssl_check_hostname=false", "Connection"),
        ("rediss://127.0.0.1:6379/0", "SSLConnection"),
        ("rediss://127.0.0.1:6379/0?ssl=off", "Connection"),
        ("redis://127.0.0.1:6379?db=2&ssl=1", "SSLConnection"),
    ],
)
def test_tls_flags_given_as_text_mean_what_they_say(conn, url, connection_class):
    # redis-py reads any non-empty string as true: "ssl=false" must not turn TLS on.
    hook = JrsHook()
    conn(url)
    pool = hook.get_conn().connection_pool
    assert pool.connection_class.__name__ == connection_class
    if "ssl_check_hostname" in url:
        assert pool.connection_kwargs.get("ssl_check_hostname", False) is False


def test_boolean_extra_that_is_not_a_boolean_is_refused(conn):
    conn("redis://127.0.0.1:6379/0?cluster=perhaps")
    with pytest.raises(JrsConfigError, match="cluster"):
        JrsHook().get_conn()


def test_store_from_the_connection_talks_to_real_redis(conn, redis_url, namespace):
    conn(f"{redis_url}?namespace={namespace}")
    hook = JrsHook()
    ok, message = hook.test_connection()
    assert ok, message
    assert hook.get_store().namespace == namespace


def test_precedence_is_argument_then_extra_then_config_then_default(conn, monkeypatch):
    conn("redis://127.0.0.1:6379/0?lease_ttl=30")
    monkeypatch.setenv("AIRFLOW__JRS__LEASE_TTL", "45")
    monkeypatch.setenv("AIRFLOW__JRS__NAMESPACE", "from-config")
    assert JrsHook(lease_ttl=10).settings.lease_ttl == 10
    assert JrsHook().settings.lease_ttl == 30
    assert JrsHook().settings.namespace == "from-config"
    monkeypatch.delenv("AIRFLOW__JRS__NAMESPACE")
    assert JrsHook().settings.namespace == "default"
    assert JrsHook().settings.clean_ttl is None
    assert JrsHook().settings.delete_on_commit is False


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("redis://127.0.0.1:6379/0?lease_ttl=soon", ["lease_ttl", "soon", "AIRFLOW__JRS__LEASE_TTL"]),
        ("redis://127.0.0.1:6379/0?delete_on_commit=maybe", ["delete_on_commit", "true or false"]),
        ("redis://127.0.0.1:6379/0?namespace=a%20b", ["namespace", "a b"]),
        ("redis://127.0.0.1:6379/zero", ["zero", "database number"]),
    ],
)
def test_invalid_settings_raise_naming_the_setting(conn, url, words):
    conn(url)
    with pytest.raises(JrsConfigError) as info:
        hook = JrsHook()
        hook.settings  # noqa: B018
        hook.get_conn()
    for word in words:
        assert word in str(info.value)


def test_missing_connection_says_how_to_define_it(conn):
    with pytest.raises(JrsConfigError) as info:
        JrsHook("jrs_nowhere").settings  # noqa: B018
    assert "AIRFLOW_CONN_JRS_NOWHERE" in str(info.value)


def test_unknown_override_is_refused(conn):
    with pytest.raises(JrsConfigError, match="unknown jrs settings"):
        JrsHook(lease_tt=3)


def test_durability_and_index_limit_reach_the_store(conn, monkeypatch, redis_url, namespace):
    conn(f"{redis_url}?namespace={namespace}&durability=replicas%3A2&durability_timeout=3")
    monkeypatch.setenv("AIRFLOW__JRS__INDEX_LIMIT", "0")
    store = JrsHook().get_store()
    assert (str(store.durability), store.durability_timeout_ms, store.index_limit) == ("replicas:2", 3000, None)
    monkeypatch.delenv("AIRFLOW__JRS__INDEX_LIMIT")
    conn(f"{redis_url}?namespace={namespace}")
    store = JrsHook().get_store()
    assert (str(store.durability), store.index_limit) == ("none", 10_000)


def test_invalid_durability_names_the_setting_and_the_choices(conn):
    conn("redis://127.0.0.1:6379/0?durability=fsync")
    with pytest.raises(JrsConfigError, match=r"'durability'.*'none', 'aof' or 'replicas:N'"):
        _ = JrsHook().settings


def test_the_namespace_the_hook_builds_looks_its_connection_up_only_when_a_launch_asks(conn, redis_url, namespace):
    conn(f"{redis_url}?namespace={namespace}")
    hook = JrsHook()
    jobs = hook.jobs()
    assert jobs.connection is None  # the skip path never asks for it
    assert jobs.connection_kwargs() == hook.connection_kwargs()
    assert jobs.client is hook.get_conn()  # the launcher's supervisor and the attempt: one client here
    hook.close()


def test_a_unix_socket_is_refused_in_the_same_words_by_the_hook_and_its_namespace(conn, monkeypatch, tmp_path):
    # the warning "spark-submit runs without a supervisor (...)" quotes this error: it must name the connection
    conn("redis://127.0.0.1:6379/0", conn_id="jrs_socket")
    socket_client = redis.Redis(unix_socket_path=str(tmp_path / "redis.sock"))
    monkeypatch.setattr(_JrsRedisHook, "get_conn", lambda self: socket_client)
    hook = JrsHook("jrs_socket")
    with pytest.raises(JrsConfigError) as from_hook:
        hook.connection_kwargs()
    with pytest.raises(JrsConfigError) as from_namespace:
        hook.jobs().connection_kwargs()
    assert str(from_namespace.value) == str(from_hook.value)
    assert str(from_namespace.value).startswith("jrs connection 'jrs_socket' uses a Unix socket")
