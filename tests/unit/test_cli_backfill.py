"""``airflow-jrs backfill --missing-only`` up to the REST call: the store read, the plan, the errors.

A real redis-server (the session's); the DAGs are parsed by Airflow's DagBag from a temporary
folder. Whatever reaches Airflow's API is in ``tests/airflow/test_backfill_missing_only.py``
(a real api-server and scheduler); here the API is pointed at a closed port, which proves
that a fully committed range never calls it.
"""

from __future__ import annotations

import json
import socket
from datetime import date, timedelta

import pytest
from redis.connection import AbstractConnection

from airflow_jrs.cli import main
from airflow_jrs.exceptions import CorruptJobResultError, JobResultQuarantinedError
from airflow_jrs.store import Attempt, JobResult, JobStatus, RedisJobResultStore
from airflow_jrs.store.redis.batch_read import read_entries
from airflow_jrs.store.redis.result_scripts import READ_ENTRIES

DAGS = """
from datetime import datetime, UTC
from airflow.sdk import DAG
from airflow_jrs.operators import JrsSparkSubmitOperator

with DAG("jrs_mo", schedule="@daily", start_date=datetime(2013, 1, 1, tzinfo=UTC), catchup=False):
    JrsSparkSubmitOperator(task_id="a", application="/nowhere/app.py", conn_id="spark_local")
    JrsSparkSubmitOperator(task_id="b", application="/nowhere/app.py", conn_id="spark_local", job_id="b.{{ ds }}")

with DAG("jrs_mo_xcom", schedule="@daily", start_date=datetime(2013, 1, 1, tzinfo=UTC), catchup=False):
    JrsSparkSubmitOperator(
        task_id="a", application="/nowhere/app.py", conn_id="spark_local",
        job_id="x.{{ ti.xcom_pull(task_ids='up') }}",
    )

with DAG("jrs_mo_fixed", schedule="@daily", start_date=datetime(2013, 1, 1, tzinfo=UTC), catchup=False):
    JrsSparkSubmitOperator(task_id="a", application="/nowhere/app.py", conn_id="spark_local", job_id="same")
"""


@pytest.fixture
def dags(dag_folder):
    return dag_folder("jrs_mo.py", DAGS)


