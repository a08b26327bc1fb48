"""End to end on a real Airflow: runs triggered as the UI does, backfills, clears, forget.

Every run goes through the scheduler, LocalExecutor workers (2 slots), the Execution API and,
for ``start_in_triggerer``, the triggerer; Spark is real spark-submit in local mode. "Spark
did not run" is proven by counting Spark event logs (one file per launched application).

The flights DAG runs two Spark jobs per date (ingest, then ontime reading ingest's output).
Tests that need a committed date share ``first_date`` (2013-01-01, computed once through the
REST API), so each test stands on its own whatever the order.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from jrs_testbench.deployment import ApiError
from jrs_testbench.lineage import completes

pytestmark = [pytest.mark.airflow, pytest.mark.e2e, pytest.mark.spark, pytest.mark.xdist_group("deployment")]

ROOT = Path(__file__).resolve().parents[2]
FLIGHTS = "flights_daily"
TRIGGERER_DAG = "jrs_e2e_triggerer"
DAY1, DAY2, DAY3 = "2013-01-01", "2013-01-02", "2013-01-03"
FLIGHTS_TASKS = ("prepare_landing", "ingest.submit", "ingest.cleanup", "ontime.submit", "ontime.cleanup")
ALL_SUCCESS = dict.fromkeys(FLIGHTS_TASKS, "success")


def job(task: str, day: str) -> str:
    return f"{FLIGHTS}.{task}.submit.{day}"


@pytest.fixture(scope="session")
def flights(e2e):
    e2e.airflow.wait_for_dag(FLIGHTS)
    e2e.client.unpause(FLIGHTS)
    return e2e


@pytest.fixture(scope="session")
def first_date(flights):
    """2013-01-01 triggered through the REST API (as the UI's Trigger button): it computes."""
    before = flights.launches()
    run = flights.client.trigger(FLIGHTS, DAY1)
    states = flights.run(FLIGHTS, run["dag_run_id"])
    return {"run_id": run["dag_run_id"], "states": states, "launches": flights.launches() - before}


def day1_run(flights: Any) -> str:
    """The run of DAY1 Airflow has now. The first test deletes the fixture's run and triggers the
    date anew; the tests after it clear "the" DAY1 run, so they ask Airflow which one that is
    rather than trusting what a fixture remembered (a gate saw them clear a deleted run)."""
    runs = [r for r in flights.client.dag_runs(FLIGHTS) if (r.get("logical_date") or "").startswith(DAY1)]
    assert len(runs) == 1, runs
    run_id: str = runs[0]["dag_run_id"]
    return run_id


def test_rest_triggered_run_computes_and_a_second_run_of_the_same_date_starts_no_spark(flights, first_date):
    assert first_date["states"] == ALL_SUCCESS
    assert first_date["launches"] == 2  # ingest and ontime
    for task in ("ingest", "ontime"):
        entry = flights.store.get_entry(job(task, DAY1))
        assert entry is not None and entry.is_clean
    first_xcom = flights.client.xcom(FLIGHTS, first_date["run_id"], "ontime.submit")
    assert first_xcom["skipped"] is False

    # Airflow keeps one run per logical date: the UI's way to run the date again is to delete
    # the run and trigger it anew.
    with pytest.raises(ApiError) as conflict:
        flights.client.trigger(FLIGHTS, DAY1, run_id="second-try")
    assert conflict.value.status == 409
    flights.client.delete_dag_run(FLIGHTS, first_date["run_id"])
    before = flights.launches()
    run = flights.client.trigger(FLIGHTS, DAY1)
    assert flights.run(FLIGHTS, run["dag_run_id"]) == ALL_SUCCESS
    assert flights.launches() == before, "a committed date started Spark"
    xcom = flights.client.xcom(FLIGHTS, run["dag_run_id"], "ontime.submit")
    assert xcom["skipped"] is True
    assert xcom["outputs"] == first_xcom["outputs"]  # downstream gets the stored result
    first_date["run_id"] = run["dag_run_id"]  # later tests clear this run


def test_backfill_with_reprocess_completed_computes_only_the_missing_dates(flights, first_date):
    assert flights.store.get_entry(job("ontime", DAY1)) is not None
    before = flights.launches()
    result = flights.airflow.backfills.run(FLIGHTS, DAY1, DAY3, "completed", max_active_runs=2, via="cli")
    assert result.runs == {DAY1: "success", DAY2: "success", DAY3: "success"}, result
    assert all(states == ALL_SUCCESS for states in result.tasks.values()), result.tasks
    # DAY1 was reprocessed (cleared and re-run) without Spark; DAY2 and DAY3 computed.
    assert flights.launches() - before == 4
    xcoms = {day: flights.client.xcom(FLIGHTS, rid, "ingest.submit") for day, rid in result.run_ids.items()}
    skipped = {day: xcom["skipped"] for day, xcom in xcoms.items()}
    assert skipped == {DAY1: True, DAY2: False, DAY3: False}
    for day in (DAY2, DAY3):
        entry = flights.store.get_entry(job("ontime", day))
        assert entry is not None and entry.is_clean


def test_clearing_a_committed_task_as_the_ui_does_skips_spark(flights, first_date):
    before = flights.launches()
    run_id = day1_run(flights)
    cleared = flights.client.clear(FLIGHTS, run_id, ["ontime.submit"])
    assert {ti["task_id"] for ti in cleared} == {"ontime.submit", "ontime.cleanup"}
    assert flights.run(FLIGHTS, run_id) == ALL_SUCCESS
    assert flights.launches() == before
    assert flights.client.xcom(FLIGHTS, run_id, "ontime.submit")["skipped"] is True


def test_forget_then_clear_recomputes_the_job(flights, first_date):
    job_id = job("ontime", DAY1)
    old = flights.store.get_entry(job_id)
    assert old is not None
    forget = subprocess.run(
        [str(Path(sys.executable).parent / "airflow-jrs"), "--redis-url", flights.redis_url,
         "--namespace", flights.namespace, "forget", "--yes", job_id],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert forget.returncode == 0, forget.stderr
    assert flights.store.get_entry(job_id) is None
    before = flights.launches()
    run_id = day1_run(flights)
    flights.client.clear(FLIGHTS, run_id, ["ontime.submit"])
    assert flights.run(FLIGHTS, run_id) == ALL_SUCCESS
    assert flights.launches() - before == 1  # ontime only: ingest stays committed
    new = flights.store.get_entry(job_id)
    assert new is not None and new.is_clean
    assert new.result.fence != old.result.fence
    assert flights.client.xcom(FLIGHTS, run_id, "ontime.submit")["skipped"] is False
    assert [h.result.fence for h in flights.store.get_history(job_id)][:1] == [old.result.fence]


def test_airflow_jrs_recompute_computes_a_date_again_once_and_a_later_backfill_reuses_it(flights, first_date):
    """The documented CLI way: forget the date's result and clear its task
    instance through Airflow's REST API; the run computes the job again (one launch), and a
    later backfill of the date reuses the new result (no launch)."""
    job_id = job("ontime", DAY1)
    old = flights.store.get_entry(job_id)
    assert old is not None
    cli = [str(Path(sys.executable).parent / "airflow-jrs"), "--redis-url", flights.redis_url,
           "--namespace", flights.namespace, "recompute", "--dag-id", FLIGHTS, "--from-date", DAY1,
           "--to-date", DAY1, "--task", "ontime.submit", "--dags-folder", str(ROOT / "dags"),
           "--airflow-url", flights.airflow.url]  # fmt: skip
    env = {**os.environ, "AIRFLOW_JRS_API_USERNAME": flights.airflow.username,
           "AIRFLOW_JRS_API_PASSWORD": flights.airflow.password}  # fmt: skip
    preview = subprocess.run([*cli, "--dry-run"], capture_output=True, text=True, timeout=300, env=env)
    assert preview.returncode == 0, preview.stderr
    assert job_id in preview.stdout and "dry run: nothing changed" in preview.stdout
    assert flights.store.get_entry(job_id) == old

    before = flights.launches()
    done = subprocess.run([*cli, "--yes"], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{job_id}: forgot its result (kept in history), cleared {FLIGHTS} run" in done.stdout
    runs = [r for r in flights.client.dag_runs(FLIGHTS) if r["logical_date"].startswith(DAY1)]
    assert len(runs) == 1
    assert flights.run(FLIGHTS, runs[0]["dag_run_id"]) == ALL_SUCCESS
    assert flights.launches() - before == 1  # ontime only
    new = flights.store.get_entry(job_id)
    assert new is not None and new.is_clean and new.result.fence != old.result.fence
    assert [h.result.fence for h in flights.store.get_history(job_id)][:1] == [old.result.fence]

    before = flights.launches()
    result = flights.airflow.backfills.run(FLIGHTS, DAY1, DAY1, "completed", via="cli")
    assert result.runs == {DAY1: "success"}, result
    assert flights.launches() == before, "a later backfill recomputed the recomputed date"
    assert flights.store.get_entry(job_id).result.fence == new.result.fence


def test_recompute_preview_lists_the_downstream_jobs_the_clear_recomputes_too(flights, first_date):
    """Recomputing ingest also recomputes ontime, whose arguments carry ingest's
    output path (the clear includes downstream tasks). The dry run lists both, with why; what the
    recompute then computes (new fences, Spark launches) is exactly that list."""
    import json

    ingest, ontime = job("ingest", DAY1), job("ontime", DAY1)
    old = {j: flights.store.get_entry(j) for j in (ingest, ontime)}
    assert all(old.values())
    # By date, as a user recomputes a date: ingest's result names the first run of DAY1, which
    # the first test deleted (the UI's way to run a date anew); the date's run is the one it has now.
    cli = [str(Path(sys.executable).parent / "airflow-jrs"), "--json", "--redis-url", flights.redis_url,
           "--namespace", flights.namespace, "recompute", "--dag-id", FLIGHTS, "--from-date", DAY1,
           "--to-date", DAY1, "--task", "ingest.submit", "--dags-folder", str(ROOT / "dags"),
           "--airflow-url", flights.airflow.url]  # fmt: skip
    env = {**os.environ, "AIRFLOW_JRS_API_USERNAME": flights.airflow.username,
           "AIRFLOW_JRS_API_PASSWORD": flights.airflow.password}  # fmt: skip
    preview = subprocess.run([*cli, "--dry-run"], capture_output=True, text=True, timeout=300, env=env)
    assert preview.returncode == 0, preview.stderr
    listed = {row["job_id"]: row for row in json.loads(preview.stdout)["recompute"]}
    assert set(listed) == {ingest, ontime}, preview.stdout
    assert listed[ontime]["downstream"] and f"its arguments carry {ingest}'s output" in listed[ontime]["note"]
    assert {j: flights.store.get_entry(j) for j in old} == old  # a preview changes nothing

    before = flights.launches()
    done = subprocess.run([*cli, "--yes"], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads(done.stdout)["recompute"]
    assert all(row["cleared"] for row in rows), rows
    run_id = rows[0]["run_id"]
    assert flights.run(FLIGHTS, run_id) == ALL_SUCCESS
    recomputed = {j for j in old if flights.store.get_entry(j).result.fence != old[j].result.fence}
    assert recomputed == set(listed)
    assert flights.launches() - before == len(listed)


def _appears(found: Callable[[], object], *, within: float) -> bool:
    """Whether ``found()`` becomes truthy within ``within`` seconds (polled every half second)."""
    deadline = time.monotonic() + within
    while not found():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def _second_trigger_logs(folder: Path) -> list[Path]:
    return list(folder.glob("attempt=2.log.trigger.*"))


def test_start_in_triggerer_ends_committed_tasks_without_a_worker(e2e):
    """REST backfill computes (the trigger hands tasks to workers); a reprocess ends every task in the triggerer."""
    e2e.airflow.wait_for_dag(TRIGGERER_DAG)
    e2e.client.unpause(TRIGGERER_DAG)
    tasks = ("tiny.submit", "tiny.cleanup", "tiny2.submit", "tiny2.cleanup")
    before = e2e.launches()
    first = e2e.airflow.backfills.run(TRIGGERER_DAG, DAY1, DAY2, "none", via="rest")
    assert first.runs == {DAY1: "success", DAY2: "success"}, first
    assert e2e.launches() - before == 4
    for rid in first.run_ids.values():
        assert e2e.client.xcom(TRIGGERER_DAG, rid, "tiny2.submit")["skipped"] is False

    before = e2e.launches()
    again = e2e.airflow.backfills.run(TRIGGERER_DAG, DAY1, DAY2, "completed", via="rest")
    assert again.runs == {DAY1: "success", DAY2: "success"}, again
    assert all(states == dict.fromkeys(tasks, "success") for states in again.tasks.values()), again.tasks
    assert e2e.launches() == before
    logs = e2e.airflow.home / "logs" / f"dag_id={TRIGGERER_DAG}"
    for rid in again.run_ids.values():
        xcom = e2e.client.xcom(TRIGGERER_DAG, rid, "tiny2.submit")  # its template pulled tiny.submit's XCom
        assert xcom["skipped"] is True and xcom["decided_in"] == "triggerer"
        # The cleanup pushes no XCom (one write fewer per committed task): what it committed is the store's entry.
        tiny_job = e2e.client.xcom(TRIGGERER_DAG, rid, "tiny.submit")["job_id"]
        assert e2e.store.get_entry(tiny_job).is_clean
        for task in tasks:
            # Attempt 2 ran in the triggerer only: its trigger log exists, no worker log does. The
            # triggerer writes a task's log file after the trigger has ended, which on a loaded
            # machine may be after the run's success: wait for it a while (the gate saw it late).
            folder = logs / f"run_id={rid}" / f"task_id={task}"
            assert _appears(partial(_second_trigger_logs, folder), within=90), folder
            assert not (folder / "attempt=2.log").exists(), f"{task} reached a worker"


def test_lineage_and_metrics_of_computed_and_reused_dates_of_spark_submit_and_pyspark(flights, first_date):
    """On the scheduler, with the openlineage provider's file transport and DogStatsD metrics
    (conftest): a computed and a reused date of a spark-submit job (flights_daily) and of
    ``@task.jrs_pyspark`` jobs (flights_pyspark) each emit schema-valid events naming the job's
    outputs, each launched application names its task's OpenLineage run as its parent
    (docs/how-to/lineage.md), and the workers count the decisions and the seconds saved."""
    pyspark = "flights_pyspark"
    flights.airflow.wait_for_dag(pyspark)
    flights.client.unpause(pyspark)
    computed = flights.client.trigger(pyspark, DAY1)
    assert set(flights.run(pyspark, computed["dag_run_id"]).values()) == {"success"}
    before = flights.launches()
    flights.client.clear(pyspark, computed["dag_run_id"], ["ontime"])
    assert set(flights.run(pyspark, computed["dag_run_id"]).values()) == {"success"}
    run_id = day1_run(flights)
    flights.client.clear(FLIGHTS, run_id, ["ontime.submit"])
    assert flights.run(FLIGHTS, run_id) == ALL_SUCCESS
    assert flights.launches() == before, "a reused date started Spark"

    events = {**completes(flights.lineage, pyspark), **completes(flights.lineage, FLIGHTS)}  # validated
    for task, job_id in (("ontime", f"{pyspark}.ontime.{DAY1}"), ("ontime.submit", job("ontime", DAY1))):
        stored = flights.store.get_entry(job_id).result
        facets = [e["run"]["facets"]["jrs_job"] for e in events[task]]
        assert [f["reused"] for f in facets][-1] is True, (task, facets)  # the clear reused it
        computed_events = [e for e in events[task] if not e["run"]["facets"]["jrs_job"]["reused"]]
        assert computed_events, f"{task}: no event of the run that computed it"
        for event in (computed_events[-1], events[task][-1]):
            facet = event["run"]["facets"]["jrs_job"]
            assert facet["fence"] == stored.fence and facet["computedBy"]["runId"] == stored.attempt.run_id
            assert sorted(d["name"] for d in event["outputs"]) == sorted(stored.outputs.values()), event["outputs"]

    # Metrics, from the workers' own Stats: the decisions with their task's tags, and the Spark
    # time each reused job's skip avoided (its recorded run time, in whole seconds).
    sent = flights.statsd.metrics()
    for dag_id, task, job_id in (
        (pyspark, "ontime", f"{pyspark}.ontime.{DAY1}"),
        (FLIGHTS, "ontime.submit", job("ontime", DAY1)),
    ):
        tags = {"dag_id": dag_id, "task_id": task}
        mine = [(name, value) for name, value, kind, t in sent if t == tags and kind == "c"]
        assert ("airflow.jrs.decision.skipped", 1.0) in mine, (tags, mine)
        assert any(name == "airflow.jrs.decision.launched" for name, _ in mine), (tags, mine)
        stored = flights.store.get_entry(job_id).result
        ran = round((stored.end_time - stored.start_time).total_seconds())
        assert ("airflow.jrs.skip.saved_seconds", float(ran)) in mine, (tags, ran, mine)

    # Spark-side: the application of each computed task names that task's run as its parent.
    parents = {p.get("spark.openlineage.parentRunId") for p in flights.spark.properties()}
    for task in ("ingest", "ontime"):
        run_id = next(e for e in events[task] if not e["run"]["facets"]["jrs_job"]["reused"])["run"]["runId"]
        assert run_id in parents, f"{pyspark}.{task}'s session did not get its OpenLineage parent"
