"""Durability on request: a create or clean returns once Redis says the write will survive.

Real servers only: a primary with a real replica (``--replicaof``) for ``WAIT``, and this
machine's redis-server for the ``WAITAOF`` refusal (7.0 has no WAITAOF; on 7.2+ the same test
proves the write waits instead).
"""

from __future__ import annotations

import ast
import contextlib
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from airflow_jrs.exceptions import JrsConfigError, StoreUnavailableError
from airflow_jrs.protocol import JobAttempt, JobNamespace, JobSpec, settings_for
from airflow_jrs.store import Attempt, JobResult, JobStatus, RedisJobResultStore
from airflow_jrs.store.intents import Intent
from airflow_jrs.store.redis.durability import WAITAOF_SINCE, Durability, DurableWrites
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.leases import RedisJobLease
from airflow_jrs.store.redis.namespace import RedisJobNamespace
from jrs_testbench.launchers import Recording
from jrs_testbench.redis_server import EmbeddedRedis


def ok(job_id: str) -> JobResult:
    return JobResult(job_id=job_id, status=JobStatus.SUCCEEDED)


@pytest.fixture(scope="module")
def primary_and_replica(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedRedis, EmbeddedRedis]]:
    root: Path = tmp_path_factory.mktemp("replicated")
    # No diskless-sync delay (5 s by default): the replica syncs at once.
    with EmbeddedRedis(root / "primary", extra_args=["--repl-diskless-sync-delay", "0"]) as primary:
        with EmbeddedRedis(root / "replica", extra_args=["--replicaof", "127.0.0.1", str(primary.port)]) as replica:
            client = redis.Redis(port=primary.port)
            deadline = time.monotonic() + 20
            while client.info("replication").get("slave0", {}).get("state") != "online":
                assert time.monotonic() < deadline, "the replica did not connect"
                time.sleep(0.05)
            client.close()
            yield primary, replica


def test_replicas_durability_returns_once_the_replica_has_the_write(primary_and_replica, namespace: str) -> None:
    primary, replica = primary_and_replica
    store = RedisJobResultStore(redis.Redis(port=primary.port), namespace, durability="replicas:1")
    on_replica = redis.Redis(port=replica.port)
    key = KeySpace(namespace).result("j")
    store.create_dirty_result(ok("j"))
    assert on_replica.get(key).startswith(b'{"s":"d"')  # there already: no polling
    assert store.mark_result_as_clean("j") is True
    assert on_replica.get(key).startswith(b'{"s":"c"')


def test_a_replica_count_nobody_reaches_fails_the_write_loudly(redis_client: redis.Redis, namespace: str) -> None:
    store = RedisJobResultStore(redis_client, namespace, durability="replicas:1", durability_timeout=0.1)
    with pytest.raises(StoreUnavailableError) as info:
        store.create_dirty_result(ok("j"))
    assert "durability='replicas:1'" in str(info.value) and "0 of 1 replicas" in str(info.value)
    assert info.value.retryable and info.value.job_id == "j"
    assert store.has_dirty_job_result_entry("j")  # written all the same: the retry finds it


def test_aof_durability_on_a_server_without_waitaof_is_a_clear_configuration_error(
    redis_client: redis.Redis, namespace: str
) -> None:
    version = str(redis_client.info("server")["redis_version"])
    store = RedisJobResultStore(redis_client, namespace, durability="aof")
    if tuple(int(p) for p in version.split(".")[:2]) >= WAITAOF_SINCE:
        store.create_dirty_result(ok("j"))  # a newer server: the write waits for the fsync instead
        return
    with pytest.raises(JrsConfigError) as info:
        store.create_dirty_result(ok("j"))
    message = str(info.value)
    assert "durability='aof'" in message and f"redis {version}" in message and "7.2" in message
    assert store.get_entry("j") is None  # refused before anything was written


@pytest.mark.parametrize("value", ["fsync", "replicas", "replicas:0", "replicas:-1", "replicas:x", "aof:1"])
def test_invalid_durability_is_rejected_naming_the_choices(redis_client: redis.Redis, value: str) -> None:
    with pytest.raises(JrsConfigError, match="'none', 'aof' or 'replicas:N'"):
        RedisJobResultStore(redis_client, "ns", durability=value)


def test_durability_settings_parse() -> None:
    assert Durability.parse(None) == Durability.parse("none") == Durability()
    assert str(Durability.parse(" AOF ")) == "aof"
    assert Durability.parse("replicas:2") == Durability("replicas", 2)
    with pytest.raises(JrsConfigError, match="durability_timeout"):
        RedisJobResultStore("redis://127.0.0.1:1/0", "ns", durability="aof", durability_timeout=0)


