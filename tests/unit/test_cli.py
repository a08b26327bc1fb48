"""The airflow-jrs CLI against a real Redis (store given by URL: no Airflow connection needed).

In-process ``main([...])`` for behaviour; a few real subprocesses for what only a process shows
(exit codes, one-line errors without traceback, no password on screen)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_jrs.cli import main
from airflow_jrs.exceptions import CorruptJobResultError
from airflow_jrs.store import Attempt, JobResult, JobStatus, RedisJobResultStore
from airflow_jrs.store.intents import Intent
from airflow_jrs.store.redis.intents import RedisIntentStore
from airflow_jrs.store.redis.leases import RedisJobLease
from jrs_testbench.redis_server import EmbeddedRedis

CLI = str(Path(sys.executable).parent / "airflow-jrs")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120)


def jout(capsys: pytest.CaptureFixture[str]) -> dict:
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def base(redis_url, namespace):
    return ["--redis-url", redis_url, "--namespace", namespace]


def ok(job_id: str, dag: str = "d", status: JobStatus = JobStatus.SUCCEEDED) -> JobResult:
    return JobResult(job_id=job_id, status=status, attempt=Attempt(dag, "t", "manual__1", 1))


def test_cli_lists_shows_forgets_and_releases_quarantine(base, store, capsys):
    store.create_dirty_result(JobResult(job_id="d.t.2013-01-01", status=JobStatus.SUCCEEDED))

    assert main([*base, "dirty"]) == 0
    assert "d.t.2013-01-01" in capsys.readouterr().out
    assert main([*base, "show", "--json", "d.t.2013-01-01"]) == 0
    assert jout(capsys)["state"] == "dirty"
    assert main([*base, "forget", "--yes", "d.t.2013-01-01"]) == 0
    assert store.get_entry("d.t.2013-01-01") is None
    assert main([*base, "show", "d.t.2013-01-01"]) == 1
    assert "forgotten" in capsys.readouterr().out  # the kept history is shown, not just "no result"

    store.client.set(store.keys.result("bad"), b"not json")
    assert main([*base, "show", "bad"]) == 2  # the corrupt entry is quarantined, with a clear error
    assert "quarantine" in capsys.readouterr().err
    assert main([*base, "--json", "quarantined"]) == 0
    assert jout(capsys)["quarantined"] == ["bad"]
    assert main([*base, "release-quarantine", "--yes", "bad"]) == 0
    assert "not json" in capsys.readouterr().out
    assert store.get_quarantined() == []


def test_cli_errors_name_the_problem(base, capsys):
    assert main([*base, "forget", "--yes", "nope"]) == 1
    err = capsys.readouterr().err
    assert "nope" in err and "no result" in err


def test_list_json_names_the_namespace_and_filters(base, store, namespace, capsys):
    store.create_dirty_result(ok("a.t.2013-01-01", dag="a"))
    store.create_dirty_result(ok("a.t.2013-01-02", dag="a", status=JobStatus.FAILED))
    store.create_dirty_result(ok("b.t.2013-01-01", dag="b"))
    store.mark_result_as_clean("b.t.2013-01-01")
    store.client.set(store.keys.result("a.t.bad"), b"garbage")
    with pytest.raises(CorruptJobResultError):
        store.get_entry("a.t.bad")  # quarantines it

    assert main([*base, "list", "--json"]) == 0
    doc = jout(capsys)
    assert doc["namespace"] == namespace and doc["server"].startswith("127.0.0.1:")
    assert [e["job_id"] for e in doc["entries"]] == ["b.t.2013-01-01", "a.t.2013-01-02", "a.t.2013-01-01"]
    # the entry shape of the Job results API (airflow_jrs.views.json): the result's members, flat
    assert set(doc["entries"][0]) >= {"job_id", "state", "status", "created_at", "attempt", "spark_url"}
    assert doc["quarantined"] == ["a.t.bad"]  # quarantined jobs appear in the listing too

    def ids(*args: str) -> list[str]:
        assert main([*base, "--json", "list", *args]) == 0
        return [e["job_id"] for e in jout(capsys)["entries"]]

    assert ids("--state", "clean") == ["b.t.2013-01-01"]
    assert ids("--state", "dirty") == ["a.t.2013-01-02", "a.t.2013-01-01"]
    assert ids("--status", "failed") == ["a.t.2013-01-02"]
    assert ids("--dag-id", "b") == ["b.t.2013-01-01"]
    assert ids("--prefix", "a.t.2013-01-01") == ["a.t.2013-01-01"]
    assert ids("--limit", "1", "--offset", "1") == ["a.t.2013-01-02"]
    assert ids("--since", "2999-01-01") == []
    assert ids("--since", "2000-01-01", "--dag-id", "a") == ["a.t.2013-01-02", "a.t.2013-01-01"]


def test_an_empty_answer_says_where_it_looked_and_the_implicit_namespace(redis_url, capsys):
    # (the session's server has no 'default' namespace: exit 1, and the namespaces it has)
    assert main(["--redis-url", redis_url, "list", "--prefix", "no-such-prefix-at-all"]) == 1
    out = capsys.readouterr().out
    assert "no results" in out and "namespace 'default'" in out and "without --namespace" in out
    assert "127.0.0.1:" in out


def test_an_empty_namespace_names_the_namespaces_that_exist_on_the_server(tmp_path, capsys):
    # a typo'd namespace is not an empty store: say so, and which namespaces the server has
    with EmbeddedRedis(tmp_path) as server:
        RedisJobResultStore(server.url, "nc3").create_dirty_result(ok("n.t.2013-01-01"))
        RedisJobResultStore(server.url, "other").create_dirty_result(ok("n.t.2013-01-01"))
        typo = ["--redis-url", server.url, "--namespace", "nc33"]
        assert main([*typo, "list"]) == 1
        out = capsys.readouterr().out
        assert "namespace 'nc33'" in out and "has no keys" in out and "'nc3', 'other'" in out
        assert main([*typo, "--json", "list"]) == 1
        doc = jout(capsys)
        assert doc["entries"] == [] and doc["namespace_empty"] is True
        assert doc["namespaces_on_server"] == ["nc3", "other"]
        # show of a job in the wrong namespace names the namespaces too
        assert main([*typo, "show", "n.t.2013-01-01"]) == 1
        assert "has no keys" in capsys.readouterr().out
        # a namespace with keys but nothing matching the filter stays a plain, successful "no results"
        assert main(["--redis-url", server.url, "--namespace", "nc3", "list", "--prefix", "zzz"]) == 0
        assert "has no keys" not in capsys.readouterr().out


def test_show_running_job_with_lease_and_intent(base, store, namespace, capsys):
    lease = RedisJobLease(store.client, namespace, "r.t.2013-01-01", owner={"host": "h1", "pid": 42, "run_id": "r1"})
    token = lease.acquire()
    intent = Intent("r.t.2013-01-01", token, "file:///spec", "/staging", "app", "h1", 42, 0.0)
    RedisIntentStore(store.client, namespace, spec_root="/tmp").update(intent)

    assert main([*base, "show", "--json", "r.t.2013-01-01"]) == 0
    doc = jout(capsys)
    assert doc["summary"] == "running" and doc["running"] is True and doc["state"] is None
    assert doc["lease"]["token"] == int(token) and doc["intent"]["fence"] == int(token)
    assert main([*base, "show", "r.t.2013-01-01"]) == 0
    assert "running" in capsys.readouterr().out

    assert main([*base, "--json", "leases"]) == 0
    leases = jout(capsys)["leases"]
    assert [(x["job_id"], x["lease"]["token"], x["lease"]["owner"]["host"]) for x in leases] == [
        ("r.t.2013-01-01", int(token), "h1")
    ]
    assert leases[0]["intent"]["fence"] == int(token)
    assert main([*base, "--json", "intents"]) == 0
    intents = jout(capsys)["intents"]
    assert intents[0]["job_id"] == "r.t.2013-01-01" and intents[0]["verdict"].startswith("running")
    lease.release()
    assert main([*base, "--json", "intents"]) == 0
    assert jout(capsys)["intents"][0]["verdict"].startswith("needs recovery")


def test_history_after_forget(base, store, capsys):
    store.create_dirty_result(ok("h.t.1"))
    store.forget_result("h.t.1")
    assert main([*base, "--json", "history", "h.t.1"]) == 0
    assert [h["job_id"] for h in jout(capsys)["history"]] == ["h.t.1"]
    assert main([*base, "history", "h.t.never"]) == 1


def test_history_says_who_moved_each_entry_when_and_why(base, store, capsys):
    # Who, when and why: a forget from the CLI, a rerun after a failure, and a changed fingerprint
    # each leave a history item naming the actor, the time and the reason, in text and in JSON.
    import getpass
    import socket

    job = "who.t.2013-01-01"
    store.create_dirty_result(JobResult(job_id=job, status=JobStatus.FAILED, error="OOM"))
    by_task = Attempt(dag_id="who", task_id="t", run_id="manual__rerun", try_number=2)
    store.create_dirty_result(
        JobResult(job_id=job, status=JobStatus.SUCCEEDED, fingerprint="fp-1", attempt=by_task), supersede=True
    )
    store.create_dirty_result(JobResult(job_id=job, status=JobStatus.SUCCEEDED, fingerprint="fp-2"), supersede=True)
    before = datetime.now(UTC)
    assert main([*base, "forget", "--yes", job]) == 0
    capsys.readouterr()

    assert main([*base, "--json", "history", job]) == 0
    moved = [h["moved"] for h in jout(capsys)["history"]]
    assert [m["reason"] for m in moved] == ["forgotten", "superseded", "rerun"]
    forgot = moved[0]
    assert forgot["by"]["via"] == "cli" and forgot["by"]["user"] == getpass.getuser()
    assert forgot["by"]["host"] == socket.gethostname()
    assert datetime.fromisoformat(forgot["moved_at"]) >= before.replace(microsecond=0)
    assert moved[2]["by"]["attempt"]["run_id"] == "manual__rerun"  # the attempt that ran it again

    assert main([*base, "history", job]) == 0
    text = capsys.readouterr().out
    assert "why" in text and "forgotten" in text and "superseded" in text and "rerun" in text
    assert f"{getpass.getuser()}@{socket.gethostname()} (airflow-jrs CLI)" in text
    assert "who.t run manual__rerun try 2" in text


def test_destructive_verbs_refuse_without_yes_off_a_terminal(base, store, capsys):
    store.create_dirty_result(ok("x.t.1"))
    store.create_dirty_result(ok("x.t.2"))
    store.mark_result_as_clean("x.t.2")
    for verb in (["forget", "x.t.1"], ["mark-clean", "x.t.1"], ["purge", "--older-than-days", "0"]):
        assert main([*base, *verb]) == 2, verb
        err = capsys.readouterr().err
        assert "--yes" in err and len(err.strip().splitlines()) == 1
    assert store.get_entry("x.t.1").is_dirty and store.get_entry("x.t.2").is_clean


def test_dry_run_changes_nothing(base, store, capsys):
    store.create_dirty_result(ok("y.t.1"))
    store.create_dirty_result(ok("y.t.2"))
    store.mark_result_as_clean("y.t.2")
    assert main([*base, "forget", "--dry-run", "y.t.1", "y.t.2"]) == 0
    assert main([*base, "mark-clean", "--dry-run", "y.t.1"]) == 0
    assert main([*base, "purge", "--dry-run", "--older-than-days", "0"]) == 0
    out = capsys.readouterr().out
    assert "dry run: nothing changed" in out and "y.t.2" in out
    assert store.get_entry("y.t.1").is_dirty and store.get_entry("y.t.2").is_clean

    assert main([*base, "mark-clean", "--yes", "y.t.1"]) == 0
    assert store.get_entry("y.t.1").is_clean
    capsys.readouterr()
    assert main([*base, "--json", "purge", "--yes", "--older-than-days", "0"]) == 0
    assert jout(capsys)["purged"] == 2


PLAN_DAG = """
from datetime import datetime, UTC
from airflow.sdk import DAG
from airflow_jrs.operators import JrsSparkSubmitOperator

