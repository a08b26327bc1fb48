"""Where the store is (``--redis-url``, ``--namespace``, ``--conn-id``, ``--result-documents``)
may be given before or after the command, as people type them: ``airflow-jrs list --redis-url
URL`` used to fail with "unrecognized arguments" and no word of where the options go."""

from __future__ import annotations

import json

import pytest

from airflow_jrs.cli import main
from airflow_jrs.store import JobResult, JobStatus


def test_store_options_after_the_command_read_the_same_namespace(redis_url, namespace, store, capsys):
    store.create_dirty_result(JobResult(job_id="d.t.2013-01-01", status=JobStatus.SUCCEEDED))

    assert main(["list", "--redis-url", redis_url, "--namespace", namespace, "--json"]) == 0
    after = json.loads(capsys.readouterr().out)
    assert main(["--redis-url", redis_url, "--namespace", namespace, "--json", "list"]) == 0
    before = json.loads(capsys.readouterr().out)

    assert after["namespace"] == before["namespace"] == namespace
    assert [e["job_id"] for e in after["entries"]] == [e["job_id"] for e in before["entries"]] == ["d.t.2013-01-01"]


def test_a_namespace_after_the_command_wins_over_one_before_it(redis_url, namespace, store, capsys):
    store.create_dirty_result(JobResult(job_id="d.t.2013-01-01", status=JobStatus.SUCCEEDED))

    code = main(["--redis-url", redis_url, "--namespace", "elsewhere", "show", "--namespace", namespace, "--json",
                 "d.t.2013-01-01"])  # fmt: skip
    assert code == 0
    assert json.loads(capsys.readouterr().out)["namespace"] == namespace


def test_an_option_given_only_before_the_command_is_not_reset_by_it(redis_url, namespace, store, capsys):
    store.create_dirty_result(JobResult(job_id="d.t.2013-01-01", status=JobStatus.SUCCEEDED))
    assert main(["--redis-url", redis_url, "--namespace", namespace, "dirty", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["namespace"] == namespace


@pytest.mark.parametrize("command", ["list", "dirty", "leases", "forget", "backfill", "plan", "doctor"])
def test_every_commands_help_says_where_the_store_options_go(command, capsys):
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "--redis-url" in out and "before or after the command" in out.lower()
