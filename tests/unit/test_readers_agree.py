"""Every reader of a job's entry answers the same, for every kind of entry.

Readers once disagreed on a quarantined entry (an error in the sensor's trigger, "missing" in
the start-in-triggerer trigger, fail-closed in the store), and "missing" means the job may run
again. Each reader's answer is reduced to one comparable form: ``("none",)``, ``("entry",
state)`` or ``("error", exception name, key)``; every reader must give the store's answer.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest

from airflow_jrs.cli import main as cli_main
from airflow_jrs.store import (
    Actor,
    AsyncRedisJobResultStore,
    EntryState,
    JobResult,
    JobStatus,
    RedisJobResultStore,
    result_to_dict,
)
from airflow_jrs.store.redis.keys import KeySpace

JOB = "readers.agree.2013-01-01"
Answer = tuple


def _seed(kind: str, store: RedisJobResultStore) -> None:
    keys = KeySpace(store.namespace)
    if kind == "dirty":
        store.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.SUCCEEDED, fingerprint="fp"))
    elif kind == "clean":
        store.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.SUCCEEDED, fingerprint="fp"))
        store.mark_result_as_clean(JOB)
    elif kind == "forgotten":  # in history with its note (who, when, why): no result for any reader
        store.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.SUCCEEDED, fingerprint="fp"))
        store.forget_result(JOB, expected=store.get_entry(JOB), actor=Actor.cli())
    elif kind == "corrupt":
        store.client.set(keys.result(JOB), b"\x80 not json")
    elif kind == "quarantined":
        store.client.set(keys.quarantine(JOB), b"\x80 not json")
        store.client.sadd(keys.quarantined, JOB)
    elif kind == "future":
        doc = {"state": "dirty", "v": 99, "result": result_to_dict(JobResult(job_id=JOB, status="SUCCEEDED"))}
        store.client.set(keys.result(JOB), json.dumps(doc))


def _error(exc: Exception) -> Answer:
    return ("error", type(exc).__name__, getattr(exc, "key", None))


def read_sync(redis_url: str, namespace: str) -> Answer:
    try:
        entry = RedisJobResultStore(redis_url, namespace).get_entry(JOB)
    except Exception as exc:
        return _error(exc)
    return ("none",) if entry is None else ("entry", entry.state.value)


def _async_kwargs(redis_url: str) -> dict:
    client = RedisJobResultStore(redis_url, "x").client
    given = client.connection_pool.connection_kwargs
    return {k: given[k] for k in ("host", "port", "db")}


def read_async(redis_url: str, namespace: str) -> Answer:
    async def read() -> Answer:
        store = AsyncRedisJobResultStore(_async_kwargs(redis_url), namespace)
        try:
            entry = await store.get_entry(JOB)
        except Exception as exc:
            return _error(exc)
        finally:
            await store.aclose()
        return ("none",) if entry is None else ("entry", entry.state.value)

    return asyncio.run(read())


def read_sensor_trigger(redis_url: str, namespace: str) -> Answer:
    """The sensor's trigger: its read-and-judge step, with a rule that accepts any result."""
    from airflow_jrs.triggers import JobResultTrigger

    trigger = JobResultTrigger(
        connection=_async_kwargs(redis_url),
        namespace=namespace,
        job_ids=[JOB],
        statuses=[s.value for s in JobStatus],
    )

    async def read() -> Answer:
        store = trigger._new_store()
        try:
            payload = await trigger._check(store)
        finally:
            await store.aclose()
        if payload is None:
            return ("none",)
        if payload["status"] == "error":
            key = KeySpace(namespace)
            named = [k for k in (key.quarantine(JOB), key.result(JOB)) if k in payload["message"]]
            return ("error", payload["error"], named[0] if named else None)
        return ("entry", payload["results"][0]["state"])

    return asyncio.run(read())


