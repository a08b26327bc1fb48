"""A store behind Redis Sentinel: one spelling, every client follows a failover, doctor says what it keeps.

A real Sentinel group on loopback (:class:`jrs_testbench.redis_sentinel.EmbeddedSentinelGroup`:
a primary, two replicas, three sentinels), started once for the file: the tests share it and
isolate by namespace. What a DAG run sees across a failover is in
``tests/airflow/test_sentinel_dag.py``; the long trials are ``benchmarks/sentinel_failover.py``.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest

from airflow_jrs.cli import main
from airflow_jrs.exceptions import JrsConfigError, StoreUnavailableError
from airflow_jrs.hooks.jrs import JrsHook
from airflow_jrs.settings import settings_for
from airflow_jrs.store import JobResult, JobStatus
from airflow_jrs.store.redis.clients import async_client, bounded_client, connection_of, sync_client
from airflow_jrs.store.redis.namespace import RedisJobNamespace
from airflow_jrs.store.redis.sentinel import parse_sentinels
from jrs_testbench.redis_sentinel import MASTER, EmbeddedSentinelGroup

pytestmark = [pytest.mark.cluster]


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    with EmbeddedSentinelGroup(tmp_path_factory.mktemp("sentinel")) as found:
        yield found


@pytest.fixture
def jobs(group, tmp_path):
    settings = settings_for(f"s{uuid.uuid4().hex[:8]}", output_root=str(tmp_path / "o"), spec_root=str(tmp_path / "s"),
                            durability="replicas:1")  # fmt: skip
    found = RedisJobNamespace.from_url(group.url(), settings)
    yield found
    found.close()


def retried(call, seconds: float = 30.0):
    """``call()`` until it stops raising :class:`StoreUnavailableError`, as Airflow's retries would."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return call()
        except StoreUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def until(check, seconds: float = 30.0) -> bool:
    """``check()`` until it is true, for at most ``seconds`` (a lagging sentinel's time to agree)."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def served_by(client) -> int:
    return int(client.info("server")["tcp_port"])


def role(client) -> str:
    return str(client.info("replication")["role"])


def test_the_url_reaches_the_primary_and_its_kwargs_rebuild_the_same_client_in_another_process(group, jobs):
    assert served_by(jobs.client) == group.primary_port()
    kwargs = connection_of(jobs.client, "the URL")
    json.dumps(kwargs)  # what a trigger or the supervisor's environment carries
    assert kwargs["sentinel_master"] == MASTER and len(kwargs["sentinels"]) == 2
    for rebuilt in (sync_client(kwargs), bounded_client(kwargs, 2.0)):
        assert served_by(rebuilt) == group.primary_port()
        rebuilt.close()

    async def read() -> int:
        client = async_client(kwargs)
        try:
            return int((await client.info("server"))["tcp_port"])
        finally:
            await client.aclose()

    assert asyncio.run(read()) == group.primary_port()


def test_a_committed_result_and_the_fence_survive_a_failover_through_the_same_client(group, jobs):
    store = jobs.results
    store.create_dirty_result(JobResult(job_id="d.t.1", status=JobStatus.SUCCEEDED, fence=1))
    store.mark_result_as_clean("d.t.1")
    lease = jobs.lease("d.t.2")
    before = lease.acquire()
    lease.release()
    failover = group.fail_over("kill")
    assert failover.new_port != failover.old_port
    # the same client, no restart: it asks the sentinels again and reaches the new primary (a
    # sentinel that still names the old one fails the call clearly, and a retry gets through)
    after = retried(lambda: jobs.lease("d.t.2").acquire())
    assert after is not None and before is not None and int(after) > int(before)
    entry = store.get_entry("d.t.1")
    assert entry is not None and entry.is_clean
    # A new pooled connection goes where the first sentinel that answers says: one that lags still
    # names the old primary, back as a replica (its reads are a replica's; its writes fail READONLY
    # and are sent again), so the client reaches the primary once the sentinels agree. Under load
    # the sentinels may even fail over again (a 600-ms down-after), and then the killed server,
    # back as a replica, may be the one promoted (seen once beside mypy and npm): the client must
    # reach the primary the sentinels name now, and that server must take writes as one.
    assert until(lambda: served_by(jobs.client) == group.primary_port() and role(jobs.client) == "master"), (
        served_by(jobs.client), role(jobs.client), group.primary_port(), failover,
    )  # fmt: skip


def test_the_jrs_connection_spells_sentinel_the_same_way(group, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_JRS_SENTINEL", f"{group.url()}&namespace=conn")
    hook = JrsHook("jrs_sentinel")
    assert hook.get_store().ping() >= 0
    assert served_by(hook.get_conn()) == group.primary_port()
    assert hook.server().startswith(f"primary {MASTER} via sentinel 127.0.0.1:")
    kwargs = hook.connection_kwargs()
    assert kwargs["sentinel_master"] == MASTER and [p for _, p in kwargs["sentinels"]] == group.sentinel_ports[1:]
    hook.close()


def test_doctor_names_the_primary_and_what_a_failover_keeps(group, capsys):
    assert main(["--redis-url", group.url(), "--json", "doctor", "--redis-only"]) == 1  # durability none: warn
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert checks["failover"]["level"] == "warn" and "durability none" in checks["failover"]["detail"]
    assert f"primary 127.0.0.1:{group.primary_port()} with 2 healthy replica(s)" in checks["failover"]["detail"]
    assert "min-replicas-to-write 1" in checks["failover"]["detail"]


def test_bad_sentinel_settings_say_what_to_write():
    with pytest.raises(JrsConfigError, match=r"'h:x' is not a sentinel address; use host:port"):
        parse_sentinels("a:26379,h:x")
    assert parse_sentinels("a,b:1") == [("a", 26379), ("b", 1)]
    with pytest.raises(JrsConfigError, match="both cluster and sentinel_master"):
        sync_client({"host": "a", "cluster": True, "sentinel_master": "m"})


def test_a_durable_write_that_meets_a_server_without_its_script_sends_it_again(jobs, monkeypatch):
    """A pipeline loads its scripts, then sends them; a failover in between (or redis-py's retry
    of the pipeline on the new primary) meets a server that never saw them: NOSCRIPT. The trials
    behind Sentinel saw tasks fail with a bare NoScriptError; the write is now sent once more."""
    from redis.client import Pipeline

    real, skipped = Pipeline.load_scripts, []

    def as_if_failed_over(self):  # the first load reaches the old primary: the new one lacks the script
        if not skipped:
            skipped.append(True)
            self.immediate_execute_command("SCRIPT", "FLUSH")
            return None
        return real(self)

    monkeypatch.setattr(Pipeline, "load_scripts", as_if_failed_over)
    jobs.results.create_dirty_result(JobResult(job_id="d.t.noscript", status=JobStatus.SUCCEEDED))
    assert skipped and jobs.results.get_entry("d.t.noscript") is not None
    fence = jobs.lease("d.t.noscript-lease").acquire()  # the lease's durable write takes the same path
    assert fence is not None


def test_a_durable_write_on_a_connection_to_the_cut_off_and_demoted_primary_is_sent_again(tmp_path):
    """Every server behind its own proxy; the primary's proxy blackholes (the server runs on,
    nobody reaches it), the sentinels promote a replica, the proxy heals and the old primary is
    demoted. The store's pooled connection still leads there: ``READONLY``. redis-py retried the
    pipeline on that connection without asking the sentinels again, and the task failed."""
    with EmbeddedSentinelGroup(tmp_path / "g", proxied=True) as proxied:
        settings = settings_for("cut", output_root=str(tmp_path / "o"), spec_root=str(tmp_path / "s"),
                                durability="replicas:2", durability_timeout=1.0, read_timeout=2.5,
                                connect_timeout=2.0)  # fmt: skip
        jobs = RedisJobNamespace.from_url(proxied.url(), settings)
        try:
            jobs.results.create_dirty_result(JobResult(job_id="d.t.before", status=JobStatus.SUCCEEDED))
            failover = proxied.fail_over("cut")
            assert jobs.lease("d.t.after").acquire() is not None  # durable: the lease's pipeline
            assert served_by(jobs.client) == failover.new_port
            assert jobs.results.get_entry("d.t.before") is not None
        finally:
            jobs.close()
