"""What the guard tells its signals sink, and how the Airflow sink turns it into metrics.

The protocol half runs the real attempt (real Redis, a launcher that only counts) with a sink
that records what it hears: the decisions come from the protocol's own code. The Airflow half
(:mod:`airflow_jrs.observability.metrics`) is driven with a stand-in for Airflow's ``Stats``
here; tests/airflow/test_metrics_udp.py feeds a real UDP listener from Airflow's own client.
"""

from __future__ import annotations

import ast
import json
import logging
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_jrs.domain import signals
from airflow_jrs.domain.signals import DECISIONS, run_seconds
from airflow_jrs.exceptions import (
    CorruptJobResultError,
    JobResultQuarantinedError,
    JrsConfigError,
    StoreUnavailableError,
)
from airflow_jrs.observability import metrics
from airflow_jrs.protocol import (
    COMPUTED,
    SKIPPED,
    AttemptPolicy,
    JobAttempt,
    JobNamespace,
    JobSpec,
    Predecessor,
    settings_for,
)
from airflow_jrs.spark.commit import marker_path
from airflow_jrs.store import Attempt, JobResult, JobStatus
from airflow_jrs.store.intents import Intent
from airflow_jrs.store.redis.namespace import RedisJobNamespace
from jrs_testbench.launchers import Recording

JOB = "d.t.2013-01-01"
PACKAGE = Path(__file__).parents[2] / "airflow_jrs"


class Heard:
    """A signals sink that records what it hears, as ``(what, dag_id, task_id, extra)``."""

    def __init__(self) -> None:
        self.heard: list[tuple[str, str | None, str | None, Any]] = []

    def decided(self, decision: str, *, dag_id: str | None, task_id: str | None, reused: Any = None) -> None:
        self.heard.append((decision, dag_id, task_id, reused))

    def took_over(self, *, dag_id: str | None, task_id: str | None) -> None:
        self.heard.append(("took_over", dag_id, task_id, None))

    def names(self) -> list[str]:
        return [h[0] for h in self.heard]


class Exploding:
    def decided(self, *args: Any, **kwargs: Any) -> None:
        raise OSError("the metrics backend is down")

    def took_over(self, **kwargs: Any) -> None:
        raise OSError("the metrics backend is down")


@pytest.fixture
def heard() -> Heard:
    return Heard()


@pytest.fixture
def jobs(redis_url, namespace, tmp_path, heard):
    settings = settings_for(namespace, output_root=str(tmp_path / "out"), spec_root=str(tmp_path / "specs"))
    plain = RedisJobNamespace.from_url(redis_url, settings)
    jobs = RedisJobNamespace(plain.client, settings, signals=heard)
    yield jobs
    jobs.close()


def attempt(jobs: JobNamespace, launcher: Recording, try_number: int = 1) -> JobAttempt:
    return JobAttempt(jobs, JobSpec(JOB, "fp"), Attempt("d", "t", "r", try_number), launcher)


# -- the protocol tells ------------------------------------------------------------------------
def test_a_computed_job_tells_launched_and_the_next_attempt_tells_skipped_with_the_reused_result(jobs, heard):
    launcher = Recording()
    assert attempt(jobs, launcher).run().kind == COMPUTED
    assert heard.heard == [(signals.LAUNCHED, "d", "t", None)]
    outcome = attempt(jobs, launcher, try_number=2).run()
    assert outcome.kind == SKIPPED and launcher.launched == 1
    assert heard.names() == [signals.LAUNCHED, signals.SKIPPED]
    reused = heard.heard[1][3]
    assert reused == outcome.result and run_seconds(reused) is not None


def _dead_earlier_try(jobs: JobNamespace, tmp_path: Path, *, finished: bool) -> int:
    """Try 1 of d.t took the lease and recorded its intent, then died (its lease stays): with its
    output committed (``finished``) or not. Returns its fence."""
    lease = jobs.lease(JOB, dag_id="d", task_id="t", run_id="r", map_index=-1, try_number=1)
    fence = lease.acquire()
    staging = tmp_path / f"staging-{int(fence)}"
    staging.mkdir()
    intent = Intent(job_id=JOB, fence=fence, spec_uri=jobs.intents.spec_uri(JOB, fence), staging=str(staging),
                    app_name="a", host="h", pid=1, started_at=0.0, fingerprint="fp")  # fmt: skip
    jobs.intents.record(intent, {"attempt": {"dag_id": "d", "task_id": "t", "run_id": "r", "try_number": 1}})
    if finished:
        Path(marker_path(str(staging))).write_text(json.dumps({"v": 1, "job_id": JOB, "fence": int(fence)}))
    return int(fence)