@pytest.fixture
def closed_port():
    """An API URL nothing listens on: any call to it fails as unreachable."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def commit(store: RedisJobResultStore, job_id: str, *, clean: bool = True, status=JobStatus.SUCCEEDED) -> None:
    store.create_dirty_result(JobResult(job_id=job_id, status=status, attempt=Attempt("jrs_mo", "a", "r", 1)))
    if clean and status is JobStatus.SUCCEEDED:
        store.mark_result_as_clean(job_id)


def jobs_of(day: date) -> list[str]:
    return [f"jrs_mo.a.{day.isoformat()}", f"b.{day.isoformat()}"]


def args(redis_url, namespace, dags, first, last, *extra):
    return ["--redis-url", redis_url, "--namespace", namespace, "backfill", "--dag-id", "jrs_mo",
            "--from-date", str(first), "--to-date", str(last), "--dags-folder", dags, *extra]  # fmt: skip


def test_dry_run_plans_runs_only_for_dates_with_a_job_not_committed(store, redis_url, namespace, dags, capsys):
    days = [date(2013, 1, d) for d in range(1, 7)]
    for day in days:
        for job_id in jobs_of(day):
            commit(store, job_id)
    store.forget_result(jobs_of(days[2])[1])  # 3rd: one job missing
    store.forget_result(jobs_of(days[3])[0])  # 4th: adjacent, so one range with the 3rd
    store.forget_result(jobs_of(days[5])[0])
    commit(store, jobs_of(days[5])[0], clean=False)  # 6th: dirty (cleanup pending) needs its run
    capsys.readouterr()

    code = main(["--json", *args(redis_url, namespace, dags, days[0], days[-1], "--missing-only", "--dry-run")])

    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [d["run"] for d in doc["dates"]] == [False, False, True, True, False, True]
    assert [d["committed"] for d in doc["dates"]] == [2, 2, 1, 1, 2, 1]
    # scattered dates: no Airflow backfill (one per range would run one after another), runs
    # with their logical dates instead, all at once
    assert doc["summary"] == {"dates": 6, "jobs": 12, "dates_to_run": 3, "backfills": 0}
    assert doc["how"] == "runs"
    assert "cleanup pending" in doc["dates"][5]["missing"][0]["why"]
    assert doc["backfills"] == [] and doc["runs"] == []  # a dry run creates nothing

    assert main(args(redis_url, namespace, dags, days[0], days[-1], "--missing-only", "--dry-run")) == 0
    out = capsys.readouterr().out
    assert "3 dates need a run (2 contiguous ranges): 3 runs with their logical dates" in out
    assert "dry run: would create 3 runs with their logical dates" in out and "nothing created" in out

    # one contiguous range: one Airflow backfill of exactly those dates
    assert main(["--json", *args(redis_url, namespace, dags, days[0], days[3], "--missing-only", "--dry-run")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"]["backfills"] == 1 and doc["how"] == "backfill"


def test_failed_and_changed_jobs_need_a_run_and_a_quarantined_one_blocks(store, redis_url, namespace, dags, capsys):
    day = date(2013, 2, 1)
    commit(store, jobs_of(day)[0], status=JobStatus.FAILED)
    commit(store, jobs_of(day)[1])
    blocked_day = day + timedelta(days=1)
    commit(store, jobs_of(blocked_day)[0])
    store.client.set(store.keys.result(jobs_of(blocked_day)[1]), b"not json")  # corrupt: quarantined on read

    assert main(["--json", *args(redis_url, namespace, dags, day, blocked_day, "--missing-only", "--dry-run")]) == 0

    failed, blocked = json.loads(capsys.readouterr().out)["dates"]
    assert failed["run"] and "FAILED" in failed["missing"][0]["why"]
    assert not blocked["run"] and "release-quarantine" in blocked["blocked"][0]["why"]
    assert store.get_quarantined() == [jobs_of(blocked_day)[1]]


def test_a_fully_committed_range_reads_the_store_once_per_batch_and_never_calls_airflow(
    store, redis_url, namespace, dags, closed_port, monkeypatch, capsys
):
    days = [date(2013, 1, 1) + timedelta(days=i) for i in range(600)]
    for day in days:
        for job_id in jobs_of(day):
            commit(store, job_id)
    prefix = store.keys.result("x")[: -len("x")].encode()
    reads = []
    real_send = AbstractConnection.send_packed_command

    def counting_send(self, command, check_health=True):
        packed = b"".join(command) if isinstance(command, list) else command
        if prefix in packed:  # a round trip that reads results of this namespace
            reads.append(packed.count(prefix))
        return real_send(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counting_send)
    store.client.script_load(READ_ENTRIES)  # as after any earlier read: no NOSCRIPT round trip counted
    calls_before = _calls(store, "evalsha")

    code = main(args(redis_url, namespace, dags, days[0], days[-1], "--missing-only", "--airflow-url", closed_port))

    out = capsys.readouterr().out
    assert code == 0, out
    assert "every date is committed: no backfill needed, nothing created" in out
    # 1,200 jobs, 500 per pipeline, whole dates per batch: 250 + 250 + 100 dates.
    assert reads == [500, 500, 200]
    # one READ_ENTRIES call per batch (each result and quarantine marker): no command per job
    assert _calls(store, "evalsha") - calls_before == 3


def _calls(store: RedisJobResultStore, command: str) -> int:
    stats = store.client.info("commandstats")
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))


def test_read_entries_answers_every_job_in_one_round_trip_per_batch(store):
    commit(store, "j.1")
    commit(store, "j.2", clean=False)
    store.client.set(store.keys.result("j.4"), b"not json")  # corrupt: quarantined by the read
    answers = read_entries(store, ["j.1", "j.2", "j.3", "j.4"], batch=2)
    assert answers["j.1"].is_clean and answers["j.2"].is_dirty and answers["j.3"] is None
    assert isinstance(answers["j.4"], CorruptJobResultError)
    again = read_entries(store, ["j.4", "j.1"])  # the quarantine marker is read in the same batch
    assert isinstance(again["j.4"], JobResultQuarantinedError) and again["j.1"].is_clean
    with pytest.raises(ValueError, match="at least 1"):
        read_entries(store, ["j.1"], batch=0)


def test_missing_dates_without_credentials_or_api_say_so_and_create_nothing(
    store, redis_url, namespace, dags, closed_port, monkeypatch, capsys
):
    argv = args(redis_url, namespace, dags, "2013-01-01", "2013-01-02", "--missing-only", "--yes",
                "--airflow-url", closed_port)  # fmt: skip
    for name in ("AIRFLOW_JRS_API_TOKEN", "AIRFLOW_JRS_API_USERNAME", "AIRFLOW_JRS_API_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "no credentials for Airflow's API" in err and "AIRFLOW_JRS_API_TOKEN" in err and "nothing created" in err

    monkeypatch.setenv("AIRFLOW_JRS_API_TOKEN", "t")
    assert main(argv) == 3
    err = capsys.readouterr().err
    assert "cannot reach Airflow's API" in err and "--airflow-url" in err and "nothing created" in err


def test_creating_runs_asks_first_and_without_yes_off_a_terminal_refuses(
    store, redis_url, namespace, dags, closed_port, monkeypatch, capsys
):
    """As ``forget`` and ``recompute``: a run of a date that is not committed launches Spark, so
    ``--missing-only`` asks before it creates one; a script says ``--yes``. Here Airflow's API is a
    closed port: a refusal never reaches it (exit 2, not 3), with ``--yes`` it is tried (exit 3)."""
    monkeypatch.setenv("AIRFLOW_JRS_API_TOKEN", "t")
    argv = args(redis_url, namespace, dags, "2013-01-01", "2013-01-02", "--missing-only", "--airflow-url", closed_port)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "refusing to create 1 backfill for 2 dates of jrs_mo without confirmation" in err
    assert "add --yes to go ahead, or --dry-run to only preview" in err

    assert main([*argv, "--yes"]) == 3
    assert "cannot reach Airflow's API" in capsys.readouterr().err


def test_without_missing_only_it_explains_and_creates_nothing(store, redis_url, namespace, dags, closed_port, capsys):
    commit(store, jobs_of(date(2013, 1, 1))[0])
    code = main(args(redis_url, namespace, dags, "2013-01-01", "2013-01-03", "--airflow-url", closed_port))
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0
    assert "without --missing-only nothing is created" in out
    assert "airflow backfill create --dag-id jrs_mo" in out and "looks at runs, not results" in out
    assert "creates runs for the 3 dates where some job is not committed" in out


@pytest.mark.parametrize(
    ("dag_id", "first", "last", "code", "words"),
    [
        ("jrs_mo", "2013-01-05", "2013-01-01", 2, ["--from-date is after --to-date", "swap"]),
        ("no_such_dag", "2013-01-01", "2013-01-02", 1, ["'no_such_dag' is not in", "check --dag-id"]),
        ("jrs_mo_xcom", "2013-01-01", "2013-01-02", 2, ["cannot be derived", "airflow backfill create", "ds"]),
        ("jrs_mo_fixed", "2013-01-01", "2013-01-02", 2, ["'same' stands for several dates", "{{ ds }}"]),
    ],
)
def test_errors_say_what_was_wrong_and_what_to_do(redis_url, namespace, dags, capsys, dag_id, first, last, code, words):
    argv = ["--redis-url", redis_url, "--namespace", namespace, "backfill", "--dag-id", dag_id,
            "--from-date", first, "--to-date", last, "--dags-folder", dags, "--missing-only", "--dry-run"]  # fmt: skip
    assert main(argv) == code
    err = capsys.readouterr().err
    for word in words:
        assert word in err, err
