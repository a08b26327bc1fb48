"""``airflow-jrs backfill --missing-only`` on a real Airflow: api-server, dag-processor, scheduler.

LocalExecutor with 2 slots, SQLite, the session's redis-server, spark-submit replaced by the
stand-in (:mod:`jrs_testbench.fake_spark`: one line per launch, the output and its commit
marker written), so a missing job runs through the real operator and supervisor in
milliseconds. The CLI runs in this process against the deployment's REST API, authenticated
as any API client (user name and password exchanged for a token).

Pinned: committed dates get no DAG run and no task instance; the missing dates get exactly
one run each: scattered dates as runs with their logical dates (run type ``manual``, the
timetable's data interval, no Airflow backfill), an ended run of such a date cleared and run
again, one contiguous range as one Airflow backfill (run type ``backfill``) whose runs a later
recompute runs again (before the fix the backfill was completed by a cancel, which pauses it,
and the cleared run stayed queued forever); Spark runs exactly for the missing jobs; wrong
credentials and a DAG unknown to Airflow say so.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

import pytest

from airflow_jrs.cli import main
from airflow_jrs.store import Attempt, JobResult, JobStatus, RedisJobResultStore
from jrs_testbench.deployment import LocalDeployment
from jrs_testbench.fake_spark import install_fake_spark_submit
from jrs_testbench.helpers import jrs_env

pytestmark = pytest.mark.airflow

DAGS = Path(__file__).parent / "missing_only_dags"
DAG_ID = "jrs_missing_only"
DAYS = [date(2013, 1, 1) + timedelta(days=i) for i in range(10)]
#: (day index, job) left uncommitted: the 3rd and 4th days are one range, the 8th another.
MISSING = {(2, "mo_a"), (3, "mo_a"), (3, "mo_b")}
FAILED = {(7, "mo_b")}


@pytest.fixture(scope="module")
def site(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    work = tmp_path_factory.mktemp("missing-only")
    namespace = f"mo-{uuid.uuid4().hex[:8]}"
    bin_dir, calls = install_fake_spark_submit(work, write_output=True)
    env = jrs_env(redis_url, namespace, data_dir=work / "data")
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    airflow = LocalDeployment(
        work / "airflow", bundles={"mo": DAGS}, env=env, components=("api-server", "dag-processor", "scheduler")
    )
    store = RedisJobResultStore(redis_url, namespace)
    with airflow:
        airflow.wait_for_dag(DAG_ID)
        airflow.client.unpause(DAG_ID)  # backfill runs of a paused DAG are not scheduled
        yield {"airflow": airflow, "store": store, "calls": calls, "redis_url": redis_url, "namespace": namespace}
    store.client.close()


def cli(site: dict, *extra: str, first: date = DAYS[0], last: date = DAYS[-1], dag_id: str = DAG_ID) -> list[str]:
    return ["--redis-url", site["redis_url"], "--namespace", site["namespace"], "backfill", "--dag-id", dag_id,
            "--from-date", str(first), "--to-date", str(last), "--dags-folder", str(DAGS),
            "--airflow-url", site["airflow"].url, "--yes", *extra]  # fmt: skip


@pytest.fixture
def credentials(site: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW_JRS_API_TOKEN", raising=False)
    monkeypatch.setenv("AIRFLOW_JRS_API_USERNAME", site["airflow"].username)
    monkeypatch.setenv("AIRFLOW_JRS_API_PASSWORD", site["airflow"].password)


def launched_jobs(calls: Path) -> list[str]:
    """Job ids the stand-in spark-submit was launched for (one line per launch)."""
    if not calls.exists():
        return []
    jobs = []
    for line in calls.read_text().splitlines():
        words = line.split()
        jobs += [w.split("=", 1)[1] for w in words if w.startswith("spark.jrs.job_id=")]
    return jobs


def runs_in_range(site: dict) -> list[dict]:
    first, last = DAYS[0].isoformat(), DAYS[-1].isoformat()
    return [r for r in site["airflow"].client.dag_runs(DAG_ID) if first <= (r.get("logical_date") or "")[:10] <= last]


def test_only_dates_with_a_job_not_committed_get_a_run(site: dict, credentials: None, capsys) -> None:
    store = site["store"]
    for i, day in enumerate(DAYS):
        for job in ("mo_a", "mo_b"):
            if (i, job) in MISSING:
                continue
            status = JobStatus.FAILED if (i, job) in FAILED else JobStatus.SUCCEEDED
            job_id = f"{job}.{day.isoformat()}"
            store.create_dirty_result(JobResult(job_id=job_id, status=status, attempt=Attempt(DAG_ID, "t", "r", 1)))
            if status is JobStatus.SUCCEEDED:
                store.mark_result_as_clean(job_id)
    capsys.readouterr()

    assert main(["--json", *cli(site, "--missing-only", "--wait", "--max-active-runs", "2")]) == 0

    doc = json.loads(capsys.readouterr().out)
    wanted = sorted({DAYS[i].isoformat() for i, _ in MISSING | FAILED})
    # two ranges: no Airflow backfill (one per range would run one after another), one run per
    # date with its logical date, all at once
    assert doc["how"] == "runs" and doc["backfills"] == [] and client_backfills(site) == []
    assert sorted((r["logical_date"][:10], r["action"]) for r in doc["runs"]) == [(d, "triggered") for d in wanted]
    runs = runs_in_range(site)
    assert sorted(r["logical_date"][:10] for r in runs) == wanted  # no run at all for committed dates
    assert {r["run_type"] for r in runs} == {"manual"}
    assert {r["note"] for r in runs} == {"airflow-jrs backfill --missing-only: a job of this date was not committed"}
    for r in runs:  # the timetable's interval, as a scheduled or backfill run of the date has
        # (@daily is a cron trigger timetable in Airflow 3: a zero-width interval at the date)
        assert r["data_interval_start"][:19] == r["data_interval_end"][:19] == r["logical_date"][:19]
    assert {r["state"] for r in runs} == {"success"}, site["airflow"].logs_tail()
    client = site["airflow"].client
    with_tis = sorted(r["logical_date"][:10] for r in runs if client.task_instances(DAG_ID, r["dag_run_id"]))
    assert with_tis == wanted  # task instances only in the created runs
    in_range = [j for j in launched_jobs(site["calls"]) if j.rsplit(".", 1)[1] <= DAYS[-1].isoformat()]
    assert sorted(in_range) == sorted(f"{job}.{DAYS[i].isoformat()}" for i, job in MISSING | FAILED)
    for day in DAYS:
        for job in ("mo_a", "mo_b"):
            entry = store.get_entry(f"{job}.{day.isoformat()}")
            assert entry is not None and entry.is_clean and entry.result.status is JobStatus.SUCCEEDED

    # Now everything is committed: the same command creates nothing and calls no backfill.
    backfills = client.backfills(DAG_ID)
    assert main(cli(site, "--missing-only")) == 0
    assert "no backfill needed, nothing created" in capsys.readouterr().out
    assert client.backfills(DAG_ID) == backfills and len(runs_in_range(site)) == len(wanted)


def client_backfills(site: dict) -> list[dict]:
    return site["airflow"].client.backfills(DAG_ID)


def test_an_ended_run_of_a_missing_date_is_cleared_and_runs_again(site: dict, credentials: None, capsys) -> None:
    """Runs of the first test exist for the 3rd and 8th days: forgetting a job of each makes them
    scattered missing dates whose runs ended, so each is cleared (same run id), not created."""
    store, airflow = site["store"], site["airflow"]
    before = {r["logical_date"][:10]: r["dag_run_id"] for r in runs_in_range(site)}
    forget = [f"mo_a.{DAYS[2].isoformat()}", f"mo_b.{DAYS[7].isoformat()}"]
    for job_id in forget:
        store.forget_result(job_id)
    launches = len(launched_jobs(site["calls"]))
    capsys.readouterr()

    assert main(["--json", *cli(site, "--missing-only", "--wait")]) == 0

    doc = json.loads(capsys.readouterr().out)
    assert doc["how"] == "runs" and client_backfills(site) == []
    assert [(r["logical_date"][:10], r["run_id"], r["action"]) for r in doc["runs"]] == [
        (DAYS[i].isoformat(), before[DAYS[i].isoformat()], "cleared") for i in (2, 7)
    ]
    states = {r["logical_date"][:10]: r["state"] for r in runs_in_range(site)}
    assert states[DAYS[2].isoformat()] == states[DAYS[7].isoformat()] == "success", airflow.logs_tail()
    assert sorted(launched_jobs(site["calls"])[launches:]) == sorted(forget)


def test_one_missing_range_is_one_backfill_whose_runs_a_later_recompute_runs(
    site: dict, credentials: None, capsys
) -> None:
    """The bug: the command completed its finished backfills with ``PUT .../cancel``, which in
    Airflow 3.3 also pauses the backfill; the scheduler never starts a queued run of a paused
    backfill, so a run cleared later by ``airflow-jrs recompute`` stayed queued forever."""
    airflow = site["airflow"]
    first, last = DAYS[-1] + timedelta(days=10), DAYS[-1] + timedelta(days=11)  # nothing committed there
    capsys.readouterr()

    assert main(["--json", *cli(site, "--missing-only", "--wait", first=first, last=last)]) == 0

    doc = json.loads(capsys.readouterr().out)
    assert doc["how"] == "backfill" and [b["dates"] for b in doc["backfills"]] == [2] and doc["runs"] == []
    runs = [
        r for r in airflow.client.dag_runs(DAG_ID) if first.isoformat() <= r["logical_date"][:10] <= last.isoformat()
    ]
    assert [(r["run_type"], r["state"]) for r in runs] == [("backfill", "success")] * 2, airflow.logs_tail()
    backfill = airflow.client.backfill(doc["backfills"][0]["id"])
    assert not backfill["is_paused"]

    launches = len(launched_jobs(site["calls"]))
    argv = ["--redis-url", site["redis_url"], "--namespace", site["namespace"], "recompute", "--dag-id", DAG_ID,
            "--from-date", str(first), "--to-date", str(first), "--dags-folder", str(DAGS),
            "--airflow-url", airflow.url, "--yes"]  # fmt: skip
    assert main(argv) == 0
    run_id = next(r["dag_run_id"] for r in runs if r["logical_date"][:10] == first.isoformat())
    run = airflow.client.wait_for_run(DAG_ID, run_id, timeout=240)  # before the fix: queued forever
    assert run["state"] == "success", airflow.logs_tail()
    assert sorted(launched_jobs(site["calls"])[launches:]) == [f"mo_a.{first}", f"mo_b.{first}"]


def test_wrong_credentials_say_what_to_set(site: dict, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.delenv("AIRFLOW_JRS_API_TOKEN", raising=False)
    monkeypatch.setenv("AIRFLOW_JRS_API_USERNAME", site["airflow"].username)
    monkeypatch.setenv("AIRFLOW_JRS_API_PASSWORD", "wrong")
    late = DAYS[-1] + timedelta(days=5)  # nothing committed there: a run is needed
    assert main(cli(site, "--missing-only", first=late, last=late)) == 2
    err = capsys.readouterr().err
    assert "HTTP 401" in err and "AIRFLOW_JRS_API_USERNAME" in err and "nothing created" in err


def test_a_dag_airflow_does_not_know_is_named(site: dict, credentials: None, tmp_path: Path, capsys) -> None:
    source = (DAGS / "jrs_missing_only.py").read_text().replace('"jrs_missing_only"', '"jrs_not_deployed"')
    (tmp_path / "jrs_not_deployed.py").write_text(source)
    late = DAYS[-1] + timedelta(days=5)  # nothing committed there: a run is needed
    argv = cli(site, "--missing-only", dag_id="jrs_not_deployed", first=late, last=late)
    argv[argv.index("--dags-folder") + 1] = str(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "HTTP 404" in err and "jrs_not_deployed" in err and "no such DAG" in err and "nothing created" in err
