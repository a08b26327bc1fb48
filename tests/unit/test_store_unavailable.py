"""Fail closed, with clear words: a store that cannot be reached, answers too slowly or refuses
fails the submit task with one line (connection id, host, what failed, what to do; never the
password) before any Spark starts.

Every case runs against a real server started here: a port with nothing listening, a server
paused with SIGSTOP, one with a password, a replica, one full at ``maxmemory`` with
``noeviction``, and a host name that does not resolve. "No Spark" is proven by effects: no
Spark hook was built, no Spark event log was written, and no lease or intent key exists.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
import redis
from airflow.providers.common.compat.sdk import AirflowFailException

from airflow_jrs.exceptions import (
    CorruptJobResultError,
    InvalidJobIdError,
    JobResultQuarantinedError,
    StoreUnavailableError,
    UnsupportedSchemaVersionError,
)
from airflow_jrs.hooks.jrs import JrsHook
from airflow_jrs.operators import JrsSparkSubmitOperator
from airflow_jrs.sensors.job_result import JobResultSensor
from airflow_jrs.store import RedisJobResultStore
from airflow_jrs.store.redis.keys import KeySpace
from jrs_testbench.fake_spark import install_fake_spark_submit
from jrs_testbench.helpers import TINY_APP, SparkLaunches, free_port, spark_env
from jrs_testbench.redis_server import EmbeddedRedis
from jrs_testbench.secure_redis import admin, fill_to_maxmemory, require_password

DAY = datetime(2013, 1, 1, tzinfo=UTC)
JOB = "d.t.2013-01-01"
#: Short waits so that each case fails within about a second.
FAST = "connect_timeout=0.5&read_timeout=0.5&retries=1&retry_backoff=0.05"


def context() -> dict:
    ti = SimpleNamespace(dag_id="d", task_id="t", try_number=1, map_index=-1, xcom_push=lambda **kw: None)
    return {"ti": ti, "run_id": "scheduled__2013-01-01", "data_interval_start": DAY, "logical_date": DAY}


@pytest.fixture
def env(monkeypatch, tmp_path):
    """Spark connection, output/spec roots and a launch counter; the store URL is set per test."""
    for key, value in spark_env("local[1]").items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AIRFLOW__JRS__OUTPUT_ROOT", str(tmp_path / "output"))
    monkeypatch.setenv("AIRFLOW__JRS__SPEC_ROOT", str(tmp_path / "specs"))
    monkeypatch.delenv("AIRFLOW__JRS__ON_STORE_UNAVAILABLE", raising=False)
    namespace = f"t-{uuid.uuid4().hex[:12]}"

    def point_at(url: str, extra: str = FAST) -> str:
        monkeypatch.setenv("AIRFLOW_CONN_JRS_DEFAULT", f"{url}?namespace={namespace}&{extra}")
        return namespace

    return SimpleNamespace(point_at=point_at, namespace=namespace, launches=SparkLaunches(tmp_path / "events"))


@pytest.fixture
def server(tmp_path) -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis(tmp_path / "redis") as s:
        yield s


def operator(env, **kwargs) -> JrsSparkSubmitOperator:
    return JrsSparkSubmitOperator(
        task_id="t",
        application=TINY_APP,
        application_args=["--output", "{jrs_output}"],
        conn_id="spark_local",
        conf=env.launches.conf(),
        **kwargs,
    )


def fail(env, expected: type[Exception], **kwargs) -> tuple[JrsSparkSubmitOperator, Exception]:
    op = operator(env, **kwargs)
    with pytest.raises(expected) as info:
        op.execute(context())
    return op, info.value


def assert_clear_line(exc: Exception, *, host: str, words: list[str], password: str | None = None) -> None:
    text = str(exc)
    assert "\n" not in text, text
    assert "connection 'jrs_default'" in text, text
    assert host in text, text
    for word in words:
        assert word in text, text
    assert ".." not in text and ";;" not in text and ". ;" not in text, text
    if password:
        assert password not in text and password not in repr(exc)


def assert_no_spark(op: JrsSparkSubmitOperator, env) -> None:
    assert op._hook is None, "a SparkSubmitHook was built"
    assert env.launches.count() == 0


def assert_nothing_written(port: int, namespace: str, password: str | None = None) -> None:
    client = admin(port, password)
    try:
        assert client.keys(f"jrs:{{{namespace}}}:*") == []
    finally:
        client.close()


def test_nothing_listening_fails_retryable_naming_connection_and_host(env):
    port = free_port()
    env.point_at(f"redis://127.0.0.1:{port}/0")
    op, exc = fail(env, StoreUnavailableError)
    assert exc.retryable and exc.kind == "refused"
    assert_clear_line(
        exc, host=f"127.0.0.1:{port}", words=["could not read the result of job", "nothing listens", "will retry"]
    )
    assert_no_spark(op, env)


def test_paused_server_times_out_instead_of_hanging(env, server):
    env.point_at(server.url)
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
        op, exc = fail(env, StoreUnavailableError)
    finally:
        os.kill(server.process.pid, signal.SIGCONT)
    assert exc.retryable and exc.kind == "timeout"
    assert_clear_line(exc, host=f"127.0.0.1:{server.port}", words=["did not answer in time", "will retry"])
    assert_no_spark(op, env)
    assert_nothing_written(server.port, env.namespace)


@pytest.mark.parametrize("given", [None, "wrong-pw-7f3a9c"])
def test_missing_or_wrong_password_fails_without_retries(env, server, given):
    secret = f"pw-{uuid.uuid4().hex}"
    require_password(server.port, secret)
    auth = f":{given}@" if given else ""
    env.point_at(f"redis://{auth}127.0.0.1:{server.port}/0")
    op, exc = fail(env, AirflowFailException)
    assert_clear_line(
        exc,
        host=f"127.0.0.1:{server.port}",
        words=["needs a password", "set the ACL user and password in connection 'jrs_default'", "Not retried"],
        password=given,
    )
    assert secret not in str(exc)
    cause = exc.__cause__
    assert isinstance(cause, StoreUnavailableError) and not cause.retryable and cause.kind == "auth"
    assert_no_spark(op, env)
    assert_nothing_written(server.port, env.namespace, secret)


def test_read_only_replica_is_named_and_no_lease_is_taken(env, tmp_path):
    # No diskless-sync delay (5 s by default): the replica syncs at once.
    primary = EmbeddedRedis(tmp_path / "primary", extra_args=["--repl-diskless-sync-delay", "0"])
    with (
        primary as server,
        EmbeddedRedis(tmp_path / "replica", extra_args=["--replicaof", "127.0.0.1", str(primary.port)]) as replica,
    ):
        wait_for_sync(replica.port)  # a replica stopped mid-sync takes seconds to shut down
        env.point_at(replica.url)
        op, exc = fail(env, StoreUnavailableError)
        assert exc.kind == "readonly" and exc.retryable
        assert_clear_line(
            exc,
            host=f"127.0.0.1:{replica.port}",
            words=["acquire the lease", "read-only replica", "point connection 'jrs_default' at the primary"],
        )
        assert_no_spark(op, env)
        assert_nothing_written(replica.port, env.namespace)
        assert_nothing_written(server.port, env.namespace)
        # SIGKILL: a primary and replica stopped with SIGTERM may wait for each other for seconds.
        replica.crash()
        server.crash()


def wait_for_sync(port: int) -> None:
    client = admin(port)
    try:
        for _ in range(400):
            if client.info("replication").get("master_link_status") == "up":
                return
            time.sleep(0.025)
        raise AssertionError("the replica never synced with its primary")
    finally:
        client.close()


def test_full_server_with_noeviction_refuses_the_lease_and_spark_never_starts(env, tmp_path):
    extra = ["--maxmemory", "4mb", "--maxmemory-policy", "noeviction"]
    with EmbeddedRedis(tmp_path / "full", extra_args=extra) as full:
        client = redis.Redis(port=full.port)
        fill_to_maxmemory(client)
        client.close()
        env.point_at(full.url)
        op, exc = fail(env, StoreUnavailableError)
        assert exc.kind == "oom" and exc.retryable
        assert_clear_line(
            exc, host=f"127.0.0.1:{full.port}", words=["out of memory", "maxmemory with noeviction", "will retry"]
        )
        assert_no_spark(op, env)
        assert_nothing_written(full.port, env.namespace)


def test_host_that_does_not_resolve_is_named(env):
    env.point_at("redis://jrs-no-such-host.invalid:6379/0")
    op, exc = fail(env, StoreUnavailableError)
    assert exc.kind == "dns" and exc.retryable
    assert_clear_line(
        exc, host="jrs-no-such-host.invalid:6379", words=["does not resolve", "fix the host of connection"]
    )
    assert_no_spark(op, env)


def test_sensor_fails_closed_with_the_same_line(env, server):
    secret = f"pw-{uuid.uuid4().hex}"
    require_password(server.port, secret)
    env.point_at(f"redis://127.0.0.1:{server.port}/0")
    sensor = JobResultSensor(task_id="wait", job_ids=[JOB], mode="poke")
    with pytest.raises(AirflowFailException) as info:
        sensor.poke(context())
    assert_clear_line(info.value, host=f"127.0.0.1:{server.port}", words=["needs a password"])
    port = free_port()
    env.point_at(f"redis://127.0.0.1:{port}/0")
    sensor = JobResultSensor(task_id="wait", job_ids=[JOB], mode="poke")
    with pytest.raises(StoreUnavailableError) as lost:
        sensor.poke(context())
    assert lost.value.retryable
    assert_clear_line(lost.value, host=f"127.0.0.1:{port}", words=["nothing listens"])


def test_timeouts_and_retries_come_from_jrs_settings(env, monkeypatch):
    env.point_at("redis://127.0.0.1:6379/0", extra="read_timeout=2.5&retries=0")
    monkeypatch.setenv("AIRFLOW__JRS__CONNECT_TIMEOUT", "1.5")
    client = JrsHook().get_conn()
    kwargs = client.connection_pool.connection_kwargs
    assert (kwargs["socket_connect_timeout"], kwargs["socket_timeout"]) == (1.5, 2.5)
    assert client.get_retry().get_retries() == 0
    env.point_at("redis://127.0.0.1:6379/0", extra="")
    monkeypatch.delenv("AIRFLOW__JRS__CONNECT_TIMEOUT")
    settings = JrsHook().settings
    assert (settings.connect_timeout, settings.read_timeout, settings.retries) == (5.0, 10.0, 3)
    assert settings.on_store_unavailable == "fail"


def test_invalid_on_store_unavailable_is_a_configuration_error(env):
    env.point_at("redis://127.0.0.1:6379/0", extra="on_store_unavailable=maybe")
    op, exc = fail(env, AirflowFailException)
    assert "on_store_unavailable" in str(exc) and "'maybe'" in str(exc)
    assert_no_spark(op, env)


@pytest.fixture
def fake_spark_submit(tmp_path, monkeypatch) -> Path:
    """A ``spark-submit`` first on PATH that records its arguments: the unguarded path's Spark."""
    bin_dir, calls = install_fake_spark_submit(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return calls


def test_run_mode_computes_without_the_store_and_records_nothing(env, fake_spark_submit, capfd):
    port = free_port()
    env.point_at(f"redis://127.0.0.1:{port}/0", extra=FAST + "&on_store_unavailable=run")
    op = operator(env)
    payload = op.execute(context())
    assert payload["guarded"] is False and "state" not in payload
    assert "/unguarded-" in payload["outputs"]["output"]
    args = fake_spark_submit.read_text()
    assert args.count("\n") == 1  # one spark-submit
    assert "spark.jrs.fence=0" in args and "/unguarded-" in args
    out, err = capfd.readouterr()
    assert "RUNNING SPARK WITHOUT THE JOB RESULT STORE" in out + err  # loud, before and after
    assert "Spark finished WITHOUT the job result store" in out + err


def test_run_mode_still_fails_on_a_refusal_no_retry_can_fix(env, server, fake_spark_submit):
    require_password(server.port, f"pw-{uuid.uuid4().hex}")
    env.point_at(f"redis://127.0.0.1:{server.port}/0", extra=FAST + "&on_store_unavailable=run")
    op, exc = fail(env, AirflowFailException)
    assert "needs a password" in str(exc)
    assert not fake_spark_submit.exists()
    assert_no_spark(op, env)


def test_run_mode_fails_closed_when_durability_cannot_confirm_the_lease(env, server, fake_spark_submit, capfd):
    # A server without replicas answers every command, but WAIT 1 never gets its acknowledgement: the
    # store refused the lease, it is not unavailable, so on_store_unavailable=run must start nothing.
    extra = "read_timeout=3&retries=1&on_store_unavailable=run&durability=replicas:1&durability_timeout=0.2"
    env.point_at(server.url, extra=extra)
    op, exc = fail(env, StoreUnavailableError)
    assert exc.kind == "not_durable" and exc.retryable, exc
    assert "0 of 1 replicas" in str(exc) and "nothing was started" in str(exc), exc
    assert not fake_spark_submit.exists(), "spark-submit ran without the lease"
    assert_no_spark(op, env)
    client = admin(server.port)
    try:
        assert client.exists(KeySpace(env.namespace).lease(JOB)) == 0, "the unconfirmed lease was kept"
        assert client.exists(KeySpace(env.namespace).intent(JOB)) == 0
    finally:
        client.close()
    out, err = capfd.readouterr()
    assert "WITHOUT THE JOB RESULT STORE" not in out + err
    assert "on_store_unavailable=run does not apply" in out + err


# -- what no retry can fix fails the task at once, from the original error ----------------------------
@pytest.fixture
def shared_store(env, redis_url):
    env.point_at(redis_url, extra="")
    store = RedisJobResultStore(redis_url, env.namespace)
    yield store
    store.client.close()


def test_an_invalid_job_id_fails_without_retries_naming_it(env, shared_store):
    op, exc = fail(env, AirflowFailException, job_id="daily {2013-01-01}")
    assert isinstance(exc.__cause__, InvalidJobIdError)
    assert "'daily {2013-01-01}'" in str(exc) and "allowed are" in str(exc)
    assert_no_spark(op, env)
    sensor = JobResultSensor(task_id="wait", job_ids=["a b"], mode="poke")
    with pytest.raises(AirflowFailException, match="'a b'"):
        sensor.poke(context())


def test_a_quarantined_entry_fails_without_retries_saying_how_to_release_it(env, shared_store):
    shared_store.client.set(shared_store.keys.result(JOB), b"{truncated")
    op, exc = fail(env, AirflowFailException)
    assert isinstance(exc.__cause__, CorruptJobResultError)
    assert f"airflow-jrs release-quarantine {JOB}" in str(exc)
    op, exc = fail(env, AirflowFailException)  # the next attempt: blocked, not "no result"
    assert isinstance(exc.__cause__, JobResultQuarantinedError)
    assert_no_spark(op, env)


def test_an_entry_from_a_newer_version_fails_without_retries_and_is_left_alone(env, shared_store):
    raw = json.dumps({"state": "clean", "v": 99, "result": {"job_id": JOB, "status": "SUCCEEDED"}}).encode()
    shared_store.client.set(shared_store.keys.result(JOB), raw)
    op, exc = fail(env, AirflowFailException)
    assert isinstance(exc.__cause__, UnsupportedSchemaVersionError)
    assert "schema version 99" in str(exc) and "Upgrade airflow-jrs" in str(exc)
    assert shared_store.client.get(shared_store.keys.result(JOB)) == raw
    assert_no_spark(op, env)
