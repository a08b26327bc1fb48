"""The Job results API over a DAG's dates on a real Airflow: api-server, dag-processor, scheduler.

The missing-only harness (:mod:`tests.airflow.test_backfill_missing_only`): LocalExecutor, the
session's redis-server, the stand-in spark-submit (one line per launch). The page's calendar
shows each date's jobs as the store has them; "Backfill missing dates" previews, then creates
runs only for the dates that need one (the CLI's own functions, through Airflow's REST API with
the signed-in user's token); "Recompute" over a date range forgets and clears the runs' tasks,
and Spark runs again for exactly those jobs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_jrs.store import Attempt, JobResult, JobStatus, RedisJobResultStore
from jrs_testbench.deployment import LocalDeployment
from jrs_testbench.fake_spark import install_fake_spark_submit
from jrs_testbench.helpers import jrs_env

pytestmark = pytest.mark.airflow

DAGS = Path(__file__).parent / "missing_only_dags"
DAG_ID = "jrs_missing_only"
DAYS = [date(2013, 1, 1) + timedelta(days=i) for i in range(4)]
A, B = "a.submit", "b.submit"  # the guarded tasks (jrs_spark_job makes a group)


@pytest.fixture(scope="module")
def site(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("ui-dates")
    namespace = f"uid-{uuid.uuid4().hex[:8]}"
    bin_dir, calls = install_fake_spark_submit(work, write_output=True)
    env = jrs_env(redis_url, namespace, data_dir=work / "data")
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    airflow = LocalDeployment(
        work / "airflow", bundles={"mo": DAGS}, env=env, components=("api-server", "dag-processor", "scheduler")
    )
    store = RedisJobResultStore(redis_url, namespace)
    with airflow:
        airflow.wait_for_dag(DAG_ID)
        airflow.client.unpause(DAG_ID)
        yield {"airflow": airflow, "store": store, "calls": calls}
    store.client.close()


def _launched(calls: Path) -> list[str]:
    if not calls.exists():
        return []
    return [w.split("=", 1)[1] for line in calls.read_text().splitlines() for w in line.split()
            if w.startswith("spark.jrs.job_id=")]  # fmt: skip


def _commit(
    store: RedisJobResultStore, job_id: str, status: JobStatus = JobStatus.SUCCEEDED, clean: bool = True
) -> None:
    store.create_dirty_result(JobResult(job_id=job_id, status=status, attempt=Attempt(DAG_ID, "t", "r", 1)))
    if clean:
        store.mark_result_as_clean(job_id)


def _runs(client: Any) -> dict[str, dict[str, Any]]:
    """The DAG's runs in the test's days by date (the scheduler makes its own latest one, later)."""
    first, last = DAYS[0].isoformat(), DAYS[-1].isoformat()
    return {r["logical_date"][:10]: r for r in client.dag_runs(DAG_ID) if first <= r["logical_date"][:10] <= last}


def _states(doc: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {(d["logical_date"][:10], task): c["state"] for d in doc["dates"] for task, c in d["cells"].items()}


def test_the_calendar_then_backfill_missing_dates_then_recompute_a_range(site: dict[str, Any]) -> None:
    store, airflow = site["store"], site["airflow"]
    client = airflow.client
    d = [day.isoformat() for day in DAYS]
    _commit(store, f"mo_a.{d[0]}")
    _commit(store, f"mo_b.{d[0]}")
    _commit(store, f"mo_a.{d[1]}", clean=False)  # dirty: its run cleans up
    _commit(store, f"mo_b.{d[1]}", JobStatus.CANCELED)
    _commit(store, f"mo_b.{d[2]}")  # mo_a of the third day is missing
    _commit(store, f"mo_a.{d[3]}")
    _commit(store, f"mo_b.{d[3]}", JobStatus.FAILED)
    calendar = f"/jrs/api/dags/{DAG_ID}/calendar?start={d[0]}&end={d[3]}"

    doc = client.request("GET", calendar)
    assert [j["task_id"] for j in doc["jobs"]] == [A, B]
    assert _states(doc) == {
        (d[0], A): "committed", (d[0], B): "committed",
        (d[1], A): "dirty", (d[1], B): "canceled",
        (d[2], A): "missing", (d[2], B): "committed",
        (d[3], A): "committed", (d[3], B): "failed",
    }  # fmt: skip
    assert doc["dates"][2]["cells"][A]["job_id"] == f"mo_a.{d[2]}" and doc["dates"][2]["run_key"].startswith(d[2])
    assert all(day["run_ids"] == [] for day in doc["dates"])

    # the preview: the 2nd to 4th days need a run, one contiguous range, so one Airflow backfill
    body = {"start": d[0], "end": d[3], "dry_run": True}
    preview = client.request("POST", f"/jrs/api/dags/{DAG_ID}/backfill-missing", body)
    assert preview["how"] == "backfill" and [r["logical_date"][:10] for r in preview["runs"]] == d[1:]
    assert sorted(j["job_id"] for j in preview["jobs"]) == sorted(
        [f"mo_a.{d[1]}", f"mo_b.{d[1]}", f"mo_a.{d[2]}", f"mo_b.{d[3]}"]
    )
    assert _runs(client) == {} and client.backfills(DAG_ID) == []  # a preview creates nothing

    started = client.request("POST", f"/jrs/api/dags/{DAG_ID}/backfill-missing", {**body, "dry_run": False})
    assert started["how"] == "backfill" and [b["dates"] for b in started["backfills"]] == [3]
    runs = _runs(client)
    assert sorted(runs) == d[1:]  # no run for the committed first day
    for run in runs.values():
        assert client.wait_for_run(DAG_ID, run["dag_run_id"], timeout=240)["state"] == "success", airflow.logs_tail()
    assert sorted(_launched(site["calls"])) == sorted([f"mo_b.{d[1]}", f"mo_a.{d[2]}", f"mo_b.{d[3]}"])

    doc = client.request("GET", calendar)
    assert set(_states(doc).values()) == {"committed"}
    assert {day["logical_date"][:10]: day["run_ids"] for day in doc["dates"]} == {
        d[0]: [],
        **{day: [runs[day]["dag_run_id"]] for day in d[1:]},
    }

    # Recompute the 3rd day's task a: the preview names the run it clears; then it runs again
    body = {"start": d[2], "end": d[2], "task_ids": [A], "dry_run": True}
    preview = client.request("POST", f"/jrs/api/dags/{DAG_ID}/recompute", body)
    asked = [j for j in preview["jobs"] if not j["downstream"]]
    assert [(j["job_id"], j["run_id"]) for j in asked] == [(f"mo_a.{d[2]}", runs[d[2]]["dag_run_id"])]
    assert preview["runs"] == [runs[d[2]]["dag_run_id"]] and not any(j["forgotten"] for j in preview["jobs"])
    assert store.get_entry(f"mo_a.{d[2]}") is not None  # a preview changes nothing
    launches = len(_launched(site["calls"]))

    done = client.request("POST", f"/jrs/api/dags/{DAG_ID}/recompute", {**body, "dry_run": False})
    assert [(j["job_id"], j["forgotten"], j["cleared"]) for j in done["jobs"] if not j["downstream"]] == [
        (f"mo_a.{d[2]}", True, True)
    ]
    run = client.wait_for_run(DAG_ID, runs[d[2]]["dag_run_id"], timeout=240)
    assert run["state"] == "success", airflow.logs_tail()
    assert f"mo_a.{d[2]}" in _launched(site["calls"])[launches:]
    moved = store.get_history(f"mo_a.{d[2]}")[0].moved
    assert moved is not None and moved.reason == "recomputed" and moved.actor is not None and moved.actor.via == "ui"

    audit = client.request("GET", "/api/v2/eventLogs?event=jrs_recompute_range&limit=10")["event_logs"]
    assert audit, "the recompute is not in Airflow's audit log"


def test_a_dag_unknown_to_airflow_and_bad_dates_say_what_to_send(site: dict[str, Any]) -> None:
    from jrs_testbench.deployment.rest import ApiError

    client = site["airflow"].client
    with pytest.raises(ApiError) as unknown:
        client.request("GET", "/jrs/api/dags/no_such_dag/calendar?start=2013-01-01&end=2013-01-02")
    assert "404" in str(unknown.value) and "Airflow knows no DAG 'no_such_dag'" in str(unknown.value)
    with pytest.raises(ApiError) as swapped:
        client.request("POST", f"/jrs/api/dags/{DAG_ID}/backfill-missing", {"start": "2013-01-05", "end": "2013-01-01"})
    assert "400" in str(swapped.value) and "swap them" in str(swapped.value)


def test_a_range_recompute_previews_every_job_the_launches_that_follow_compute(site: dict[str, Any]) -> None:
    """Issue 41: recomputing an upstream job recomputes the downstream job whose arguments carry
    its output (a new fence folder). The preview must name it, on every minor (Airflow 3.2's dry
    run of a clear returns no rendered fields), and the Spark launches that follow must be
    exactly the previewed jobs."""
    airflow, calls = site["airflow"], site["calls"]
    client = airflow.client
    dag_id, day = "jrs_knock_on", "2013-01-02"
    airflow.wait_for_dag(dag_id)
    client.unpause(dag_id)
    run = client.trigger(dag_id, f"{day}T00:00:00+00:00")
    assert client.wait_for_run(dag_id, run["dag_run_id"], timeout=240)["state"] == "success", airflow.logs_tail()
    first = _launched(calls)
    assert {f"ko_up.{day}", f"ko_down.{day}"} <= set(first)

    body = {"start": day, "end": day, "task_ids": ["up.submit"], "dry_run": True}
    preview = client.request("POST", f"/jrs/api/dags/{dag_id}/recompute", body)
    previewed = {j["job_id"] for j in preview["jobs"]}
    assert previewed == {f"ko_up.{day}", f"ko_down.{day}"}, preview
    down = next(j for j in preview["jobs"] if j["job_id"] == f"ko_down.{day}")
    assert down["downstream"] and (
        "up.submit" in down["note"] or "ko_up" in down["note"] or "may compute" in down["note"]
    )

    client.request("POST", f"/jrs/api/dags/{dag_id}/recompute", {**body, "dry_run": False})
    done = client.wait_for_run(dag_id, run["dag_run_id"], timeout=240)
    assert done["state"] == "success", airflow.logs_tail()
    assert set(_launched(calls)[len(first) :]) == previewed
