"""A mapped submit on a real scheduler: its cleanup commits every map index, and missing-only
backfills and ``recompute`` handle each map index's job.

The DAG (``tests/airflow/dags/jrs_mapped_regions.py``) is a ``JrsSparkSubmitOperator`` expanded
over two regions, with the default job ids (``jrs_mapped_regions.regions.<ds>.map-0`` and
``.map-1``), and ``JrsCleanupOperator(jobs=[regions])``. Before the fix the cleanup dropped the
mapped task: it succeeded at once, logged nothing and left both results dirty.

A real deployment (api-server, dag-processor, scheduler; LocalExecutor, SQLite), the session's
redis-server, spark-submit replaced by the stand-in (:mod:`jrs_testbench.fake_spark`: one line
per launch, the output and its commit marker written): the item is about the cleanup and the
CLI, not Spark.
"""

from __future__ import annotations

import importlib.util
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_jrs.cli import main
from airflow_jrs.domain.identity import application_fingerprint
from airflow_jrs.store import JobResult, JobStatus, RedisJobResultStore
from jrs_testbench.deployment import LocalDeployment
from jrs_testbench.fake_spark import install_fake_spark_submit
from jrs_testbench.helpers import TINY_APP, jrs_env

pytestmark = pytest.mark.airflow

DAGS = Path(__file__).parent / "mapped_dags"
DAG_FILE = DAGS / "jrs_mapped_regions.py"
DAG_ID = "jrs_mapped_regions"


def job(day: str, index: int) -> str:
    return f"{DAG_ID}.regions.{day}.map-{index}"


def regions() -> list[list[str]]:
    spec = importlib.util.spec_from_file_location("jrs_mapped_regions_args", DAG_FILE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.REGIONS)


def commit(store: RedisJobResultStore, day: str, index: int) -> None:
    """Map index ``index``'s job of ``day``, committed as the task would have (its own fingerprint)."""
    fp = application_fingerprint(TINY_APP, regions()[index], None)
    store.create_dirty_result(JobResult(job_id=job(day, index), status=JobStatus.SUCCEEDED, fingerprint=fp))
    store.mark_result_as_clean(job(day, index))


def assert_committed(store: RedisJobResultStore, *job_ids: str) -> None:
    for job_id in job_ids:
        entry = store.get_entry(job_id)
        assert entry is not None, f"{job_id}: no result"
        assert entry.is_clean and entry.result.status is JobStatus.SUCCEEDED, f"{job_id}: {entry.state.value}"


def launched(calls: Path) -> list[str]:
    """Job ids the stand-in spark-submit was launched for, in order."""
    if not calls.exists():
        return []
    return [w.split("=", 1)[1] for line in calls.read_text().splitlines() for w in line.split()
            if w.startswith("spark.jrs.job_id=")]  # fmt: skip


@pytest.fixture(scope="module")
def site(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    work = tmp_path_factory.mktemp("mapped")
    namespace = f"mapped-{uuid.uuid4().hex[:8]}"
    bin_dir, calls = install_fake_spark_submit(work, write_output=True)
    env = jrs_env(redis_url, namespace, data_dir=work / "data")
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    airflow = LocalDeployment(
        work / "airflow", bundles={"mapped": DAGS}, env=env, components=("api-server", "dag-processor", "scheduler")
    )
    store = RedisJobResultStore(redis_url, namespace)
    with airflow:
        airflow.wait_for_dag(DAG_ID)
        airflow.client.unpause(DAG_ID)  # backfill runs of a paused DAG are not scheduled
        yield {"airflow": airflow, "store": store, "calls": calls, "redis_url": redis_url, "namespace": namespace}
    store.client.close()


@pytest.fixture
def credentials(site: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW_JRS_API_TOKEN", raising=False)
    monkeypatch.setenv("AIRFLOW_JRS_API_USERNAME", site["airflow"].username)
    monkeypatch.setenv("AIRFLOW_JRS_API_PASSWORD", site["airflow"].password)


def cli(site: dict, verb: str, first: str, last: str, *extra: str) -> list[str]:
    return ["--redis-url", site["redis_url"], "--namespace", site["namespace"], verb, "--dag-id", DAG_ID,
            "--from-date", first, "--to-date", last, "--dags-folder", str(DAGS),
            "--airflow-url", site["airflow"].url, *extra]  # fmt: skip


def test_the_cleanup_commits_every_map_index_and_recompute_computes_each_again(site: dict, credentials: None) -> None:
    airflow, store, day = site["airflow"], site["store"], "2013-01-01"

    # Not complete=True: Airflow's cancel (which completes a backfill at once) pauses it, and a
    # cleared run of a paused backfill stays queued for ever.
    done = airflow.backfills.run(DAG_ID, day, day, via="rest")

    assert done.runs == {day: "success"}, airflow.logs_tail()
    assert_committed(store, job(day, 0), job(day, 1))  # before the fix: both dirty, the cleanup a no-op
    assert sorted(launched(site["calls"])) == [job(day, 0), job(day, 1)]
    first = {i: store.get_entry(job(day, i)).created_at for i in (0, 1)}

    # recompute by date: each map index's result is forgotten and its task instance cleared
    # (with the cleanup after it); the run computes both again and commits them.
    assert main(cli(site, "recompute", day, day, "--yes")) == 0
    run = airflow.client.wait_for_run(DAG_ID, done.run_ids[day], timeout=240)
    assert run["state"] == "success", airflow.logs_tail()
    assert_committed(store, job(day, 0), job(day, 1))
    assert sorted(launched(site["calls"])) == sorted([job(day, 0), job(day, 1)] * 2)
    assert all(store.get_entry(job(day, i)).created_at > first[i] for i in (0, 1))
    states = {
        (ti["task_id"], ti["map_index"]): ti["state"] for ti in airflow.client.task_instances(DAG_ID, run["dag_run_id"])
    }
    assert states == {("regions", 0): "success", ("regions", 1): "success", ("region_cleanup", -1): "success"}


def test_missing_only_runs_only_the_date_with_a_missing_map_index(site: dict, credentials: None, capsys) -> None:
    store, days = site["store"], ("2013-01-05", "2013-01-06")
    commit(store, days[0], 0)
    commit(store, days[0], 1)
    commit(store, days[1], 0)  # map index 1 of the second date is missing
    before = len(launched(site["calls"]))
    site["airflow"].backfills.wait_idle(DAG_ID)  # Airflow runs one backfill per DAG at a time

    assert main(cli(site, "backfill", days[0], days[1], "--missing-only", "--wait", "--yes")) == 0

    runs = [r for r in site["airflow"].client.dag_runs(DAG_ID) if (r.get("logical_date") or "")[:10] in days]
    assert [(r["logical_date"][:10], r["run_type"], r["state"]) for r in runs] == [(days[1], "backfill", "success")]
    assert launched(site["calls"])[before:] == [job(days[1], 1)]  # map index 0 skipped on its committed job
    assert_committed(store, job(days[0], 0), job(days[0], 1), job(days[1], 0), job(days[1], 1))
