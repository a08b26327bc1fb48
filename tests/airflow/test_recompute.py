"""Recompute on purpose with the DAG run's conf (``jrs_recompute``), and what a reused result says.

The fast cases call the operator with a hand-made context against a real Redis and prove "no
Spark" by the absence of a Spark hook and of event logs; the last one runs real spark-submit
through dag.test with a run conf, as "Trigger DAG w/ config" would.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException
from dag_runner import run_dag

from airflow_jrs.domain.identity import fingerprint
from airflow_jrs.domain.paths import fence_token_of
from airflow_jrs.operators import JrsSparkSubmitOperator
from airflow_jrs.store import Attempt, JobResult, JobStatus
from airflow_jrs.store.leases.lease import default_owner
from airflow_jrs.store.redis.leases import RedisJobLease

pytestmark = pytest.mark.airflow

DAY = datetime(2013, 1, 1, tzinfo=UTC)
JOB = "d.t.2013-01-01"
RUN = "scheduled__2013-01-01"


def met_before_any_lease(jrs_env, job_id: str, run_id: str) -> None:
    """Record that ``run_id``'s request met ``job_id`` on DAY, before any lease of the namespace
    (fence counter 0): the mark an attempt of that run would have left then (store/recompute_requests.py)."""
    mark = {"at_ms": int(DAY.timestamp() * 1000), "fence": 0, "in_flight": None}
    jrs_env.store.client.hset(jrs_env.store.keys.recompute_requests(job_id), run_id, json.dumps(mark))


def context(conf=None, run_id="manual__again"):
    ti = SimpleNamespace(dag_id="d", task_id="t", try_number=1, map_index=-1, xcom_push=lambda **kw: None)
    return {
        "ti": ti, "run_id": run_id, "data_interval_start": DAY, "logical_date": DAY,
        "dag_run": SimpleNamespace(conf=conf or {}),
    }  # fmt: skip


@pytest.fixture
def committed(jrs_env, tmp_path):
    """A committed result of job d.t.2013-01-01, computed by run RUN, and an operator for it
    whose application fails loudly if Spark ever starts."""
    app = tmp_path / "app.py"
    app.write_text("raise SystemExit('Spark must not run')\n")
    args = ["--output", "{jrs_output}"]
    fp = fingerprint(application_bytes=app.read_bytes(), application=str(app), application_args=args, job_version=None)
    result = JobResult(
        job_id=JOB, status=JobStatus.SUCCEEDED, fingerprint=fp, end_time=DAY,
        attempt=Attempt(dag_id="d", task_id="t", run_id=RUN, try_number=1),
    )  # fmt: skip
    jrs_env.store.create_dirty_result(result)
    jrs_env.store.mark_result_as_clean(JOB)
    op = JrsSparkSubmitOperator(
        task_id="t", application=str(app), application_args=args, conn_id="spark_local", conf=jrs_env.spark_conf()
    )
    return op


def test_a_reused_result_says_which_run_computed_it_and_how_to_recompute(jrs_env, committed, capfd):
    payload = committed.execute(context())
    assert payload["reused"] is True and payload["skipped"] is True
    assert payload["attempt"]["run_id"] == RUN
    out, err = capfd.readouterr()
    lines = [line for line in (out + err).splitlines() if "reusing" in line]
    assert len(lines) == 1, lines  # once, not by the attempt and again by the operator
    line = lines[0]
    assert f"Job {JOB}: reusing its SUCCEEDED result (clean)" in line and f"by run {RUN}" in line
    assert f"airflow-jrs recompute {JOB}" in line and "Recompute button" in line
    assert committed._hook is None and jrs_env.launches() == 0


@pytest.mark.parametrize("conf", [{"jrs_recompute": False}, {"jrs_recompute": ["other_task", "d.t.2013-01-02"]}])
def test_a_conf_that_does_not_name_the_job_reuses_it(jrs_env, committed, conf):
    assert committed.execute(context(conf))["reused"] is True
    assert committed._hook is None and jrs_env.launches() == 0


def test_a_recompute_run_does_not_recompute_what_it_computed_after_its_request(jrs_env, committed):
    # a retry or clear of a task of the recompute run: its request met the job before the
    # run computed it (recorded when it first met it), so its own fresh result is reused
    met_before_any_lease(jrs_env, JOB, RUN)
    assert committed.execute(context({"jrs_recompute": True}, run_id=RUN))["reused"] is True
    assert committed._hook is None and jrs_env.launches() == 0


def test_a_retry_of_a_run_carrying_a_request_reuses_what_another_run_computed_after_it(jrs_env, tmp_path):
    """A recompute request acts once: the request of run S must act once. S's first try meets the request
    while run M computes the job (it waits for M's lease and fails); M commits; S's retry,
    or a clear or backfill of S (which keep its conf), must reuse M's fresh result."""
    app = tmp_path / "app.py"
    app.write_text("raise SystemExit('Spark must not run')\n")
    args = ["--output", "{jrs_output}"]
    op = JrsSparkSubmitOperator(
        task_id="t", application=str(app), application_args=args, conn_id="spark_local", conf=jrs_env.spark_conf()
    )
    conf, s_run = {"jrs_recompute": True}, "backfill__2013-01-01T00:00:00+00:00"
    other = RedisJobLease(jrs_env.store.client, jrs_env.namespace, JOB, owner=default_owner(run_id="manual__m"))
    other.acquire()
    with pytest.raises(AirflowException, match="lease held by"):
        op.execute(context(conf, run_id=s_run))  # S's first try: M holds the job
    fp = fingerprint(application_bytes=app.read_bytes(), application=str(app), application_args=args, job_version=None)
    m_result = JobResult(
        job_id=JOB, status=JobStatus.SUCCEEDED, fingerprint=fp, end_time=DAY,
        attempt=Attempt(dag_id="d", task_id="t", run_id="manual__m", try_number=1),
    )  # fmt: skip
    jrs_env.store.create_dirty_result(m_result, fence=other.token)
    other.release()

    payload = op.execute(context(conf, run_id=s_run))  # S's retry (or a clear, or a backfill of S)
    assert payload["reused"] is True and payload["attempt"]["run_id"] == "manual__m"
    assert op._hook is None and jrs_env.launches() == 0
    assert jrs_env.store.get_history(JOB) == []  # nothing was forgotten


def test_an_unreadable_recompute_value_fails_without_retries_and_reuses_nothing(jrs_env, committed):
    with pytest.raises(AirflowFailException, match="jrs_recompute"):
        committed.execute(context({"jrs_recompute": {"t": 1}}))
    assert committed._hook is None and jrs_env.launches() == 0


@pytest.mark.spark
def test_run_conf_recomputes_the_job_once_and_keeps_the_old_result_in_history(jrs_env, monkeypatch):
    monkeypatch.setenv("JRS_TEST_SPARK_CONF", json.dumps(jrs_env.spark_conf()))
    for name in ("JRS_TEST_APP_ARGS", "JRS_TEST_JOB_VERSION", "JRS_TEST_RETRIES", "JRS_TEST_EXEC_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    job = "jrs_tiny.submit.2013-01-01"
    assert run_dag() == {"submit": "success", "cleanup": "success"}
    first = jrs_env.store.get_entry(job).result
    assert run_dag(run_conf={"jrs_recompute": ["cleanup"]})["submit"] == "success"  # names no submit task
    assert jrs_env.launches() == 1

    assert run_dag(run_conf={"jrs_recompute": ["submit"]}) == {"submit": "success", "cleanup": "success"}
    assert jrs_env.launches() == 2
    entry = jrs_env.store.get_entry(job)
    assert entry.is_clean and entry.result.fence > first.fence
    assert [e.result for e in jrs_env.store.get_history(job)] == [first]
    moved = jrs_env.store.get_history(job)[0].moved  # who recomputed it, and why (the history note)
    assert moved is not None and moved.reason == "recomputed" and moved.actor is not None
    assert moved.actor.via == "task" and moved.actor.attempt is not None and moved.actor.attempt.task_id == "submit"
    job_dir = jrs_env.output_root / jrs_env.namespace / job
    assert [fence_token_of(p.name) for p in job_dir.iterdir()] == [entry.result.fence]

    assert run_dag() == {"submit": "success", "cleanup": "success"}  # no conf: the new result is reused
    assert jrs_env.launches() == 2


PLAN_DAG = """
from datetime import datetime, UTC
from airflow.sdk import DAG
from airflow_jrs.operators import JrsSparkSubmitOperator

with DAG("{dag_id}", schedule="@daily", start_date=datetime(2013, 1, 1, tzinfo=UTC), catchup=False) as dag:
    JrsSparkSubmitOperator(task_id="daily", application="/nowhere/app.py", conn_id="spark_local")
"""


def test_plan_tells_what_a_backfill_does_with_a_run_that_carries_a_recompute_request(jrs_env, tmp_path, capsys):
    """A recompute request acts once, and ``plan`` says so: it said "skip" for a date whose run
    carried ``jrs_recompute``, and the backfill recomputed it. Now it applies the task's rule to
    the run's conf in Airflow's DB."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from airflow.utils.types import DagRunType

    from airflow_jrs.cli import main

    dag_id = f"jrs_plan_{jrs_env.namespace.replace('-', '_')}"  # the session's DB is shared: a DAG of its own
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "plan_dag.py").write_text(PLAN_DAG.format(dag_id=dag_id))
    job_id = f"{dag_id}.daily.2013-01-01"
    result = JobResult(job_id=job_id, status=JobStatus.SUCCEEDED, attempt=Attempt(dag_id, "daily", "old", 1))
    jrs_env.store.create_dirty_result(result)
    jrs_env.store.mark_result_as_clean(job_id)
    run_id = "backfill__2013-01-01T00:00:00+00:00"
    with create_session() as session:  # the run a backfill --dag-run-conf left behind
        session.add(
            DagRun(dag_id=dag_id, run_id=run_id, logical_date=DAY, run_type=DagRunType.BACKFILL_JOB,
                   conf={"jrs_recompute": True}, run_after=DAY)
        )  # fmt: skip
    args = ["--json", "plan", "--dag-id", dag_id, "--from-date", "2013-01-01", "--to-date", "2013-01-01"]
    args += ["--dags-folder", str(folder)]

    def planned() -> dict:
        assert main(args) == 0
        (row,) = json.loads(capsys.readouterr().out)["jobs"]
        return row

    row = planned()  # the run's task has not met its request yet: the backfill recomputes
    assert (row["status"], row["backfill"]) == ("committed", "run"), row
    assert f"run {run_id}" in row["reason"] and "acts once, now" in row["reason"]

    # once the run's task met the request before this result was written, the request is met
    met_before_any_lease(jrs_env, job_id, run_id)
    row = planned()
    assert (row["status"], row["backfill"]) == ("committed", "skip"), row
    assert "met already" in row["reason"]
