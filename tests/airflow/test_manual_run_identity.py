"""A run triggered by hand for a past date is that date's job, on a real scheduler.

api-server, dag-processor and scheduler (LocalExecutor, SQLite), the session's redis-server and
the stand-in spark-submit (:mod:`jrs_testbench.fake_spark`: one line per launch; this is about
which job a run names, not about Spark). Both DAGs use the default job ids.

* ``airflow dags trigger --logical-date 2013-01-02`` (the CLI: its data interval is the trigger
  time) on ``@daily`` and ``POST /api/v2/dags/.../dagRuns`` with that logical date (REST and the
  UI: ``[2013-01-01, 2013-01-02]`` on a cron data-interval timetable, which used to be the
  previous date's job) both file their result under ``<dag>.sales.submit.2013-01-02``;
* ``airflow-jrs plan``, ``backfill --missing-only --dry-run`` and ``forget --from-date --dry-run``
  see exactly that job, committed;
* an Airflow backfill over 2013-01-01..02 with ``--reprocess-behavior completed`` launches the new
  date's job (``...2013-01-01``, named the same way) and none for 2013-01-02: it re-runs the manual
  run (relabelled ``backfill``, its interval kept) and the task finds the job done;
* two runs whose logical dates are less than a second apart (``TriggerDagRunOperator`` stamps its
  runs with the trigger time) are two jobs: two job ids, two launches.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_jrs.cli import main
from airflow_jrs.store import JobStatus, RedisJobResultStore
from jrs_testbench.deployment import LocalDeployment
from jrs_testbench.fake_spark import install_fake_spark_submit
from jrs_testbench.helpers import jrs_env

pytestmark = pytest.mark.airflow

DAGS = Path(__file__).parent / "identity_dags"
CLI_DAG, REST_DAG, SUBSECOND_DAG = "jrs_manual_cli", "jrs_manual_rest", "jrs_subsecond"
DATE = "2013-01-02"


@pytest.fixture(scope="module")
def site(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    work = tmp_path_factory.mktemp("manual-identity")
    namespace = f"mi-{uuid.uuid4().hex[:8]}"
    bin_dir, calls = install_fake_spark_submit(work, write_output=True)
    env = jrs_env(redis_url, namespace, data_dir=work / "data")
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    airflow = LocalDeployment(
        work / "airflow", bundles={"mi": DAGS}, env=env, components=("api-server", "dag-processor", "scheduler")
    )
    store = RedisJobResultStore(redis_url, namespace)
    with airflow:
        for dag_id in (CLI_DAG, REST_DAG, SUBSECOND_DAG):
            airflow.wait_for_dag(dag_id)
            airflow.client.unpause(dag_id)  # a paused DAG's runs stay queued
        yield {"airflow": airflow, "store": store, "calls": calls, "redis_url": redis_url, "namespace": namespace}
    store.client.close()


def launched_jobs(calls: Path, *dag_ids: str) -> list[str]:
    """Job ids the stand-in spark-submit was launched for (one line per launch), of ``dag_ids``."""
    lines = calls.read_text().splitlines() if calls.exists() else []
    jobs = [w.split("=", 1)[1] for line in lines for w in line.split() if w.startswith("spark.jrs.job_id=")]
    return [job for job in jobs if job.split(".", 1)[0] in dag_ids]


def jrs(site: dict, capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    """``airflow-jrs --json ...`` in this process against the deployment's store; its JSON document."""
    capsys.readouterr()
    assert main(["--json", "--redis-url", site["redis_url"], "--namespace", site["namespace"], *argv]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def dag_range(dag_id: str) -> list[str]:
    return ["--dag-id", dag_id, "--from-date", DATE, "--to-date", DATE, "--dags-folder", str(DAGS)]


def finished(site: dict, dag_id: str, run_id: str) -> dict:
    airflow = site["airflow"]
    run = airflow.client.wait_for_run(dag_id, run_id, timeout=300)
    assert run["state"] == "success", f"{airflow.client.task_states(dag_id, run_id)}\n{airflow.logs_tail()}"
    return run  # type: ignore[no-any-return]


def test_a_manual_run_of_a_past_date_is_that_dates_job(site: dict, capsys: pytest.CaptureFixture[str]) -> None:
    airflow, store = site["airflow"], site["store"]
    proc = airflow.airflow("dags", "trigger", CLI_DAG, "--logical-date", f"{DATE}T00:00:00+00:00", "-o", "json")
    by_cli = json.loads(proc.stdout.strip().splitlines()[-1])[0]["dag_run_id"]
    by_rest = airflow.client.trigger(REST_DAG, f"{DATE}T00:00:00Z")["dag_run_id"]
    runs = {CLI_DAG: finished(site, CLI_DAG, by_cli), REST_DAG: finished(site, REST_DAG, by_rest)}

    # The premise: Airflow gives these runs a data interval that is not their date's.
    assert not runs[CLI_DAG]["data_interval_start"].startswith(DATE)  # the trigger time
    assert runs[REST_DAG]["data_interval_start"].startswith("2013-01-01")  # [date - 1 day, date]
    expected = {dag_id: f"{dag_id}.sales.submit.{DATE}" for dag_id in runs}
    assert sorted(launched_jobs(site["calls"], CLI_DAG, REST_DAG)) == sorted(expected.values())
    for job_id in expected.values():
        entry = store.get_entry(job_id)
        assert entry is not None and entry.result.status is JobStatus.SUCCEEDED and entry.is_clean, job_id

    for dag_id, job_id in expected.items():
        plan = jrs(site, capsys, "plan", *dag_range(dag_id))
        assert [(j["job_id"], j["status"], j["backfill"]) for j in plan["jobs"]] == [(job_id, "committed", "skip")]
        missing = jrs(site, capsys, "backfill", *dag_range(dag_id), "--missing-only", "--dry-run")
        assert missing["summary"]["dates_to_run"] == 0, missing
        forget = jrs(site, capsys, "forget", *dag_range(dag_id), "--dry-run")
        assert [e["job_id"] for e in forget["forget"]] == [job_id]

    # Airflow's own backfill: a new run for 2013-01-01, the manual run of 2013-01-02 run again.
    result = airflow.backfills.run(CLI_DAG, "2013-01-01", DATE, "completed", via="rest", complete=True)
    dated = {r["logical_date"][:10]: r for r in airflow.client.dag_runs(CLI_DAG)}
    assert {d: (r["run_type"], r["state"]) for d, r in dated.items()} == {
        "2013-01-01": ("backfill", "success"),
        DATE: ("backfill", "success"),  # relabelled by the backfill; its trigger-time interval kept
    }, result
    assert dated[DATE]["dag_run_id"] == by_cli
    launched = launched_jobs(site["calls"], CLI_DAG, REST_DAG)
    assert sorted(launched) == sorted([*expected.values(), f"{CLI_DAG}.sales.submit.2013-01-01"])


def test_two_runs_less_than_a_second_apart_are_two_jobs(site: dict) -> None:
    # As two TriggerDagRunOperator tasks of one fan-out stamp them: the trigger time, one second.
    airflow, store = site["airflow"], site["store"]
    dates = ["2013-01-03T10:00:00.250000Z", "2013-01-03T10:00:00.750000Z"]
    run_ids = [airflow.client.trigger(SUBSECOND_DAG, date)["dag_run_id"] for date in dates]
    runs = [finished(site, SUBSECOND_DAG, run_id) for run_id in run_ids]
    assert [run["logical_date"][:26] for run in runs] == [date[:26] for date in dates]  # the fraction arrived

    expected = [f"{SUBSECOND_DAG}.sales.submit.2013-01-03T100000.{micros}Z" for micros in ("250000", "750000")]
    assert sorted(launched_jobs(site["calls"], SUBSECOND_DAG)) == expected, "one run skipped with the other's output"
    outputs = set()
    for job_id, run_id in zip(expected, run_ids, strict=True):
        entry = store.get_entry(job_id)
        assert entry is not None and entry.result.status is JobStatus.SUCCEEDED, job_id
        assert entry.result.attempt is not None and entry.result.attempt.run_id == run_id
        outputs.add(entry.result.outputs["output"])
    assert len(outputs) == 2