def read_start_in_triggerer(redis_url: str, namespace: str, monkeypatch: pytest.MonkeyPatch) -> Answer:
    """The start-in-triggerer trigger: the store it opens from the Airflow connection, and its read."""
    from airflow_jrs.triggers.start_in_triggerer import StartInTriggererSubmitTrigger, _GoToWorker

    monkeypatch.setenv("AIRFLOW_CONN_JRS_DEFAULT", f"{redis_url}?namespace={namespace}")
    trigger = StartInTriggererSubmitTrigger(job_id=JOB, application="/apps/a.py")

    async def read() -> Answer:
        store = await trigger._open()
        try:
            entry = (await trigger._read(store, [JOB]))[JOB]
        except _GoToWorker as exc:  # the reason it hands the worker names the error and the key
            reason = str(exc)
            name = reason.split(":", 1)[0]
            key = KeySpace(namespace)
            named = [k for k in (key.quarantine(JOB), key.result(JOB)) if k in reason]
            return ("error", name, named[0] if named else None)
        finally:
            await trigger._close()
        return ("none",) if entry is None else ("entry", entry.state.value)

    return asyncio.run(read())


def read_cli(redis_url: str, namespace: str, capsys: pytest.CaptureFixture[str]) -> Answer:
    code = cli_main(["--redis-url", redis_url, "--namespace", namespace, "show", "--json", JOB])
    out, _err = capsys.readouterr()
    if code == 0:
        return ("entry", json.loads(out)["state"])
    if code == 1:
        return ("none",)
    # --json prints a failure as one JSON object on stdout (stderr keeps the store's log lines)
    error = json.loads(out)["error"]
    assert error["exit_code"] == code
    name = error["type"]
    key = KeySpace(namespace)
    named = [k for k in (key.quarantine(JOB), key.result(JOB)) if k in error["message"]]
    return ("error", name, named[0] if named else None)


KINDS = ["empty", "dirty", "clean", "forgotten", "corrupt", "quarantined", "future"]
READERS = ["sync store", "async store", "sensor trigger", "start-in-triggerer trigger", "CLI"]


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("kind", KINDS)
def test_every_reader_answers_like_the_store(kind, reader, redis_url, monkeypatch, capsys):
    # Each reader meets a fresh entry of this kind in a namespace of its own (reading a corrupt
    # entry quarantines it: the next reader would see another kind).
    import uuid

    def fresh() -> str:
        ns = f"t-{uuid.uuid4().hex[:12]}"
        _seed(kind, RedisJobResultStore(redis_url, ns))
        return ns

    readers: dict[str, Callable[[str], Answer]] = {
        "sync store": lambda ns: read_sync(redis_url, ns),
        "async store": lambda ns: read_async(redis_url, ns),
        "sensor trigger": lambda ns: read_sensor_trigger(redis_url, ns),
        "start-in-triggerer trigger": lambda ns: read_start_in_triggerer(redis_url, ns, monkeypatch),
        "CLI": lambda ns: read_cli(redis_url, ns, capsys),
    }
    expected_ns, actual_ns = fresh(), fresh()
    expected = read_sync(redis_url, expected_ns)
    actual = readers[reader](actual_ns)
    # Keys differ by namespace only: compare them relative to each namespace.
    assert _relative(actual, actual_ns) == _relative(expected, expected_ns)
    # ...and the store's answer is the one docs/architecture.md asks for.
    want = {
        "empty": ("none",),
        "forgotten": ("none",),
        "dirty": ("entry", EntryState.DIRTY.value),
        "clean": ("entry", EntryState.CLEAN.value),
        "corrupt": ("error", "CorruptJobResultError", "quarantine"),
        "quarantined": ("error", "JobResultQuarantinedError", "quarantine"),
        "future": ("error", "UnsupportedSchemaVersionError", "result"),
    }[kind]
    assert _relative(expected, expected_ns) == want
    if kind == "corrupt":  # whoever read it first moved it aside: the job is blocked, not "missing"
        assert RedisJobResultStore(redis_url, actual_ns).get_quarantined() == [JOB]


def _relative(answer: Answer, namespace: str) -> Answer:
    if answer[0] != "error":
        return answer
    keys = KeySpace(namespace)
    where = {keys.quarantine(JOB): "quarantine", keys.result(JOB): "result"}.get(answer[2], answer[2])
    return (answer[0], answer[1], where)