def test_a_wait_longer_than_the_clients_read_timeout_is_refused() -> None:
    # redis-py would give up on the reply first and retry the pipeline: the write would run twice
    client = redis.Redis(port=1, socket_timeout=5)
    with pytest.raises(JrsConfigError, match=r"durability_timeout \(10 s\).*read timeout \(5 s"):
        RedisJobResultStore(client, "ns", durability="replicas:1", durability_timeout=10)
    RedisJobResultStore(client, "ns", durability="replicas:1", durability_timeout=3)
    RedisJobResultStore(client, "ns", durability_timeout=10)  # no durability: nothing waits


def test_the_wait_is_capped_below_a_plain_clients_read_timeout() -> None:
    writes = DurableWrites(Durability.parse("replicas:1"), timeout=10)
    assert writes.timeout_ms(redis.Redis(port=1, socket_timeout=4)) == 3000  # 4 s less the margin
    assert writes.timeout_ms(redis.Redis(port=1, socket_timeout=1.5)) == 750  # half, when the margin eats it
    assert writes.timeout_ms(redis.Redis(port=1, socket_timeout=None)) == 10_000  # no limit: nothing to stay below


@pytest.mark.cluster
def test_a_cluster_clients_read_timeout_bounds_the_wait_as_a_plain_clients_does(redis_cluster) -> None:
    # A RedisCluster keeps its kwargs on its nodes manager, not on a pool: read from a pool, its
    # read timeout was "none", and the wait was not capped (the same check passed on the store).
    client = redis_cluster.client(socket_timeout=4)
    try:
        assert DurableWrites(Durability.parse("replicas:1"), timeout=10).timeout_ms(client) == 3000
        with pytest.raises(JrsConfigError, match=r"durability_timeout \(10 s\).*read timeout \(4 s"):
            RedisJobResultStore(client, "ns", durability="replicas:1", durability_timeout=10)
        RedisJobResultStore(client, "ns", durability="replicas:1", durability_timeout=3)
    finally:
        client.close()


@pytest.mark.cluster
def test_replicas_durability_through_a_cluster_client(redis_cluster, namespace: str) -> None:
    client = redis_cluster.client()
    try:
        store = RedisJobResultStore(client, namespace, durability="replicas:1")
        store.create_dirty_result(ok("j"))
        assert store.mark_result_as_clean("j") is True
        entry = store.get_entry("j")
        assert entry is not None and entry.is_clean
        # the lease's wait goes to the primary of the namespace's slot, on the script's connection
        lease = RedisJobLease(client, namespace, JOB, durable=DurableWrites(Durability.parse("replicas:1")))
        assert lease.acquire() and lease.peek() is not None
    finally:
        client.close()


# -- what lets an attempt start Spark: the lease, the intent, the first heartbeat ----------
JOB = "dag.task.2013-01-01"


@contextlib.contextmanager
def paused(server: EmbeddedRedis) -> Iterator[None]:
    """The replica stops acknowledging (SIGSTOP), as one cut off or stalled does; then resumes."""
    assert server.process is not None
    server.process.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        server.process.send_signal(signal.SIGCONT)


def durable_jobs(url: str, namespace: str, tmp_path: Path, timeout: float = 3.0) -> JobNamespace:
    settings = settings_for(
        namespace, output_root=str(tmp_path / "out"), spec_root=str(tmp_path / "specs"), durability="replicas:1",
        durability_timeout=timeout,
    )  # fmt: skip
    return RedisJobNamespace.from_url(url, settings)


def intent_of(jobs: JobNamespace, fence: int) -> Intent:
    return Intent(
        job_id=JOB, fence=fence, spec_uri=jobs.intents.spec_uri(JOB, fence), staging=f"/out/{JOB}/x",
        app_name="jrs-app", host="worker-1", pid=4242, started_at=time.time(),
    )  # fmt: skip


def test_the_lease_the_intent_and_the_first_beat_return_once_the_replica_has_them(
    primary_and_replica, namespace: str, tmp_path: Path
) -> None:
    primary, replica = primary_and_replica
    jobs = durable_jobs(primary.url, namespace, tmp_path)
    on_replica, keys = redis.Redis(port=replica.port), KeySpace(namespace)
    try:
        fence = jobs.lease(JOB).acquire()
        assert on_replica.hget(keys.lease(JOB), "nonce") == fence.nonce.encode()  # there already: no polling
        jobs.intents.record(intent_of(jobs, fence), {"application": "app.py"})
        assert on_replica.get(keys.intent(JOB)) == jobs.client.get(keys.intent(JOB))
        jobs.heartbeats.beat(JOB, fence, 30_000, host="worker-1", pid=1, child=0, first=True)
        assert on_replica.hget(keys.heartbeat(JOB), "fence") == fence.identity.encode()
    finally:
        jobs.close()
        on_replica.close()


