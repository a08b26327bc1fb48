"""Mapped submit tasks (``.partial(...).expand(...)``): one job per map index, everywhere.

The cleanup used to keep only ``str`` and ``BaseOperator`` entries of ``jobs`` and drop a
``MappedOperator``: the task succeeded, logged nothing and left every map index's result dirty.
Here: what the cleanup records at DAG parse time (and what it refuses there, by name), the
start-in-triggerer cleanup never ending in the triggerer past a mapped task, and ``plan``,
``backfill --missing-only --dry-run`` and ``recompute`` on DAGs parsed by Airflow's DagBag
against the session's real redis-server. The cleanup's run-time part (every map index committed)
runs on a real scheduler: tests/airflow/test_mapped_jobs.py.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from airflow.sdk import DAG, TaskGroup, task, task_group
from airflow.triggers.base import TaskSuccessEvent

from airflow_jrs.cli import main
from airflow_jrs.compat import AIRFLOW_V_3_3_PLUS, AIRFLOW_VERSION_TEXT
from airflow_jrs.domain.identity import application_fingerprint
from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.operators import JrsCleanupOperator, JrsSparkSubmitOperator, jrs_spark_job
from airflow_jrs.operators.start_in_triggerer import JrsStartInTriggererCleanupOperator
from airflow_jrs.store import Attempt, JobResult, JobStatus, RedisJobResultStore
from airflow_jrs.triggers.start_in_triggerer import StartInTriggererCleanupTrigger, _GoToWorker

DAY = datetime(2013, 1, 1, tzinfo=UTC)
APP = "/nowhere/app.py"
REGIONS = [["--region", "eu"], ["--region", "us"]]


def regions(**partial: Any) -> Any:
    return JrsSparkSubmitOperator.partial(task_id="regions", application=APP, **partial).expand(
        application_args=REGIONS
    )


# -- the cleanup at DAG parse time -------------------------------------------------------------


def test_a_mapped_submit_is_one_of_the_cleanups_tasks_upstream_of_it():
    with DAG("d", schedule=None):
        mapped = regions()
        templated = JrsSparkSubmitOperator.partial(
            task_id="named", application=APP, job_id="n.{{ ds }}.{{ ti.map_index }}"
        ).expand(application_args=REGIONS)
        listed = JrsSparkSubmitOperator.partial(task_id="listed", application=APP).expand(job_id=["a.1", "b.1"])
        cleanup = JrsCleanupOperator(task_id="region_cleanup", jobs=[mapped, templated, listed])
    assert cleanup.job_tasks == ["regions", "named", "listed"]
    assert cleanup.upstream_task_ids == {"regions", "named", "listed"}
    # the default rule is computed per map index; the others are read from each map index's XCom
    assert cleanup.mapped_submits == {"regions": True, "named": False, "listed": False}
    assert cleanup.submit_job_ids == {}  # never derived as one unmapped job


@pytest.mark.parametrize("what", ["output", "group", "number"])
def test_a_jobs_entry_that_is_neither_a_job_id_nor_a_task_fails_at_parse_time(what):
    with DAG("d", schedule=None):
        mapped = regions()
        with TaskGroup("g") as group:
            JrsSparkSubmitOperator(task_id="submit", application=APP)
        entry = {"output": mapped.output, "group": group, "number": 7}[what]
        with pytest.raises(JrsConfigError, match=r"region_cleanup: `jobs` holds .*give job ids \(str\) or the submit"):
            JrsCleanupOperator(task_id="region_cleanup", jobs=[entry])


def test_a_mapped_pyspark_function_counts_through_its_operator_and_its_call_is_refused_by_name():
    @task.jrs_pyspark
    def per_region(region: str, spark: Any = None, jrs: Any = None) -> dict[str, Any]:
        return {"region": region}

    with DAG("d", schedule=None):
        call = per_region.expand(region=["eu", "us"])
        cleanup = JrsCleanupOperator(task_id="cleanup", jobs=[call.operator])
        with pytest.raises(JrsConfigError, match=r"a @task.jrs_pyspark call: pass its .operator"):
            JrsCleanupOperator(task_id="cleanup2", jobs=[call])
    assert cleanup.mapped_submits == {"per_region": True}


def test_a_mapped_job_id_naming_one_job_for_every_map_index_fails_at_parse_time():
    with DAG("d", schedule=None):
        same = regions(job_id="regions.{{ ds }}")
        with pytest.raises(JrsConfigError, match=r"task 'regions' is mapped, and its job_id 'regions.\{\{ ds \}\}'"):
            JrsCleanupOperator(task_id="region_cleanup", jobs=[same])


def test_a_submit_in_a_mapped_group_counts_per_map_index_of_the_group():
    with DAG("d", schedule=None) as dag:

        @task_group
        def per_region(args: list[str]) -> None:
            JrsSparkSubmitOperator(task_id="submit", application=APP, application_args=args)

        per_region.expand(args=REGIONS)
        cleanup = JrsCleanupOperator(task_id="cleanup", jobs=[dag.get_task("per_region.submit")])
    assert cleanup.mapped_submits == {"per_region.submit": True}


def test_the_factory_maps_its_submission_and_its_cleanup_commits_every_map_index():
    with DAG("d", schedule=None):
        group = jrs_spark_job("regions", application=APP, expand={"application_args": REGIONS})
    submit, cleanup = group.children["regions.submit"], group.children["regions.cleanup"]
    assert submit.is_mapped and cleanup.mapped_submits == {"regions.submit": True}
    with DAG("e", schedule=None), pytest.raises(JrsConfigError, match="start_in_triggerer does not work with expand"):
        jrs_spark_job("regions", application=APP, expand={"application_args": REGIONS}, start_in_triggerer=True)


@pytest.mark.skipif(
    not AIRFLOW_V_3_3_PLUS, reason=f"starting in the triggerer needs Airflow 3.3 (this is {AIRFLOW_VERSION_TEXT})"
)
def test_the_start_in_triggerer_cleanup_hands_a_mapped_task_to_a_worker(redis_url, namespace, monkeypatch):
    """The trigger sees one map index (-1): with a mapped submit it must never end the task in the
    triggerer, even when every job it can name is clean (before: the mapped task was dropped, the
    trigger found the other job clean and ended the task, the map indexes' results dirty)."""
    monkeypatch.setenv("AIRFLOW_CONN_JRS_DEFAULT", f"{redis_url}?namespace={namespace}")
    with DAG("d", schedule=None, start_date=DAY):
        plain = JrsSparkSubmitOperator(task_id="plain", application=APP)
        op = JrsStartInTriggererCleanupOperator(task_id="cleanup", jobs=[plain, regions()])
    store = RedisJobResultStore(redis_url, namespace)
    store.create_dirty_result(JobResult(job_id="d.plain.2013-01-01", status=JobStatus.SUCCEEDED))
    store.mark_result_as_clean("d.plain.2013-01-01")
    trigger = StartInTriggererCleanupTrigger(**op.start_trigger_args.trigger_kwargs)
    pulls: list[tuple[Any, Any]] = []

    def xcom_pull(*_: Any, **kw: Any) -> Any:  # a mapped task has no XCom at map index -1
        pulls.append((kw.get("task_ids"), kw.get("map_indexes")))
        return None

    ti = _ti(op, xcom_pull)
    trigger.task_instance = ti
    trigger.render_template_fields({"ti": ti, "ds": "2013-01-01", "data_interval_start": DAY, "logical_date": DAY})

    async def decide() -> Any:
        try:
            return await trigger._decide()
        except _GoToWorker as exc:
            return str(exc)
        finally:
            await trigger._close()

    outcome = asyncio.run(decide())
    assert not isinstance(outcome, TaskSuccessEvent)
    assert "regions" in outcome and pulls[0] == ("regions", -1)
    store.client.close()


def _ti(op: Any, xcom_pull: Any) -> Any:
    from types import SimpleNamespace

    return SimpleNamespace(
        task=op, dag_id=op.dag_id, task_id=op.task_id, run_id="scheduled__2013-01-01", map_index=-1, xcom_pull=xcom_pull
    )


# -- plan, missing-only, recompute -------------------------------------------------------------

DAGS = f'''
from datetime import datetime, UTC
from airflow.sdk import DAG, task
from airflow_jrs.operators import JrsCleanupOperator, JrsSparkSubmitOperator

START = datetime(2013, 1, 1, tzinfo=UTC)
REGIONS = {REGIONS!r}


def mapped(task_id, **partial):
    return JrsSparkSubmitOperator.partial(task_id=task_id, application="{APP}", **partial)


@task
def listed():
    return REGIONS


with DAG("jrs_regions", schedule="@daily", start_date=START, catchup=False):
    regions = mapped("regions").expand(application_args=REGIONS)
    JrsCleanupOperator(task_id="region_cleanup", jobs=[regions])

with DAG("jrs_regions_named", schedule="@daily", start_date=START, catchup=False):
    mapped("r", job_id="r.{{{{ ds }}}}.{{{{ ti.map_index }}}}").expand(application_args=REGIONS)

with DAG("jrs_regions_same_id", schedule="@daily", start_date=START, catchup=False):
    mapped("r", job_id="r.{{{{ ds }}}}").expand(application_args=REGIONS)

with DAG("jrs_regions_dynamic", schedule="@daily", start_date=START, catchup=False):
    plain = JrsSparkSubmitOperator(task_id="plain", application="{APP}")
    dynamic = mapped("dynamic").expand(application_args=listed())
    JrsCleanupOperator(task_id="cleanup", jobs=[plain, dynamic])
'''


@pytest.fixture
def dags(dag_folder):
    return dag_folder("jrs_regions.py", DAGS)


def fp(index: int) -> str:
    """The fingerprint map index ``index`` records (the operator's own rule, its own arguments)."""
    return application_fingerprint(APP, REGIONS[index], None)


def commit(store: RedisJobResultStore, job_id: str, fingerprint: str) -> None:
    result = JobResult(job_id=job_id, status=JobStatus.SUCCEEDED, attempt=Attempt("jrs_regions", "regions", "r", 1),
                       fingerprint=fingerprint)  # fmt: skip
    store.create_dirty_result(result)
    store.mark_result_as_clean(job_id)


def cli(redis_url, namespace, capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["--redis-url", redis_url, "--namespace", namespace, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def plan(redis_url, namespace, dags, capsys, dag_id: str, last: str = "2013-01-02") -> tuple[int, str, str]:
    return cli(redis_url, namespace, capsys, "--json", "plan", "--dag-id", dag_id, "--from-date", "2013-01-01",
               "--to-date", last, "--dags-folder", dags)  # fmt: skip


def test_plan_names_each_map_index_and_says_its_fingerprint_is_known_only_at_run_time(
    store, redis_url, namespace, dags, capsys
):
    """A plan reads the serialized DAG (the API server runs no DAG code): a mapped task's operator
    is built per map index only at run time, so a changed argument of one map index cannot be
    seen before; the plan says "may compute" instead of guessing."""
    commit(store, "jrs_regions.regions.2013-01-01.map-0", fp(0))
    commit(store, "jrs_regions.regions.2013-01-01.map-1", fp(0))  # computed with map index 0's arguments

    code, out, err = plan(redis_url, namespace, dags, capsys, "jrs_regions")

    assert code == 0, err
    doc = json.loads(out)
    got = {j["job_id"]: (j["status"], j["backfill"]) for j in doc["jobs"]}
    assert got == {
        "jrs_regions.regions.2013-01-01.map-0": ("committed", "skip"),
        "jrs_regions.regions.2013-01-01.map-1": ("committed", "skip"),  # the run decides: its arguments differ
        "jrs_regions.regions.2013-01-02.map-0": ("missing", "run"),
        "jrs_regions.regions.2013-01-02.map-1": ("missing", "run"),
    }
    assert doc["notes"] == [] or not any("left out" in n for n in doc["notes"])
    reasons = {j["job_id"]: j["reason"] for j in doc["jobs"]}
    assert "may compute if its arguments changed" in reasons["jrs_regions.regions.2013-01-01.map-1"]


def test_plan_renders_a_job_id_template_per_map_index_and_refuses_one_id_for_all(redis_url, namespace, dags, capsys):
    code, out, err = plan(redis_url, namespace, dags, capsys, "jrs_regions_named", last="2013-01-01")
    assert code == 0, err
    assert [j["job_id"] for j in json.loads(out)["jobs"]] == ["r.2013-01-01.0", "r.2013-01-01.1"]

    code, out, err = cli(redis_url, namespace, capsys, "plan", "--dag-id", "jrs_regions_same_id", "--from-date",
                         "2013-01-01", "--to-date", "2013-01-01", "--dags-folder", dags)  # fmt: skip
    assert code == 2
    assert "task 'r' is mapped, and its map indexes 0 and 1 both have job id 'r.2013-01-01'" in err
    assert "{{ ti.map_index }}" in err


def test_missing_only_runs_the_dates_where_a_map_index_is_missing(store, redis_url, namespace, dags, capsys):
    for day in ("01", "03"):
        for index in (0, 1):
            commit(store, f"jrs_regions.regions.2013-01-{day}.map-{index}", fp(index))
    commit(store, "jrs_regions.regions.2013-01-02.map-0", fp(0))

    code, out, err = cli(redis_url, namespace, capsys, "--json", "backfill", "--dag-id", "jrs_regions",
                         "--from-date", "2013-01-01", "--to-date", "2013-01-03", "--dags-folder", dags,
                         "--missing-only", "--dry-run")  # fmt: skip

    assert code == 0, err
    doc = json.loads(out)
    assert [d["run"] for d in doc["dates"]] == [False, True, False]
    assert [m["job_id"] for m in doc["dates"][1]["missing"]] == ["jrs_regions.regions.2013-01-02.map-1"]
    assert doc["summary"] == {"dates": 3, "jobs": 6, "dates_to_run": 1, "backfills": 1}


def test_a_task_mapped_over_another_tasks_output_is_named_or_refused(store, redis_url, namespace, dags, capsys):
    code, out, err = plan(redis_url, namespace, dags, capsys, "jrs_regions_dynamic", last="2013-01-01")
    assert code == 0, err
    doc = json.loads(out)
    assert [j["job_id"] for j in doc["jobs"]] == ["jrs_regions_dynamic.plain.2013-01-01"]
    assert "left out mapped tasks ['dynamic']: expanded over another task's output" in doc["notes"][0]

    dates = ["--from-date", "2013-01-01", "--to-date", "2013-01-01", "--dags-folder", dags]
    code, _, err = cli(redis_url, namespace, capsys, "backfill", "--dag-id", "jrs_regions_dynamic", *dates,
                       "--missing-only", "--dry-run")  # fmt: skip
    assert code == 2 and "left out mapped tasks ['dynamic']" in err and "airflow backfill create" in err

    code, _, err = cli(redis_url, namespace, capsys, "recompute", "--dag-id", "jrs_regions_dynamic", *dates,
                       "--dry-run", "--airflow-url", "http://127.0.0.1:9")  # fmt: skip
    assert code == 2 and "mapped tasks ['dynamic'] are expanded over another task's output" in err
    assert "recompute them by job id" in err and "--task" in err
    # naming only the other task recomputes it, and says nothing of the mapped one
    code, out, err = cli(redis_url, namespace, capsys, "recompute", "--dag-id", "jrs_regions_dynamic", *dates,
                         "--task", "plain", "--dry-run", "--airflow-url", "http://127.0.0.1:9")  # fmt: skip
    assert code == 0, err
    assert "jrs_regions_dynamic.plain.2013-01-01" in out and "dynamic" not in out.replace("jrs_regions_dynamic", "")
