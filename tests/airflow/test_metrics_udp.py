"""Airflow metrics of the guard, received by a real UDP listener from Airflow's own StatsD client.

``[metrics]`` is configured the way a deployment does it (``AIRFLOW__METRICS__*``), Airflow's
``Stats`` is started the way its task runner or triggerer starts it on this minor
(:func:`start_airflow_metrics`: ``dag.test()`` runs tasks without the task runner's start-up,
where Airflow would send nothing either), and the product's own path runs: a real guarded task
through ``dag.test()`` (real redis-server, the real Spark provider, spark-submit the stand-in of
:mod:`jrs_testbench.fake_spark`), and the trigger that ends a done task in the triggerer. What
arrives on 127.0.0.1 is parsed as DogStatsD (``statsd_datadog_enabled``: tags survive) or plain
StatsD (tags dropped: the decision is in the name).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import itertools
import os
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_jrs.compat import AIRFLOW_V_3_2_PLUS, AIRFLOW_V_3_3_PLUS
from airflow_jrs.domain.identity import application_fingerprint
from airflow_jrs.domain.signals import run_seconds
from airflow_jrs.observability import metrics
from airflow_jrs.store import Attempt, JobResult, JobStatus
from jrs_testbench.fake_spark import install_fake_spark_submit, launches

pytestmark = pytest.mark.airflow

DAG_FILE = Path(__file__).parent / "dags" / "jrs_safeguard_dags.py"  # one guarded submit task
DAY = datetime(2013, 1, 1, tzinfo=UTC)
JOB = "jrs_safeguard.submit.2013-01-01"
TAGS = {"dag_id": "jrs_safeguard", "task_id": "submit"}
_counter = itertools.count()


class Listener:
    """A UDP socket on 127.0.0.1 standing in for the StatsD / DogStatsD agent."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]

    def metrics(self, prefix: str = "airflow.jrs.") -> list[tuple[str, float, dict[str, str]]]:
        """Every metric received since the last call whose name starts with ``prefix``, as
        ``(name, value, tags)``. Loopback UDP is delivered before ``sendto`` returns: what was
        sent is already queued, so a short idle read ends the drain."""
        lines: list[str] = []
        self.sock.settimeout(0.2)
        while True:
            try:
                data = self.sock.recv(65535)
            except TimeoutError:
                break
            lines += data.decode().splitlines()  # DogStatsD may pack several metrics in one datagram
        found = []
        for line in lines:
            head, _, rest = line.partition("|")
            name, _, value = head.partition(":")
            parts = rest.split("|")
            tags = {}
            for part in parts[1:]:
                if part.startswith("#"):
                    tags = dict(t.split(":", 1) for t in part[1:].split(",") if ":" in t)
            if name.startswith(prefix):
                assert parts[0] == "c", f"{line!r}: every jrs metric is a counter"
                found.append((name, float(value), tags))
        return found

    def close(self) -> None:
        self.sock.close()


def start_airflow_metrics(where: str) -> None:
    """What Airflow runs at the start of a task process (``where`` = worker) or of the triggerer on
    this minor: its ``Stats`` built from ``[metrics]`` as the environment says now."""
    stats = metrics.airflow_stats(where)
    sdk = "airflow.sdk" if where == metrics.WORKER else "airflow"
    if AIRFLOW_V_3_3_PLUS:  # task_runner.main() / TriggererJobRunner._execute()
        stats_utils = importlib.import_module(f"{sdk}.observability.metrics.stats_utils")
        conf = importlib.import_module(
            "airflow.sdk.configuration" if where == metrics.WORKER else "airflow.configuration"
        )
        stats.initialize(
            factory=stats_utils.get_stats_factory(),
            export_legacy_names=conf.conf.getboolean("metrics", "legacy_names_on"),
        )
    elif AIRFLOW_V_3_2_PLUS:
        stats_utils = importlib.import_module(f"{sdk}.observability.metrics.stats_utils")
        stats.initialize(factory=stats_utils.get_stats_factory(stats))
    else:  # 3.1: airflow.stats picks its factory from [metrics] when it is imported, its client on first use
        meta = type(stats)
        if "factory" in vars(meta):
            delattr(meta, "factory")
        meta.__init__(stats)
        stats.instance = None


METRICS_ENV = ("STATSD_ON", "STATSD_DATADOG_ENABLED", "STATSD_HOST", "STATSD_PORT", "STATSD_PREFIX")


@pytest.fixture
def listener() -> Iterator[Listener]:
    found = Listener()
    yield found
    found.close()


def configure(monkeypatch: pytest.MonkeyPatch, port: int, *, datadog: bool, where: str) -> None:
    for key, value in {"STATSD_ON": "True", "STATSD_DATADOG_ENABLED": str(datadog), "STATSD_HOST": "127.0.0.1",
                       "STATSD_PORT": str(port), "STATSD_PREFIX": "airflow"}.items():  # fmt: skip
        monkeypatch.setenv(f"AIRFLOW__METRICS__{key}", value)
    start_airflow_metrics(where)