def test_a_dead_earlier_try_is_taken_over_and_its_finished_output_adopted_without_a_launch(jobs, heard, tmp_path):
    _dead_earlier_try(jobs, tmp_path, finished=True)
    launcher = Recording()
    outcome = attempt(jobs, launcher, try_number=2).run()
    assert outcome.kind == "adopted" and launcher.launched == 0
    assert heard.names() == ["took_over", signals.ADOPTED]
    assert {(h[1], h[2]) for h in heard.heard} == {("d", "t")}


def test_a_dead_earlier_try_without_output_is_taken_over_resubmitted_and_launched(jobs, heard, tmp_path):
    _dead_earlier_try(jobs, tmp_path, finished=False)
    launcher = Recording()
    assert attempt(jobs, launcher, try_number=2).run().kind == COMPUTED
    assert heard.names() == ["took_over", signals.RESUBMITTED, signals.LAUNCHED] and launcher.launched == 1


class OutlivedItsTask(Recording):
    """A launcher that finds the dead try's application still running, once: it ends by the next look."""

    def __init__(self) -> None:
        super().__init__()
        self.stopped = False

    def predecessors_of(self, namespace: str, stale: Intent) -> list[Predecessor]:
        looks = iter([True])
        return [Predecessor("local launch pid 1", alive=lambda: next(looks, False), stop=self._stop)]

    def _stop(self) -> None:
        self.stopped = True


@pytest.mark.parametrize(("policy", "decision"), [("wait", signals.WAITED), ("stop", signals.STOPPED_PREDECESSOR)])
def test_a_predecessor_still_running_is_waited_for_or_stopped_as_the_policy_says(
    jobs, heard, tmp_path, policy, decision
):
    _dead_earlier_try(jobs, tmp_path, finished=True)
    launcher = OutlivedItsTask()
    run = JobAttempt(jobs, JobSpec(JOB, "fp"), Attempt("d", "t", "r", 2), launcher,
                     policy=AttemptPolicy(predecessor=policy))  # fmt: skip
    assert run.run().kind == "adopted" and launcher.stopped == (policy == "stop")
    assert heard.names() == ["took_over", decision, signals.ADOPTED]


def test_a_sink_that_raises_changes_nothing_the_attempt_does(redis_url, namespace, tmp_path):
    settings = settings_for(namespace, output_root=str(tmp_path / "out"), spec_root=str(tmp_path / "specs"))
    plain = RedisJobNamespace.from_url(redis_url, settings)
    jobs = RedisJobNamespace(plain.client, settings, signals=Exploding())
    try:
        _dead_earlier_try(jobs, tmp_path, finished=False)
        launcher = Recording()
        assert attempt(jobs, launcher, try_number=2).run().kind == COMPUTED
        assert attempt(jobs, launcher, try_number=3).run().kind == SKIPPED
        assert launcher.launched == 1
    finally:
        jobs.close()


def test_a_fresh_namespace_keeps_its_signals(jobs, heard):
    fresh = jobs.fresh()
    try:
        assert fresh.signals is heard
    finally:
        fresh.close()


def test_run_seconds_is_the_results_own_run_time_or_none_when_it_cannot_say():
    start = datetime(2013, 1, 1, tzinfo=UTC)
    result = JobResult(
        job_id=JOB, status=JobStatus.SUCCEEDED, start_time=start, end_time=start + timedelta(seconds=90.4)
    )
    assert run_seconds(result) == pytest.approx(90.4)
    assert run_seconds(JobResult(job_id=JOB, status=JobStatus.SUCCEEDED, end_time=start)) is None  # adopted
    backwards = JobResult(job_id=JOB, status=JobStatus.SUCCEEDED, start_time=start, end_time=start - timedelta(1))
    assert run_seconds(backwards) is None


