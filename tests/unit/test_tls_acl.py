"""TLS and ACL for real: a redis-server with a TLS port (certificates made here) and an ACL user
limited to one namespace by the rule docs/security.md gives; the operators, the sensor's trigger
and the CLI work through it, another namespace is refused with a clear error, and no output of
any failure path shows a password.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from airflow_jrs.cli import main as cli
from airflow_jrs.domain.identity import application_fingerprint
from airflow_jrs.exceptions import StoreUnavailableError
from airflow_jrs.hooks.jrs import JrsHook
from airflow_jrs.operators import JrsCleanupOperator, JrsSparkSubmitOperator
from airflow_jrs.store import JobResult, JobStatus
from airflow_jrs.store.intents import Intent
from airflow_jrs.store.redis.intents import RedisIntentStore
from airflow_jrs.triggers.job_result import JobResultTrigger
from jrs_testbench.fake_spark import install_fake_spark_submit, launches
from jrs_testbench.helpers import TINY_APP, free_port, spark_env
from jrs_testbench.redis_server import EmbeddedRedis
from jrs_testbench.secure_redis import add_acl_user, admin, make_tls_files, require_password, tls_args, tls_unsupported

DOC = Path(__file__).parents[2] / "docs" / "security.md"
DAY = datetime(2013, 1, 1, tzinfo=UTC)
JOB = "d.t.2013-01-01"
ARGS = ["--output", "{jrs_output}"]

_NO_TLS = tls_unsupported()
tls_only = pytest.mark.skipif(_NO_TLS is not None, reason=_NO_TLS or "")


def doc_rule() -> str:
    """The ACL rule docs/security.md tells users to paste (the fenced line after its marker)."""
    text = DOC.read_text()
    after = text[text.index("<!-- jrs-acl-rule") :]
    match = re.search(r"```\n(ACL SETUSER [^\n]+)\n```", after)
    assert match, "docs/security.md lost its ACL rule"
    return match.group(1)


def rule_for(namespace: str, user: str, password: str) -> str:
    return doc_rule().replace("jrs-prod", user).replace("CHANGE-ME", password).replace("{prod}", "{" + namespace + "}")


def context() -> dict:
    ti = SimpleNamespace(dag_id="d", task_id="t", try_number=1, map_index=-1, xcom_push=lambda **kw: None)
    return {"ti": ti, "run_id": "scheduled__2013-01-01", "data_interval_start": DAY, "logical_date": DAY}


@pytest.fixture(scope="module")
def secure(tmp_path_factory) -> Iterator[SimpleNamespace]:
    """One server for the module: plain port for the admin (with a password), TLS port for jrs."""
    if _NO_TLS is not None:
        pytest.skip(_NO_TLS)
    root = tmp_path_factory.mktemp("secure-redis")
    files = make_tls_files(root / "tls")
    tls_port = free_port()
    namespace, other = f"t-{uuid.uuid4().hex[:10]}", f"o-{uuid.uuid4().hex[:10]}"
    user, password, admin_password = "jrs-test", f"user-{uuid.uuid4().hex}", f"admin-{uuid.uuid4().hex}"
    with EmbeddedRedis(root / "data", extra_args=tls_args(files, tls_port)) as server:
        client = admin(server.port)
        add_acl_user(client, rule_for(namespace, user, password))
        client.close()
        require_password(server.port, admin_password)
        yield SimpleNamespace(
            server=server,
            tls_port=tls_port,
            ca=str(files.ca),
            namespace=namespace,
            other=other,
            user=user,
            password=password,
            admin_password=admin_password,
            url=f"rediss://{user}:{password}@127.0.0.1:{tls_port}/0",
        )


@pytest.fixture
def env(secure, monkeypatch, tmp_path) -> SimpleNamespace:
    for key, value in spark_env("local[1]").items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AIRFLOW__JRS__OUTPUT_ROOT", str(tmp_path / "output"))
    monkeypatch.setenv("AIRFLOW__JRS__SPEC_ROOT", str(tmp_path / "specs"))
    bin_dir, calls = install_fake_spark_submit(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    def point_at(url: str = secure.url, namespace: str = secure.namespace, extra: str = "") -> None:
        query = f"namespace={namespace}&ssl_ca_certs={secure.ca}&retries=1&retry_backoff=0.05{extra}"
        monkeypatch.setenv("AIRFLOW_CONN_JRS_DEFAULT", f"{url}?{query}")

    point_at()
    return SimpleNamespace(point_at=point_at, calls=calls)


def keys_of(secure, namespace: str) -> list[bytes]:
    client = admin(secure.server.port, secure.admin_password)
    try:
        return sorted(client.keys(f"jrs:{{{namespace}}}:*"))
    finally:
        client.close()


def test_the_doc_rule_is_the_one_the_server_enforces(secure):
    client = admin(secure.server.port, secure.admin_password)
    try:
        acl = client.acl_getuser(secure.user)
    finally:
        client.close()
    assert f"~jrs:{{{secure.namespace}}}:*" in str(acl["keys"])
    assert f"&jrs:{{{secure.namespace}}}:*" in str(acl["channels"])
    granted = {c.lstrip("+") for c in acl["commands"] if c.startswith("+")}
    assert granted == {w[1:] for w in doc_rule().split() if w.startswith("+")}  # nothing more


@tls_only
def test_store_lease_intent_and_cleanup_work_through_tls_and_the_acl_user(secure, env, tmp_path):
    hook = JrsHook()
    assert hook.get_conn().connection_pool.connection_class.__name__ == "SSLConnection"
    store = hook.get_store()
    job = f"acl.{uuid.uuid4().hex[:8]}"
    lease = hook.jobs().lease(job)
    token = lease.acquire()
    assert lease.renew() and lease.peek() is not None
    intents = RedisIntentStore(hook.get_conn(), hook.namespace, hook.settings.spec_root)
    intent = Intent(
        job_id=job, fence=token, spec_uri=intents.spec_uri(job, token), staging="/s", app_name="a",
        host="h", pid=1, started_at=0.0,
    )  # fmt: skip
    intents.record(intent, {"application": "x"})
    assert intents.get(job) == intent and intents.live_fences(job)
    store.create_dirty_result(JobResult(job_id=job, status=JobStatus.SUCCEEDED), fence=token)
    assert lease.release()
    assert [e.job_id for e in store.get_dirty_entries()] == [job]
    JrsCleanupOperator(task_id="cleanup", jobs=[job]).execute({"ti": SimpleNamespace(try_number=1), "run_id": "r"})
    assert store.get_entry(job).is_clean
    assert [e.job_id for e in store.list_entries(limit=10)] == [job]
    store.forget_result(job)
    assert [e.job_id for e in store.get_history(job)] == [job]
    assert store.get_quarantined() == []
    hook.close()


@tls_only
def test_result_documents_commit_forget_and_purge_through_the_acl_user(secure, env, tmp_path):
    """References live in bucket hashes: the commit, the reads, a forget, a quarantine and a
    purge use HSET, HGET, HEXISTS, HDEL and HGETALL, which the rule must grant."""
    from datetime import timedelta

    from airflow_jrs.exceptions import CorruptJobResultError
    from airflow_jrs.store import RedisJobResultStore
    from airflow_jrs.store.redis.keys import KeySpace
    from airflow_jrs.store.results.documents import FolderDocuments

    (tmp_path / "documents").mkdir()
    hook = JrsHook()
    documents = FolderDocuments(tmp_path / "documents")
    store = RedisJobResultStore(hook.get_conn(), hook.namespace, result_documents=documents)
    job = f"acl.{uuid.uuid4().hex[:8]}"
    for step in ("forget", "purge"):
        store.create_dirty_result(JobResult(job_id=job, status=JobStatus.SUCCEEDED))
        assert store.mark_result_as_clean(job) is True
        entry = store.get_entry(job)
        assert entry is not None and entry.summary and entry.is_clean
        assert [e.job_id for e in store.list_entries(limit=10)] == [job]
        if step == "forget":
            store.forget_result(job)
        else:
            assert store.purge_clean_entries(timedelta(0)) == 1
        assert store.get_entry(job) is None
    bucket = KeySpace(hook.namespace).reference_bucket("corrupt.job")
    hook.get_conn().hset(bucket, "corrupt.job", b"c3;not-base36!;;")
    with pytest.raises(CorruptJobResultError):
        store.get_entry("corrupt.job")  # moved to quarantine: an HDEL inside the script
    hook.close()


@tls_only
def test_submit_operator_skips_and_writes_through_tls_and_the_acl_user(secure, env):
    op = JrsSparkSubmitOperator(task_id="t", application=TINY_APP, application_args=ARGS, conn_id="spark_local")
    job = f"write.{uuid.uuid4().hex[:8]}"
    op.job_id = job
    written = op.execute(context())  # computes (the fake spark-submit), leases, intent, result
    assert written["skipped"] is False and written["state"] == "dirty" and launches(env.calls) == 1
    again = JrsSparkSubmitOperator(task_id="t", application=TINY_APP, application_args=ARGS, conn_id="spark_local")
    again.job_id = job
    skipped = again.execute(context())
    assert skipped["skipped"] is True and launches(env.calls) == 1
    assert again._hook is None
    assert written["fingerprint"] == application_fingerprint(TINY_APP, ARGS, None)


@tls_only
def test_sensor_trigger_reads_through_the_hooks_async_connection_kwargs(secure, env):
    hook = JrsHook()
    job = f"trig.{uuid.uuid4().hex[:8]}"
    hook.get_store().create_dirty_result(JobResult(job_id=job, status=JobStatus.SUCCEEDED))
    kwargs = hook.async_connection_kwargs()
    assert kwargs["ssl"] is True and kwargs["ssl_ca_certs"] == secure.ca and kwargs["username"] == secure.user
    event = asyncio.run(_first_event(JobResultTrigger(connection=kwargs, namespace=hook.namespace, job_ids=[job])))
    assert event["status"] == "success" and event["results"][0]["job_id"] == job
    hook.close()


@tls_only
def test_cli_works_through_tls_and_the_acl_user(secure, env, capsys):
    job = f"cli.{uuid.uuid4().hex[:8]}"
    JrsHook().get_store().create_dirty_result(JobResult(job_id=job, status=JobStatus.SUCCEEDED))
    assert cli(["dirty"]) == 0
    assert job in capsys.readouterr().out
    assert cli(["show", "--json", job]) == 0
    assert '"state": "dirty"' in capsys.readouterr().out


@tls_only
def test_another_namespace_is_refused_with_a_clear_error(secure, env, capsys):
    env.point_at(namespace=secure.other)
    with pytest.raises(StoreUnavailableError) as info:
        JrsHook().get_store().get_entry(JOB)
    assert info.value.kind == "noperm" and not info.value.retryable
    op = JrsSparkSubmitOperator(task_id="t", application=TINY_APP, application_args=ARGS, conn_id="spark_local")
    with pytest.raises(AirflowFailException) as failed:
        op.execute(context())
    text = str(failed.value)
    assert "lacks a permission" in text and "docs/security.md" in text and "connection 'jrs_default'" in text
    assert f"127.0.0.1:{secure.tls_port}" in text and "Not retried" in text
    assert op._hook is None and launches(env.calls) == 0
    assert keys_of(secure, secure.other) == []
    assert cli(["list"]) == 3  # the store refused or is unreachable
    assert "lacks a permission" in capsys.readouterr().err


async def _first_event(trigger: JobResultTrigger) -> dict:
    async for event in trigger.run():
        return event.payload
    raise AssertionError("no event")


@tls_only
def test_no_failure_path_shows_a_password(secure, env, capfd, caplog):
    """Store, lease, CLI, trigger and operator failures with a password set: none shows it."""
    caplog.set_level(logging.DEBUG)
    wrong = f"wrong-{uuid.uuid4().hex}"
    seen: list[str] = []

    def record(exc: BaseException) -> None:
        seen.extend([str(exc), repr(exc)])
        cause = exc.__cause__
        while cause is not None:
            seen.extend([str(cause), repr(cause)])
            cause = cause.__cause__

    # 1. right password, another namespace: NOPERM from the store, the lease, the operator, the CLI
    env.point_at(namespace=secure.other)
    hook = JrsHook()
    for action in (
        lambda: hook.get_store().get_entry(JOB),
        lambda: hook.get_store().create_dirty_result(JobResult(job_id=JOB, status=JobStatus.SUCCEEDED)),
        lambda: hook.jobs().lease(JOB).acquire(),
        lambda: JrsSparkSubmitOperator(
            task_id="t", application=TINY_APP, application_args=ARGS, conn_id="spark_local"
        ).execute(context()),
        lambda: JrsCleanupOperator(task_id="c", jobs=[JOB]).execute({"ti": None, "run_id": "r"}),
    ):
        with pytest.raises(Exception) as info:
            action()
        record(info.value)
    seen.append(repr(hook.get_store()))
    assert cli(["list"]) == 3  # the store refused or is unreachable
    kwargs = hook.async_connection_kwargs()
    trigger = JobResultTrigger(connection=kwargs, namespace=secure.other, job_ids=[JOB])
    seen.extend([repr(trigger), repr(asyncio.run(_first_event(trigger)))])
    hook.close()

    # 2. a wrong password, and 3. nothing listening, both with a password in the URL
    for url in (
        f"rediss://{secure.user}:{wrong}@127.0.0.1:{secure.tls_port}/0",
        f"rediss://{secure.user}:{secure.password}@127.0.0.1:{free_port()}/0",
    ):
        env.point_at(url=url, extra="&connect_timeout=0.5&read_timeout=0.5&retry_backoff=0.01")
        for action in (
            lambda: JrsHook().get_store().get_entry(JOB),
            lambda: JrsSparkSubmitOperator(
                task_id="t", application=TINY_APP, application_args=ARGS, conn_id="spark_local"
            ).execute(context()),
            lambda: JrsHook().jobs().lease(JOB).acquire(),
        ):
            with pytest.raises(Exception) as info:
                action()
            record(info.value)
        assert cli(["list"]) == 3  # the store refused or is unreachable
        assert cli(["--redis-url", url, "--namespace", secure.namespace, "list"]) == 3

    out, err = capfd.readouterr()
    logs = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    everything = "\n".join([*seen, out, err, logs])
    assert "lacks a permission" in everything and "needs a password" in everything  # the paths ran
    assert "nothing listens" in everything
    for secret in (secure.password, wrong, secure.admin_password):
        assert secret not in everything
    assert launches(env.calls) == 0
