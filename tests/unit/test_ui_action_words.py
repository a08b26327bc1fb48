"""Review fixes on the actions the Job results page shares with the CLI (H8).

* A plan reads the serialized DAG (the API server never imports a DAG file).
* An action's error carries a hint per caller: the CLI keeps its flags, the page gets words.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import redis

from airflow_jrs.actions import CLI, UI, ActionError, recompute
from airflow_jrs.actions.airflow_api import AirflowApi
from airflow_jrs.actions.planning import dags
from airflow_jrs.protocol import JobNamespace, settings_for
from airflow_jrs.store import Actor, Attempt, JobResult, JobStatus
from airflow_jrs.store.redis.namespace import RedisJobNamespace

COUNTED_DAG = """
from datetime import datetime, UTC
from airflow.sdk import DAG
from airflow_jrs.operators import JrsSparkSubmitOperator

with open({counter!r}, "a") as f:  # one line per parse: the file's code runs at each
    f.write("parsed\\n")

with DAG("jrs_counted", schedule="@daily", start_date=datetime(2013, 1, 1, tzinfo=UTC), catchup=False):
    JrsSparkSubmitOperator(task_id="daily", application="/nowhere/app.py", conn_id="spark_local")

with DAG("jrs_secret_other", schedule=None):
    pass
"""


@pytest.fixture
def counted(dag_folder: Callable[[str, str], str], tmp_path: Path) -> tuple[str, Path]:
    counter = tmp_path / "parses.txt"
    folder = dag_folder("jrs_counted.py", COUNTED_DAG.format(counter=str(counter)))
    return os.path.join(folder, "jrs_counted.py"), counter


def test_a_plan_reads_the_dag_in_its_serialized_form(counted: tuple[str, Path]) -> None:
    """What the CLI plans from is what the dag-processor stores and the page reads: the
    serialized DAG (docs/threat-model.md, "The API server runs no DAG code")."""
    fileloc, _counter = counted
    dag = dags.load_dag("jrs_counted", fileloc)
    assert type(dag).__name__ == "SerializedDAG"
    assert type(dag.get_task("daily")).__name__ == "SerializedBaseOperator"


def test_a_dag_its_file_no_longer_defines_is_refused_by_name(counted: tuple[str, Path]) -> None:
    fileloc, _counter = counted
    with pytest.raises(ActionError) as caught:
        dags.load_dag("jrs_renamed", fileloc)
    assert caught.value.kind == "not_found" and "'jrs_renamed'" in str(caught.value)
    assert "--dag-id" in caught.value.text(CLI)


@pytest.fixture
def jobs(redis_url: str, namespace: str, tmp_path: Path) -> Iterator[JobNamespace]:
    client = redis.Redis.from_url(redis_url)
    settings = settings_for(namespace, output_root=str(tmp_path / "out"), spec_root=str(tmp_path / "specs"))
    yield RedisJobNamespace(client, settings)
    client.close()


def test_an_unknown_task_is_told_per_caller(counted: tuple[str, Path], jobs: JobNamespace) -> None:
    dag = dags.load_dag("jrs_counted", counted[0])
    day = datetime(2013, 1, 2, tzinfo=UTC)
    with pytest.raises(ActionError) as caught:
        recompute.by_dates(jobs, None, dag, day, day, ["nope"])
    assert str(caught.value) == "DAG 'jrs_counted' has no guarded Spark task named ['nope']; check --task"
    assert caught.value.text(UI) == (
        "DAG 'jrs_counted' has no guarded Spark task named ['nope']; choose tasks among the calendar's columns"
    )


CHAIN_DAG = """
from datetime import datetime, UTC
from airflow.sdk import DAG
from airflow_jrs.operators import JrsSparkSubmitOperator

with DAG("jrs_chain", schedule="@daily", start_date=datetime(2013, 1, 1, tzinfo=UTC), catchup=False):
    a = JrsSparkSubmitOperator(task_id="a", application="/nowhere/app.py", conn_id="spark_local")
    b = JrsSparkSubmitOperator(task_id="b", application="/nowhere/app.py", conn_id="spark_local")
    a >> b