# -- the Airflow sink ----------------------------------------------------------------------------
class FakeStats:
    """Airflow's ``Stats`` as the sink calls it: ``incr(stat, count=..., tags=...)``."""

    def __init__(self, fail: BaseException | None = None) -> None:
        self.sent: list[tuple[str, int, dict[str, str]]] = []
        self.fail = fail

    def incr(self, stat: str, count: int = 1, rate: float = 1, *, tags: dict[str, str] | None = None) -> None:
        if self.fail is not None:
            raise self.fail
        self.sent.append((stat, count, dict(tags or {})))


@pytest.fixture
def stats(monkeypatch) -> FakeStats:
    fake = FakeStats()
    monkeypatch.setattr(metrics, "airflow_stats", lambda where: fake)
    return fake


def test_a_skip_counts_the_decision_and_the_reused_results_seconds_tagged_with_dag_and_task(stats):
    start = datetime(2013, 1, 1, tzinfo=UTC)
    reused = JobResult(
        job_id=JOB, status=JobStatus.SUCCEEDED, start_time=start, end_time=start + timedelta(seconds=90.6)
    )
    metrics.TASK_METRICS.decided(signals.SKIPPED, dag_id="d", task_id="t", reused=reused)
    tags = {"dag_id": "d", "task_id": "t"}
    assert stats.sent == [("jrs.decision.skipped", 1, tags), ("jrs.skip.saved_seconds", 91, tags)]


def test_a_skip_of_a_result_without_a_start_time_counts_no_seconds(stats):
    reused = JobResult(job_id=JOB, status=JobStatus.SUCCEEDED, end_time=datetime(2013, 1, 1, tzinfo=UTC))
    metrics.TRIGGERER_METRICS.decided(signals.SKIPPED, dag_id="d", task_id=None, reused=reused)
    assert stats.sent == [("jrs.decision.skipped", 1, {"dag_id": "d"})]


def test_every_decision_and_a_take_over_have_their_counter(stats):
    for decision in DECISIONS:
        metrics.TASK_METRICS.decided(decision, dag_id="d", task_id="t")
    metrics.TASK_METRICS.took_over(dag_id="d", task_id="t")
    metrics.TASK_METRICS.decided("something new", dag_id="d", task_id="t")  # not a decision it knows: nothing
    assert [s[0] for s in stats.sent] == [f"jrs.decision.{d}" for d in DECISIONS] + ["jrs.lease.took_over"]


@pytest.mark.parametrize(
    ("error", "metric"),
    [
        (StoreUnavailableError("x", namespace="n", kind="timeout", retryable=True), "jrs.store_error.timeout"),
        (StoreUnavailableError("x", namespace="n", kind="not_durable"), "jrs.store_error.not_durable"),
        (StoreUnavailableError("x", namespace="n", kind=None), "jrs.store_error.other"),
        (StoreUnavailableError("x", namespace="n", kind="a.new kind"), "jrs.store_error.other"),
        (CorruptJobResultError("x", job_id=JOB, namespace="n", key="k"), "jrs.read.quarantined"),
        (JobResultQuarantinedError("x", job_id=JOB, namespace="n", key="k"), "jrs.read.quarantined"),
        (JrsConfigError("not the store's failure"), None),
    ],
)
def test_store_errors_count_by_kind_and_quarantined_reads_count_once(stats, error, metric):
    metrics.TASK_METRICS.failed(error, dag_id="d", task_id="t")
    assert [s[0] for s in stats.sent] == ([metric] if metric else [])


def test_a_backend_that_raises_never_reaches_the_caller_and_is_said_once(monkeypatch, caplog):
    monkeypatch.setattr(metrics, "_said", None)
    monkeypatch.setattr(metrics, "airflow_stats", lambda where: FakeStats(fail=OSError("statsd host unreachable")))
    with caplog.at_level(logging.WARNING, logger=metrics.__name__):
        for _ in range(3):
            metrics.TASK_METRICS.decided(signals.LAUNCHED, dag_id="d", task_id="t")
            metrics.TRIGGERER_METRICS.failed(StoreUnavailableError("x", namespace="n"), dag_id="d", task_id="t")
    said = [r.getMessage() for r in caplog.records if r.name == metrics.__name__]
    assert len(said) == 1 and "statsd host unreachable" in said[0] and "does not say it again" in said[0]


