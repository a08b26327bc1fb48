"""Spark time spent and avoided on a real Airflow: the plugin's route reads the guarded tasks'
XCom payloads from the metadata DB, and ``airflow-jrs stats`` prints the same figures.

An api-server and a dag-processor (no scheduler: nothing runs by itself), the DAGs of
``stats_dags/`` (``jrs_stats_a``: a guarded ``submit``, a mapped guarded ``per_part`` and an
unguarded ``plain``; ``jrs_stats_b``: a guarded ``submit``), runs triggered and the tasks' payloads
written through Airflow's REST API as the tasks would hand them on (domain/payload.py), and a
user scoped to ``jrs_stats_b`` (:mod:`jrs_testbench.scoped_auth`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_jrs.domain.model import Attempt, EntryState, JobResult, JobStatus
from airflow_jrs.domain.payload import SKIPPED_RESULT_KEY, result_payload
from jrs_testbench.deployment.rest import AirflowClient, ApiError
from jrs_testbench.helpers import jrs_env
from jrs_testbench.scoped_auth import PREFIX, scoped_site

pytestmark = pytest.mark.airflow

DAGS = Path(__file__).parent / "stats_dags"
A, B = "jrs_stats_a", "jrs_stats_b"
SCOPED = f"{PREFIX}{B}"


def run_id(day: int) -> str:
    return f"stats__2013-01-0{day}"


def payload(dag: str, task: str, day: int, seconds: int, *, reused: bool, index: int = -1, **extra: Any) -> dict:
    """What the guarded task hands on: its job's result (which ran ``seconds``), computed or reused."""
    start = datetime(2013, 1, day, 1, tzinfo=UTC)
    job = f"{dag}.{task}.2013-01-0{day}" + (f".map-{index}" if index >= 0 else "")
    result = JobResult(
        job_id=job, status=JobStatus.SUCCEEDED, start_time=start, end_time=start + timedelta(seconds=seconds),
        attempt=Attempt(dag, task, run_id(day), 1, map_index=index),
    )  # fmt: skip
    return result_payload(result, EntryState.CLEAN, skipped=reused, **extra)