@pytest.fixture
def airflow_metrics(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Put Airflow's Stats back as they were (off) for the next tests of this process."""
    yield
    for key in METRICS_ENV:
        monkeypatch.delenv(f"AIRFLOW__METRICS__{key}", raising=False)
    for where in (metrics.WORKER, metrics.TRIGGERER):
        start_airflow_metrics(where)


@pytest.fixture
def spark_submit(jrs_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir, calls = install_fake_spark_submit(tmp_path, write_output=True)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return calls


def run_dag() -> dict[str, str | None]:
    spec = importlib.util.spec_from_file_location(f"jrs_metrics_safeguard_dags_{next(_counter)}", DAG_FILE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run = module.dag.test(logical_date=DAY)
    return {ti.task_id: (str(ti.state) if ti.state else None) for ti in run.get_task_instances()}


def test_a_computed_then_a_reused_run_send_their_decisions_tags_and_the_seconds_saved(
    jrs_env, spark_submit, listener, airflow_metrics, monkeypatch
):
    configure(monkeypatch, listener.port, datadog=True, where=metrics.WORKER)
    assert run_dag() == {"submit": "success"} and launches(spark_submit) == 1
    assert listener.metrics() == [("airflow.jrs.decision.launched", 1, TAGS)]

    assert run_dag() == {"submit": "success"} and launches(spark_submit) == 1  # reused: nothing launched
    entry = jrs_env.store.get_entry(JOB)
    assert entry is not None and entry.result.status is JobStatus.SUCCEEDED
    seconds = run_seconds(entry.result)  # end_time - start_time of the reused result, as stored
    assert seconds is not None
    assert listener.metrics() == [
        ("airflow.jrs.decision.skipped", 1, TAGS),
        ("airflow.jrs.skip.saved_seconds", round(seconds), TAGS),
    ]


def test_plain_statsd_drops_the_tags_and_keeps_the_decision_in_the_name(
    jrs_env, spark_submit, listener, airflow_metrics, monkeypatch
):
    configure(monkeypatch, listener.port, datadog=False, where=metrics.WORKER)
    assert run_dag() == {"submit": "success"}
    assert listener.metrics() == [("airflow.jrs.decision.launched", 1, {})]


def test_a_metrics_backend_that_is_down_leaves_the_task_as_it_was_and_is_said_once(
    jrs_env, spark_submit, airflow_metrics, monkeypatch, capfd, caplog
):
    """DogStatsD sends on a connected UDP socket: with nothing listening, every other send hears
    "connection refused" and the client would warn of each dropped packet. The task succeeds,
    computes and then reuses its job as without metrics, and the task log says it once."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    configure(monkeypatch, port, datadog=True, where=metrics.WORKER)
    assert run_dag() == {"submit": "success"} and launches(spark_submit) == 1
    assert run_dag() == {"submit": "success"} and launches(spark_submit) == 1  # the skip sends two in a row
    out, err = capfd.readouterr()
    said = [line for line in (out + err).splitlines() if "airflow-jrs could not send a metric" in line]
    said = said or [r.getMessage() for r in caplog.records if "airflow-jrs could not send a metric" in r.getMessage()]
    assert len(said) == 1 and "Connection refused" in said[0], said


def test_a_skip_decided_in_the_triggerer_is_counted_by_the_triggerers_stats(
    redis_url, namespace, listener, airflow_metrics, monkeypatch, tmp_path
):
    from airflow_jrs.triggers.start_in_triggerer import StartInTriggererSubmitTrigger

    configure(monkeypatch, listener.port, datadog=True, where=metrics.TRIGGERER)
    monkeypatch.setenv("AIRFLOW_CONN_JRS_DEFAULT", f"{redis_url}?namespace={namespace}")
    app = tmp_path / "app.py"
    app.write_text("print('hi')\n")
    start = datetime(2013, 1, 2, tzinfo=UTC)
    from airflow_jrs.store import RedisJobResultStore

    store = RedisJobResultStore(redis_url, namespace)
    store.create_dirty_result(
        JobResult(job_id="d.t.2013-01-01", status=JobStatus.SUCCEEDED, attempt=Attempt("d", "t", "earlier", 1),
                  fingerprint=application_fingerprint(str(app), [], None), start_time=start,
                  end_time=start + timedelta(seconds=90.4))
    )  # fmt: skip
    store.client.close()
    trigger = StartInTriggererSubmitTrigger(job_id="d.t.2013-01-01", application=str(app), application_args=[])
    trigger._context = {
        "ti": SimpleNamespace(dag_id="d", task_id="t"),
        "run_id": "r",
        "dag_run": SimpleNamespace(conf={}),
    }
    pushed: list[Any] = []

    async def push_xcom(key: str, value: Any) -> None:  # the triggerer's Execution API channel
        pushed.append(key)

    monkeypatch.setattr(trigger, "_push_xcom", push_xcom)

    async def decide() -> Any:
        try:
            return await trigger._decide()
        finally:
            await trigger._close()

    assert type(asyncio.run(decide())).__name__ == "TaskSuccessEvent" and pushed == ["return_value"]
    tags = {"dag_id": "d", "task_id": "t"}
    assert listener.metrics() == [
        ("airflow.jrs.decision.skipped", 1, tags),
        ("airflow.jrs.skip.saved_seconds", 90, tags),
    ]
