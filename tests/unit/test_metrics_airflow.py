"""The metrics' Airflow side on this minor: the ``Stats`` they go through is the one Airflow's own
task runner and triggerer emit through, and the adapters count what they meet.

Run on every supported minor (``scripts/older_airflow``: this file reaches Airflow). What the
listener receives from Airflow's real client is in tests/airflow/test_metrics_udp.py.
"""

from __future__ import annotations

import asyncio
import inspect
import socket
import sys
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_jrs.compat import AIRFLOW_V_3_2_PLUS, AIRFLOW_VERSION_TEXT
from airflow_jrs.exceptions import JobResultQuarantinedError, StoreUnavailableError
from airflow_jrs.hooks.store_failures import airflow_failures
from airflow_jrs.observability import metrics
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.triggers import JobResultTrigger

JOB = "dag.task.2013-01-01"


def _emits_through(module: Any, stats: Any) -> bool:
    """Does ``module`` (Airflow's task runner, its triggerer) emit through ``stats``? By name
    ``Stats`` (3.1, 3.2) or as the module-level functions ``stats`` whose shim ``Stats`` is (3.3)."""
    return getattr(module, "Stats", None) is stats or getattr(module, "stats", None) is sys.modules[stats.__module__]


def test_a_task_sends_through_the_stats_airflows_task_runner_initializes_and_emits_through():
    from airflow.sdk.execution_time import task_runner

    stats = metrics.airflow_stats(metrics.WORKER)
    assert _emits_through(task_runner, stats), (AIRFLOW_VERSION_TEXT, stats)
    if AIRFLOW_V_3_2_PLUS:  # 3.1's airflow.stats configures itself from [metrics] on first use
        assert "initialize(" in inspect.getsource(task_runner.main), "the task runner no longer initializes it"


def test_a_trigger_sends_through_the_stats_airflows_triggerer_initializes_and_emits_through():
    from airflow.jobs import triggerer_job_runner

    stats = metrics.airflow_stats(metrics.TRIGGERER)
    assert _emits_through(triggerer_job_runner, stats), (AIRFLOW_VERSION_TEXT, stats)
    if AIRFLOW_V_3_2_PLUS:
        assert "initialize(" in inspect.getsource(triggerer_job_runner.TriggererJobRunner._execute)


class FakeStats:
    def __init__(self) -> None:
        self.sent: list[tuple[str, int, dict[str, str]]] = []

    def incr(self, stat: str, count: int = 1, rate: float = 1, *, tags: dict[str, str] | None = None) -> None:
        self.sent.append((stat, count, dict(tags or {})))


@pytest.fixture
def stats(monkeypatch) -> dict[str, FakeStats]:
    fakes = {metrics.WORKER: FakeStats(), metrics.TRIGGERER: FakeStats()}
    monkeypatch.setattr(metrics, "airflow_stats", fakes.__getitem__)
    return fakes


class Hook:
    """What airflow_failures needs of the hook (StoreConnection)."""

    jrs_conn_id = "jrs_default"

    def server(self) -> str:
        return "127.0.0.1:1"

    def get_connection(self, conn_id: str) -> Any:
        return SimpleNamespace(password=None)


@pytest.mark.parametrize(
    ("error", "metric"),
    [
        (StoreUnavailableError("x", namespace="n", kind="refused", retryable=True), "jrs.store_error.refused"),
        (StoreUnavailableError("x", namespace="n", kind="auth"), "jrs.store_error.auth"),
        (JobResultQuarantinedError("x", job_id=JOB, namespace="n", key="k"), "jrs.read.quarantined"),
    ],
)
def test_a_tasks_store_call_that_fails_counts_its_kind_once_on_the_worker(stats, error, metric):
    with pytest.raises(Exception), airflow_failures(Hook()):  # noqa: B017 - mapped to Airflow's own exceptions
        raise error
    assert stats[metrics.WORKER].sent == [(metric, 1, {})]  # outside a task: no task to tag
    assert stats[metrics.TRIGGERER].sent == []


def test_the_sensors_trigger_counts_a_corrupt_entry_it_quarantined_tagged_with_its_task(
    stats, redis_url, redis_client, namespace
):
    redis_client.set(KeySpace(namespace).result(JOB), b"\x80 not json")
    kwargs = redis_client.connection_pool.connection_kwargs
    trigger = JobResultTrigger(
        connection={"host": kwargs["host"], "port": kwargs["port"]}, namespace=namespace, job_ids=[JOB]
    )
    trigger.task_instance = SimpleNamespace(dag_id="d", task_id="wait")

    async def first() -> Any:
        gen = trigger.run()
        try:
            return await anext(gen)
        finally:
            await gen.aclose()

    assert asyncio.run(first()).payload["error"] == "CorruptJobResultError"
    assert stats[metrics.TRIGGERER].sent == [("jrs.read.quarantined", 1, {"dag_id": "d", "task_id": "wait"})]


def test_the_sensors_trigger_counts_each_lost_connection_by_kind(stats, namespace):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    trigger = JobResultTrigger(connection={"host": "127.0.0.1", "port": port}, namespace=namespace, job_ids=[JOB])

    async def until_two_failures() -> None:
        gen = trigger.run()
        task = asyncio.ensure_future(anext(gen))
        while len(stats[metrics.TRIGGERER].sent) < 2:
            await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(asyncio.wait_for(until_two_failures(), 30))
    assert {s[0] for s in stats[metrics.TRIGGERER].sent} == {"jrs.store_error.refused"}