# -- the table -------------------------------------------------------------------------------
def test_the_table_names_every_metric_once_in_names_statsd_keeps():
    names = [m.name for m in metrics.METRICS]
    assert len(names) == len(set(names))
    assert {f"jrs.decision.{d}" for d in DECISIONS} <= set(names)
    for name in names:
        filled = name.replace("{kind}", "not_durable")
        assert re.fullmatch(r"[a-z0-9_.]+", filled) and len(filled) < 100, name
    assert all(m.where and set(m.where) <= {metrics.WORKER, metrics.TRIGGERER} for m in metrics.METRICS)


def test_every_kind_the_diagnosis_can_give_has_a_store_error_metric():
    source = (PACKAGE / "store" / "redis" / "diagnosis.py").read_text()
    given = set(re.findall(r'Problem\(\s*"(\w+)"', source))
    assert given and given <= set(metrics.STORE_ERROR_KINDS), given - set(metrics.STORE_ERROR_KINDS)


def test_importing_the_metrics_imports_no_airflow():
    # the docs build imports it for the reference; a task imports Airflow's Stats only when it sends
    code = (
        "import sys, airflow_jrs.observability.metrics; print([m for m in sys.modules if m.split('.')[0] == 'airflow'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


#: Where no metric may be sent from: the API server's page, the CLI, what both call.
NEVER_EMIT = ("cli", "plugins", "views", "actions")


def test_no_module_of_the_cli_or_the_page_reaches_the_metrics():
    offenders = []
    for package in NEVER_EMIT:
        for path in sorted((PACKAGE / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                module = node.module if isinstance(node, ast.ImportFrom) else None
                names = [a.name for a in node.names] if isinstance(node, ast.Import | ast.ImportFrom) else []
                if "airflow_jrs.observability.metrics" in [module, *names] or (
                    module == "airflow_jrs.observability" and "metrics" in names
                ):
                    offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not offenders, f"metrics are sent where the guard decides, never from {NEVER_EMIT}: {offenders}"


def test_the_reference_page_is_generated_from_the_table_and_names_every_metric_and_kind():
    root = PACKAGE.parent
    assert "<!-- jrs-reference: metrics -->" in (root / "docs" / "reference" / "metrics.md").read_text()
    assert "reference/metrics.md" in (root / "mkdocs.yml").read_text()
    sys.path.insert(0, str(root / "scripts"))
    try:
        from jrs_reference.metrics import render_metrics
    finally:
        sys.path.remove(str(root / "scripts"))
    page = render_metrics()
    assert all(f"`{m.name}`" in page for m in metrics.METRICS)
    assert all(f"`{kind}`" in page for kind in metrics.STORE_ERROR_KINDS)


def test_what_a_client_warns_while_sending_ours_is_said_once_and_its_warnings_for_airflow_pass(monkeypatch, caplog):
    client_log = logging.getLogger("datadog.dogstatsd")

    class Refused(FakeStats):  # what DogStatsD does when its agent refuses a packet: warn, drop, go on
        def incr(self, stat: str, count: int = 1, rate: float = 1, *, tags: dict[str, str] | None = None) -> None:
            client_log.warning("Error submitting packet: %s, dropping the packet", "[Errno 111] Connection refused")

    monkeypatch.setattr(metrics, "_said", None)
    monkeypatch.setattr(metrics, "airflow_stats", lambda where: Refused())
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            metrics.TASK_METRICS.decided(signals.LAUNCHED, dag_id="d", task_id="t")
        client_log.warning("Error submitting packet: %s", "Airflow's own ti.start")  # not ours: unchanged
    lines = [(r.name, r.getMessage()) for r in caplog.records]
    assert lines == [
        (metrics.__name__, lines[0][1]),
        ("datadog.dogstatsd", "Error submitting packet: Airflow's own ti.start"),
    ]
    assert "Connection refused" in lines[0][1] and "does not say it again" in lines[0][1]
