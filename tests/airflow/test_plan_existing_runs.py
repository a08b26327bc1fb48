"""``plan`` names the jobs a run that already exists would run: its own data interval.

A backfill with ``--reprocess-behavior completed`` runs an existing run again as it is: a run
triggered by hand keeps the data interval Airflow gave it (``airflow dags trigger
--logical-date`` infers it from the trigger time). ``plan`` reads the DAG's runs from Airflow's
metadata DB (the session's migrated SQLite) and must name the same jobs: the default job id by
the logical date, a ``job_id`` template on ``data_interval_start`` with that run's interval.
The real-scheduler version of the default job id is ``test_manual_run_identity.py``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from airflow_jrs.store import Attempt, JobResult, JobStatus

pytestmark = pytest.mark.airflow

DAG_FILE = """
from datetime import datetime, UTC
from airflow.sdk import DAG
from airflow_jrs.operators import JrsSparkSubmitOperator

with DAG("{dag_id}", schedule="@daily", start_date=datetime(2013, 1, 1, tzinfo=UTC), catchup=False) as dag:
    JrsSparkSubmitOperator(task_id="by_date", application="/nowhere/app.py", conn_id="spark_local")
    JrsSparkSubmitOperator(
        task_id="by_interval", job_id="{{{{ dag.dag_id }}}}.interval.{{{{ data_interval_start | ds }}}}",
        application="/nowhere/app.py", conn_id="spark_local",
    )
"""
DATE = datetime(2013, 1, 2, tzinfo=UTC)
TRIGGERED = datetime(2026, 11, 27, 8, 35, 47, tzinfo=UTC)


def test_plan_renders_an_existing_manual_run_with_its_own_interval(jrs_env, tmp_path, capsys) -> None:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from airflow.utils.types import DagRunType

    from airflow_jrs.cli import main

    dag_id = f"jrs_plan_runs_{jrs_env.namespace.replace('-', '_')}"  # the session's DB is shared
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "dag.py").write_text(DAG_FILE.format(dag_id=dag_id))
    by_date = f"{dag_id}.by_date.2013-01-02"  # what the manual run's task filed (the default id)
    result = JobResult(job_id=by_date, status=JobStatus.SUCCEEDED, attempt=Attempt(dag_id, "by_date", "m", 1))
    jrs_env.store.create_dirty_result(result)
    jrs_env.store.mark_result_as_clean(by_date)
    with create_session() as session:  # `airflow dags trigger --logical-date 2013-01-02` at TRIGGERED
        session.add(
            DagRun(dag_id=dag_id, run_id=f"manual__{TRIGGERED.isoformat()}", logical_date=DATE,
                   run_type=DagRunType.MANUAL, data_interval=(TRIGGERED, TRIGGERED), run_after=TRIGGERED)
        )  # fmt: skip

    def planned(*argv: str) -> dict:
        capsys.readouterr()
        dates = [
            "--dag-id",
            dag_id,
            "--from-date",
            "2013-01-02",
            "--to-date",
            "2013-01-03",
            "--dags-folder",
            str(folder),
        ]
        assert main(["--json", *argv, *dates]) == 0
        return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]

    plan = planned("plan")
    rows = {(j["logical_date"][:10], j["task_id"]): (j["job_id"], j["status"]) for j in plan["jobs"]}
    assert rows == {
        ("2013-01-02", "by_date"): (by_date, "committed"),
        ("2013-01-02", "by_interval"): (f"{dag_id}.interval.2026-11-27", "missing"),  # the run's own interval
        ("2013-01-03", "by_date"): (f"{dag_id}.by_date.2013-01-03", "missing"),
        ("2013-01-03", "by_interval"): (f"{dag_id}.interval.2013-01-03", "missing"),  # the timetable's
    }, plan
    assert [e["job_id"] for e in planned("forget", "--dry-run")["forget"]] == [by_date]