"""


@pytest.fixture
def chain(dag_folder: Callable[[str, str], str]) -> object:
    folder = dag_folder("jrs_chain.py", CHAIN_DAG)
    return dags.load_dag("jrs_chain", os.path.join(folder, "jrs_chain.py"))


def test_a_viewers_preview_names_downstream_tasks_without_asking_airflow_to_clear(
    chain: object, jobs: JobNamespace
) -> None:
    # port 9 (discard) answers nothing: were the dry-run clear asked, the preview would fail
    api = AirflowApi("http://127.0.0.1:9", token="viewer-token", timeout=2)
    day = datetime(2013, 1, 2, tzinfo=UTC)
    targets = recompute.by_dates(jobs, None, chain, day, day, ["a"])
    for t in targets:
        t.run_id = "scheduled__2013-01-02T00:00:00+00:00"
    notes = recompute.preview(jobs, api, targets, dag=chain, may_clear=False)
    assert [t.task_id for t in targets] == ["a"]  # nothing guessed into the list
    assert len(notes) == 1 and "(b)" in notes[0] and "may edit the DAG" in notes[0]


def test_a_range_recompute_leaves_another_dags_result_alone(chain: object, jobs: JobNamespace) -> None:
    day = datetime(2013, 1, 2, tzinfo=UTC)
    planned = recompute.by_dates(jobs, None, chain, day, day)
    mine, theirs = planned[0].job_id, planned[1].job_id
    results = jobs.results
    results.create_dirty_result(JobResult(mine, JobStatus.SUCCEEDED, attempt=Attempt("jrs_chain", "a", "r", 1)))
    results.create_dirty_result(JobResult(theirs, JobStatus.SUCCEEDED, attempt=Attempt("other_dag", "x", "r", 1)))
    targets = recompute.by_dates(jobs, None, chain, day, day)
    recompute.leave_foreign_alone(results, targets, lambda dag_id: dag_id == "jrs_chain")
    recompute.forget(results, targets, Actor(via="ui", user="editor"))
    assert results.get_entry(mine) is None and results.get_entry(theirs) is not None
    kept = next(t for t in targets if t.job_id == theirs)
    assert kept.left_alone and not kept.forgotten and "DAG 'other_dag'" in kept.note


class _Session:
    """Where Airflow's ``action_logging`` puts its Log row (the metadata DB's session)."""

    def __init__(self) -> None:
        self.added: list[Any] = []

    def add(self, row: Any) -> None:
        self.added.append(row)

    def commit(self) -> None:
        pass


class _User:
    def get_name(self) -> str:
        return "viewer"


def test_previews_are_not_audited_as_writes_and_acting_is() -> None:
    from airflow.api_fastapi.common.db.common import _get_session
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from airflow_jrs.plugins.routes.dags import AUDIT_RECOMPUTE

    session = _Session()
    app = FastAPI()

    @app.post("/api/dags/{dag_id}/recompute", dependencies=AUDIT_RECOMPUTE)
    def act(dag_id: str) -> dict[str, str]:
        return {"dag_id": dag_id}

    app.dependency_overrides[_get_session] = lambda: session
    app.dependency_overrides[get_user] = _User
    with TestClient(app) as client:
        for body in ({"start": "2024-01-01", "end": "2024-01-02"}, {"dry_run": True}, None):
            assert client.post("/api/dags/d/recompute", json=body).status_code == 200
        assert session.added == []  # three previews: no audit entry
        assert client.post("/api/dags/d/recompute", json={"dry_run": False}).status_code == 200
    assert [(row.event, row.dag_id, row.owner) for row in session.added] == [("jrs_recompute_range", "d", "viewer")]


def test_a_forget_acts_on_the_entry_the_rights_were_checked_on(jobs: JobNamespace) -> None:
    from airflow_jrs.actions import writes
    from airflow_jrs.exceptions import JobResultEntryChangedError

    results = jobs.results
    results.create_dirty_result(JobResult("shared.job", JobStatus.SUCCEEDED, attempt=Attempt("dag_a", "t", "r", 1)))
    authorized = results.get_entry("shared.job")  # the page checks the user may edit dag_a on this one
    # meanwhile dag_b, which the user may not edit, writes the job anew
    results.forget_result("shared.job", expected=authorized, actor=Actor(via="cli"))
    results.create_dirty_result(JobResult("shared.job", JobStatus.SUCCEEDED, attempt=Attempt("dag_b", "t", "r", 1)))
    with pytest.raises(JobResultEntryChangedError):
        writes.forget(results, "shared.job", Actor(via="ui", user="editor"), entry=authorized)
    kept = results.get_entry("shared.job")
    assert kept is not None and kept.result.attempt is not None and kept.result.attempt.dag_id == "dag_b"


def test_a_mark_clean_marks_only_the_entry_the_rights_were_checked_on(jobs: JobNamespace) -> None:
    from airflow_jrs.actions import writes
    from airflow_jrs.exceptions import JobResultEntryChangedError

    results = jobs.results
    results.create_dirty_result(JobResult("shared.job", JobStatus.SUCCEEDED, attempt=Attempt("dag_a", "t", "r", 1)))
    authorized = results.get_entry("shared.job")
    results.forget_result("shared.job", expected=authorized, actor=Actor(via="cli"))
    results.create_dirty_result(JobResult("shared.job", JobStatus.SUCCEEDED, attempt=Attempt("dag_b", "t", "r", 1)))
    with pytest.raises(JobResultEntryChangedError):
        writes.mark_clean(results, "shared.job", "the test's namespace", entry=authorized)
    kept = results.get_entry("shared.job")
    assert kept is not None and kept.is_dirty  # dag_b's result keeps its pending cleanup