@pytest.fixture(scope="module")
def site(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("stats")
    env = jrs_env(redis_url, f"st-{uuid.uuid4().hex[:8]}", data_dir=work / "data")
    airflow, password = scoped_site(work, bundles={"stats": DAGS}, env=env, user=SCOPED)
    with airflow:
        airflow.wait_for_dag(A)
        airflow.wait_for_dag(B)
        admin = airflow.client

        def hand_on(dag: str, task: str, day: int, value: dict, *, key: str = "return_value", index: int = -1) -> None:
            path = f"/api/v2/dags/{dag}/dagRuns/{run_id(day)}/taskInstances/{task}/xcomEntries"
            admin.request("POST", path, {"key": key, "value": value, "map_index": index})

        for day in (1, 2, 3):
            admin.trigger(A, f"2013-01-0{day}T00:00:00+00:00", run_id=run_id(day))
        admin.trigger(B, "2013-01-01T00:00:00+00:00", run_id=run_id(1))
        hand_on(A, "submit", 1, payload(A, "submit", 1, 600, reused=False))
        # skip_when_done: the reused payload goes under jrs_result before the task skips
        hand_on(A, "submit", 2, payload(A, "submit", 1, 600, reused=True), key=SKIPPED_RESULT_KEY)
        hand_on(A, "submit", 3, payload(A, "submit", 1, 600, reused=True, decided_in="triggerer"))
        hand_on(A, "per_part", 3, payload(A, "per_part", 3, 30, reused=False, index=0, adopted_from=4), index=0)
        hand_on(A, "per_part", 3, payload(A, "per_part", 3, 30, reused=True, index=1), index=1)
        hand_on(A, "plain", 1, payload(A, "plain", 1, 9999, reused=True))  # not guarded: not counted
        hand_on(B, "submit", 1, payload(B, "submit", 1, 120, reused=True))
        yield {"airflow": airflow, "scoped": AirflowClient(airflow.url, SCOPED, password), "password": password}


def figures(doc: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(doc[k] for k in ("computed", "reused", "adopted", "untimed", "spent_seconds", "avoided_seconds"))


def test_the_route_counts_guarded_tasks_only_by_dag_and_in_total(site: dict[str, Any]) -> None:
    doc = site["airflow"].client.request("GET", "/jrs/api/stats")
    assert [d["dag_id"] for d in doc["dags"]] == [A, B]  # the most Spark time avoided first
    a, b = doc["dags"]
    assert figures(a) == (2, 3, 1, 0, 630.0, 1230.0) and a["avoided"] == "20 min 30 s"
    assert figures(b) == (0, 1, 0, 0, 0.0, 120.0)
    assert figures(doc["total"]) == (2, 4, 1, 0, 630.0, 1350.0)
    assert doc["since"] == (datetime.now(UTC).date() - timedelta(days=30)).isoformat() + "T00:00:00+00:00"
    later = site["airflow"].client.request("GET", "/jrs/api/stats?since=2999-01-01")
    assert later["dags"] == [] and later["total"]["reused"] == 0
    gone = site["airflow"].client.request("GET", "/jrs/api/stats?dag_id=jrs_no_such_dag")
    assert gone["dags"] == [] and gone["notes"] == [
        "DAG 'jrs_no_such_dag' is not in Airflow's serialized DAGs any more: its tasks are not counted"
    ]


def test_a_user_sees_the_figures_of_the_dags_they_may_read_only(site: dict[str, Any]) -> None:
    scoped = site["scoped"]
    doc = scoped.request("GET", "/jrs/api/stats")
    assert [d["dag_id"] for d in doc["dags"]] == [B] and figures(doc["total"]) == (0, 1, 0, 0, 0.0, 120.0)
    for path in (f"/jrs/api/stats?dag_id={A}", f"/jrs/api/dags/{A}/stats?start=2013-01-01&end=2013-01-03"):
        with pytest.raises(ApiError) as refused:
            scoped.request("GET", path)
        assert refused.value.status == 403, path


def test_the_calendar_figures_are_by_the_calendars_own_logical_dates(site: dict[str, Any]) -> None:
    admin = site["airflow"].client
    doc = admin.request("GET", f"/jrs/api/dags/{A}/stats?start=2013-01-01&end=2013-01-03")
    days = {when[:10]: figures(f) for when, f in doc["dates"].items()}
    assert days == {
        "2013-01-01": (1, 0, 0, 0, 600.0, 0.0),
        "2013-01-02": (0, 1, 0, 0, 0.0, 600.0),
        "2013-01-03": (1, 2, 1, 0, 30.0, 630.0),
    }
    calendar = admin.request("GET", f"/jrs/api/dags/{A}/calendar?start=2013-01-01&end=2013-01-03")
    assert set(doc["dates"]) <= {d["logical_date"] for d in calendar["dates"]}  # the page matches them by key
    one = admin.request("GET", f"/jrs/api/dags/{A}/stats?start=2013-01-02&end=2013-01-02")
    assert list(one["dates"]) == [calendar["dates"][1]["logical_date"]] and one["total"]["reused"] == 1


def _cli(
    site: dict[str, Any], *args: str, user: str = "admin", password: str | None = None
) -> subprocess.CompletedProcess[str]:
    airflow = site["airflow"]
    env = {
        **os.environ,
        "AIRFLOW_JRS_API_URL": airflow.url,
        "AIRFLOW_JRS_API_USERNAME": user,
        "AIRFLOW_JRS_API_PASSWORD": password or airflow.password,
    }
    return subprocess.run(
        [sys.executable, "-m", "airflow_jrs.cli.app", "stats", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_the_cli_prints_what_the_dashboard_shows(site: dict[str, Any]) -> None:
    route = site["airflow"].client.request("GET", "/jrs/api/stats")
    done = _cli(site, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    printed = json.loads(done.stdout)
    assert printed.pop("airflow_url") == site["airflow"].url and printed == route

    table = _cli(site)
    assert table.returncode == 0, table.stderr
    lines = {line.split()[1] if line.split() else "": line for line in table.stdout.splitlines() if "│" in line}
    assert "20 min 30 s" in lines[A] and "2 min 00 s" in lines[B] and "22 min 30 s" in lines["total"]

    refused = _cli(site, "--dag-id", A, user=SCOPED, password=site["password"])
    assert refused.returncode == 2 and "ask for read access to the DAG" in refused.stderr, refused.stderr