def test_a_lease_the_replica_did_not_acknowledge_is_given_back(
    primary_and_replica, namespace: str, tmp_path: Path
) -> None:
    primary, replica = primary_and_replica
    jobs = durable_jobs(primary.url, namespace, tmp_path, timeout=0.3)
    try:
        with paused(replica), pytest.raises(StoreUnavailableError) as info:
            jobs.lease(JOB).acquire()
        message = str(info.value)
        assert "the lease of job" in message and "0 of 1 replicas" in message and "given back" in message
        assert jobs.lease(JOB).peek() is None, "a lease a failover may lose was kept"
        holder = RedisJobLease(jobs.client, namespace, JOB, ttl=30)  # no durability: proved dead by the caller
        holder.acquire()
        dead = holder.peek()
        assert dead is not None
        with paused(replica), pytest.raises(StoreUnavailableError, match="given back"):  # a take-over waits too
            jobs.lease(JOB).take_over(dead)
        assert jobs.lease(JOB).peek() is None
    finally:
        jobs.close()


def test_an_intent_or_first_beat_the_replica_did_not_acknowledge_starts_nothing(
    primary_and_replica, namespace: str, tmp_path: Path
) -> None:
    primary, replica = primary_and_replica
    jobs = durable_jobs(primary.url, namespace, tmp_path, timeout=0.3)
    try:
        fence = jobs.lease(JOB).acquire()  # acknowledged
        with paused(replica), pytest.raises(StoreUnavailableError, match=r"intent of job .*Spark was not submitted"):
            jobs.intents.record(intent_of(jobs, fence), {"application": "app.py"})
        with paused(replica), pytest.raises(StoreUnavailableError, match=r"first heartbeat .*not started"):
            jobs.heartbeats.beat(JOB, fence, 30_000, host="worker-1", pid=1, child=0, first=True)
        beat = jobs.heartbeats.get(JOB)
        assert beat is not None and not beat.running, "a successor would wait a TTL for a spark-submit never started"
    finally:
        jobs.close()


def test_an_attempt_whose_lease_is_not_durable_launches_nothing(redis_url: str, namespace: str, tmp_path: Path) -> None:
    # no replica at all: WAIT 1 never reaches one (the real JobAttempt, counting launches)
    jobs = durable_jobs(redis_url, namespace, tmp_path, timeout=0.1)
    launcher = Recording()
    try:
        with pytest.raises(StoreUnavailableError, match="the lease of job"):
            JobAttempt(jobs, JobSpec(JOB, "fp"), Attempt("d", "t", "r", 1), launcher).run()
        assert launcher.launched == 0
        assert jobs.lease(JOB).peek() is None and jobs.intents.get(JOB) is None
    finally:
        jobs.close()


#: Where a :class:`JobLease` may be built: the lease's own package, and the one factory that gives
#: it the namespace's ``durability`` (``JobNamespace.lease``).
LEASE_BUILDERS = ("airflow_jrs.store.redis.leases", "airflow_jrs.store.redis.namespace")
PACKAGE = Path(__file__).parents[2] / "airflow_jrs"


def _lease_constructions(source: str) -> list[int]:
    """Lines of ``source`` that call ``RedisJobLease(...)`` (by name or attribute)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and ((isinstance(node.func, ast.Name) and node.func.id == "RedisJobLease")
             or (isinstance(node.func, ast.Attribute) and node.func.attr == "RedisJobLease"))
    ]  # fmt: skip


def test_every_lease_is_built_by_the_namespace_with_its_durability() -> None:
    # A lease built elsewhere skips `durability`: a failover could hand it to two attempts at once.
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(("airflow_jrs", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
        if any(module == b or module.startswith(b + ".") for b in LEASE_BUILDERS):
            continue
        if lines := _lease_constructions(path.read_text()):
            offenders.append(f"{module} (lines {lines})")
    assert not offenders, (
        f"RedisJobLease(...) built outside {LEASE_BUILDERS}: {offenders}. Take the lease from "
        "JobNamespace.lease (hook.jobs().lease(job_id)), which gives it the configured durability."
    )
    assert _lease_constructions("RedisJobLease(c, 'n', 'j')\nleases.RedisJobLease(c, 'n', 'j')\nRedisJobLease\n") == [
        1,
        2,
    ]