with DAG("jrs_plan", schedule="@daily", start_date=datetime(2013, 1, 1, tzinfo=UTC), catchup=False) as dag:
    JrsSparkSubmitOperator(task_id="daily", application="/nowhere/app.py", conn_id="spark_local")
    JrsSparkSubmitOperator(
        task_id="tmpl", application="/nowhere/app.py", conn_id="spark_local", job_id="flights.{{ ds_nodash }}"
    )
"""


@pytest.fixture
def dags(dag_folder):
    return dag_folder("jrs_plan.py", PLAN_DAG)


def test_plan_shows_what_a_backfill_would_compute(base, store, namespace, dags, capsys):
    store.create_dirty_result(ok("jrs_plan.daily.2013-01-01", dag="jrs_plan"))
    store.mark_result_as_clean("jrs_plan.daily.2013-01-01")
    store.create_dirty_result(ok("jrs_plan.daily.2013-01-02", dag="jrs_plan"))
    store.create_dirty_result(ok("flights.20130101", dag="jrs_plan", status=JobStatus.FAILED))
    RedisJobLease(store.client, namespace, "flights.20130102").acquire()
    rng = ["--dag-id", "jrs_plan", "--from-date", "2013-01-01", "--to-date", "2013-01-03", "--dags-folder", dags]

    assert main([*base, "--json", "plan", *rng]) == 0
    doc = jout(capsys)
    assert doc["namespace"] == namespace and doc["reprocess_behavior"] == "completed"
    got = {j["job_id"]: (j["status"], j["backfill"]) for j in doc["jobs"]}
    assert got == {
        "jrs_plan.daily.2013-01-01": ("committed", "skip"),
        "jrs_plan.daily.2013-01-02": ("dirty", "skip"),
        "jrs_plan.daily.2013-01-03": ("missing", "run"),
        "flights.20130101": ("failed", "run"),
        "flights.20130102": ("running", "blocked"),
        "flights.20130103": ("missing", "run"),
    }
    assert doc["summary"] == {"run": 3, "skip": 2, "blocked": 1}
    assert main([*base, "plan", *rng]) == 0
    assert "would run Spark for 3 jobs" in capsys.readouterr().out


def test_range_forget_previews_then_forgets_only_the_range(base, store, dags, capsys):
    for day in ("01", "02", "05"):
        store.create_dirty_result(ok(f"jrs_plan.daily.2013-01-{day}", dag="jrs_plan"))
    rng = ["--dag-id", "jrs_plan", "--from-date", "2013-01-01", "--to-date", "2013-01-03", "--dags-folder", dags]
    assert main([*base, "forget", *rng]) == 2  # no terminal, no --yes
    assert main([*base, "forget", "--dry-run", *rng]) == 0
    out = capsys.readouterr().out
    assert "jrs_plan.daily.2013-01-02" in out and "2013-01-05" not in out
    assert store.get_entry("jrs_plan.daily.2013-01-01") is not None
    assert main([*base, "--json", "forget", "--yes", *rng]) == 0
    assert sorted(jout(capsys)["forgotten"]) == ["jrs_plan.daily.2013-01-01", "jrs_plan.daily.2013-01-02"]
    assert store.get_entry("jrs_plan.daily.2013-01-01") is None
    assert store.get_entry("jrs_plan.daily.2013-01-05") is not None


@pytest.mark.parametrize(
    ("kwargs", "check"),
    [({"appendfsync": "everysec"}, "persistence"), ({"extra_args": ["--maxmemory-policy", "allkeys-lru"]}, "eviction")],
)
def test_doctor_warns_when_a_guarantee_does_not_hold(tmp_path, kwargs, check, capsys):
    with EmbeddedRedis(tmp_path, **kwargs) as server:
        assert main(["--redis-url", server.url, "--json", "doctor", "--redis-only"]) == 1
    doc = jout(capsys)
    levels = {c["name"]: c["level"] for c in doc["checks"]}
    assert levels[check] == "warn" and levels["connection"] == "ok" and doc["namespace"] == "default"
    other = {"persistence": "eviction", "eviction": "persistence"}[check]
    assert levels[other] == "ok"


def test_doctor_checks_java_spark_and_the_provider(redis_url, capsys):
    main(["--redis-url", redis_url, "--json", "doctor"])
    levels = {c["name"]: c["level"] for c in jout(capsys)["checks"]}
    assert levels["persistence"] == "ok" and levels["eviction"] == "ok"
    assert levels["java"] == "ok" and levels["provider"] == "ok"
    assert "pyspark" in levels and "spark-submit" in levels


# -- real processes -------------------------------------------------------------------------------
def test_doctor_passes_on_the_projects_own_setup_without_the_venv_on_path(redis_url):
    # ./dev installs pyspark 4.3.0's files over pyspark-client 4.2.0's on purpose (the files that
    # run agree; only the client's metadata says 4.2.0), and a shell may call .venv/bin/airflow-jrs
    # without the venv on PATH: spark-submit is still the interpreter's pyspark's.
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p and p != venv_bin)
    done = subprocess.run(
        [CLI, "--redis-url", redis_url, "--json", "doctor"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PATH": path},
    )  # fmt: skip
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["pyspark"]["level"] == "ok", checks["pyspark"]
    assert checks["spark-submit"]["level"] == "ok", checks["spark-submit"]
    import pyspark

    submit = str(Path(pyspark.__file__).parent / "bin" / "spark-submit")
    assert checks["spark-submit"]["detail"].startswith(f"{submit}: Spark 4.3.0"), checks["spark-submit"]
    assert {c["level"] for name, c in checks.items() if name != "latency"} == {"ok"}, checks


def test_bad_arguments_are_one_line_with_exit_2():
    for args, hint in (
        (["list", "--limit", "0"], "use e.g. 50"),
        (["purge", "--older-than-days", "-1"], "use e.g. 90"),
        (["--redis-url", "localhost:6379", "list"], "use redis://localhost:6379/0"),
        (["--redis-url", "redis://127.0.0.1:1/0", "list", "--since", "yesterday"], "use e.g. 2013-01-01"),
    ):
        done = run(*args)
        assert done.returncode == 2, args
        assert hint in done.stderr and len(done.stderr.strip().splitlines()) == 1
        assert "Traceback" not in done.stderr


def test_unreachable_store_is_exit_3_without_the_password(tmp_path):
    from jrs_testbench.helpers import free_port

    done = run("--redis-url", f"redis://u:s3cret-pw@127.0.0.1:{free_port()}/0", "list")
    assert done.returncode == 3
    assert "nothing listens" in done.stderr and "s3cret-pw" not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "Airflow will retry" not in done.stderr  # a terminal's user retries, not Airflow


def test_show_prints_the_results_metrics(base, store, capsys):
    store.create_dirty_result(
        JobResult(job_id="m.t.2013-01-01", status=JobStatus.SUCCEEDED, metrics={"rows": 336776, "seconds": 4.5})
    )
    assert main([*base, "show", "m.t.2013-01-01"]) == 0
    out = capsys.readouterr().out
    assert "metrics" in out and "rows=336776" in out and "seconds=4.5" in out


def test_output_cut_short_by_a_closed_pipe_ends_quietly(redis_url, namespace, store):
    # `airflow-jrs --json list | head -1`: head exits after a line; no BrokenPipeError traceback
    for day in range(400):
        store.create_dirty_result(
            JobResult(job_id=f"pipe.t.{day:04d}", status=JobStatus.SUCCEEDED, outputs={"out": "x" * 200})
        )
    cli = [CLI, "--redis-url", redis_url, "--namespace", namespace, "--json", "list", "--limit", "500"]
    proc = subprocess.Popen(cli, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().strip() == b"{"
    proc.stdout.close()  # as head does: the rest of the answer (over 64 KiB) meets a closed pipe
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err, err


def test_stopping_a_job_that_is_not_running_is_not_found_in_plain_words(redis_url, namespace, store):
    store.create_dirty_result(ok("s.t.2013-01-01"))
    base = ["--redis-url", redis_url, "--namespace", namespace]
    for verb in ("stop", "cancel"):
        done = run(*base, verb, "s.t.2013-01-01")
        assert done.returncode == 1, (verb, done.returncode, done.stderr)  # 1: not found, as documented
        assert "has no running attempt" in done.stderr and "airflow-jrs show" in done.stderr
        assert "Error" not in done.stderr and "Traceback" not in done.stderr  # no class name


def test_process_exit_codes_and_confirmation(redis_url, namespace, store):
    store.create_dirty_result(ok("p.t.1"))
    base = ["--redis-url", redis_url, "--namespace", namespace]
    assert run(*base, "show", "p.t.none").returncode == 1
    refused = subprocess.run([CLI, *base, "forget", "p.t.1"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert refused.returncode == 2 and "--yes" in refused.stderr and "Traceback" not in refused.stderr
    listed = run(*base, "--json", "list")
    assert listed.returncode == 0 and json.loads(listed.stdout)["entries"][0]["job_id"] == "p.t.1"
    assert run(*base, "forget", "--yes", "p.t.1").returncode == 0
    assert store.get_entry("p.t.1") is None
    assert datetime.now(UTC)  # keeps the import used for readers of the plan test
