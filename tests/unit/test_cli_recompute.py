"""``airflow-jrs recompute`` refuses before it changes anything when Airflow's API cannot be used.

Real Redis; the happy path (forget, clear through a real Airflow, a later backfill reuses) is in
tests/e2e/test_deployment.py. Here: what a person gets when the API is unreachable or no
credentials are set: one line naming what to set, exit code 3 or 2, and the result still there."""

from __future__ import annotations

import socket

import pytest

from airflow_jrs.cli import main
from airflow_jrs.store import Attempt, JobResult, JobStatus, RedisJobResultStore

JOB = "d.t.2013-01-01"


@pytest.fixture
def store(redis_url, namespace, monkeypatch):
    for name in ("URL", "TOKEN", "USERNAME", "PASSWORD"):
        monkeypatch.delenv(f"AIRFLOW_JRS_API_{name}", raising=False)
    s = RedisJobResultStore(redis_url, namespace)
    s.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.SUCCEEDED, attempt=Attempt("d", "t", "manual__1", 1)))
    return s


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_recompute_without_credentials_names_what_to_set_and_forgets_nothing(base_args, store, capsys):
    assert main([*base_args, "recompute", "--yes", "--airflow-url", "http://127.0.0.1:9", JOB]) == 2
    err = capsys.readouterr().err
    assert "AIRFLOW_JRS_API_TOKEN" in err and "AIRFLOW_JRS_API_USERNAME" in err and "nothing was changed" in err
    assert store.get_entry(JOB) is not None


def test_recompute_with_airflow_unreachable_exits_3_and_forgets_nothing(base_args, store, capsys, monkeypatch):
    monkeypatch.setenv("AIRFLOW_JRS_API_TOKEN", "t")
    url = f"http://127.0.0.1:{free_port()}"
    assert main([*base_args, "recompute", "--yes", "--airflow-url", url, JOB]) == 3
    err = capsys.readouterr().err
    assert f"cannot reach Airflow's API at {url}" in err and "nothing was changed" in err
    assert store.get_entry(JOB) is not None


def test_recompute_previews_the_task_instance_it_would_clear(base_args, store, capsys):
    assert main([*base_args, "recompute", "--dry-run", JOB]) == 0
    out = capsys.readouterr().out
    assert JOB in out and "manual__1 / t" in out and "dry run: nothing changed" in out
    assert store.get_entry(JOB) is not None


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([], "give JOB_IDs, or --dag-id"),
        (["--task", "t", JOB], "--task goes with --dag-id"),
        (["d.t.2099-01-01"], "has no result"),
    ],
)
def test_recompute_arguments_are_checked_with_one_line(base_args, store, capsys, args, says):
    assert main([*base_args, "recompute", "--yes", *args]) in (1, 2)
    assert says in capsys.readouterr().err


@pytest.fixture
def base_args(redis_url, namespace):
    return ["--redis-url", redis_url, "--namespace", namespace]
