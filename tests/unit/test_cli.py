"""The airflow-jrs CLI against a real Redis (store given by URL: no Airflow connection needed)."""

from __future__ import annotations

import json

from airflow_jrs.cli import main
from airflow_jrs.store import JobResult, JobStatus, RedisJobResultStore


def test_cli_lists_shows_forgets_and_releases_quarantine(redis_url, namespace, capsys):
    store = RedisJobResultStore(redis_url, namespace)
    store.create_dirty_result(JobResult(job_id="d.t.2013-01-01", status=JobStatus.SUCCEEDED))
    base = ["--redis-url", redis_url, "--namespace", namespace]

    assert main([*base, "dirty"]) == 0
    assert "d.t.2013-01-01" in capsys.readouterr().out
    assert main([*base, "show", "d.t.2013-01-01"]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "dirty"
    assert main([*base, "forget", "d.t.2013-01-01"]) == 0
    assert store.get_entry("d.t.2013-01-01") is None
    assert main([*base, "show", "d.t.2013-01-01"]) == 1

    store.client.set(store.keys.result("bad"), b"not json")
    assert main([*base, "show", "bad"]) == 2  # the corrupt entry is quarantined, with a clear error
    assert "quarantine" in capsys.readouterr().err
    assert main([*base, "quarantined"]) == 0
    assert capsys.readouterr().out.split() == ["bad"]
    assert main([*base, "release-quarantine", "bad"]) == 0
    assert "not json" in capsys.readouterr().out
    assert store.get_quarantined() == []


def test_cli_errors_name_the_problem(redis_url, namespace, capsys):
    assert main(["--redis-url", redis_url, "--namespace", namespace, "forget", "nope"]) == 2
    err = capsys.readouterr().err
    assert "nope" in err and "no result" in err
