"""A task started in the triggerer honours the run's ``jrs_recompute`` conf: it hands the task to a
worker (which recomputes) instead of ending it with the stored result. Real Redis."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from airflow_jrs.identity import application_fingerprint
from airflow_jrs.store import Attempt, JobResult, JobStatus, RedisJobResultStore
from airflow_jrs.triggers.start_in_triggerer import StartInTriggererSubmitTrigger, _GoToWorker

JOB = "d.t.2013-01-01"


@pytest.mark.parametrize(
    ("conf", "reason"),
    [
        ({"jrs_recompute": True}, "the DAG run's conf asks to recompute it"),
        ({"jrs_recompute": ["t"]}, "the DAG run's conf asks to recompute it"),
        ({"jrs_recompute": 3}, "must be true/false or a list of task ids or job ids"),
    ],
)
def test_a_recompute_conf_sends_a_done_job_to_a_worker(redis_url, namespace, monkeypatch, tmp_path, conf, reason):
    monkeypatch.setenv("AIRFLOW_CONN_JRS_DEFAULT", f"{redis_url}?namespace={namespace}")
    app = tmp_path / "app.py"
    app.write_text("print('hi')\n")
    store = RedisJobResultStore(redis_url, namespace)
    fp = application_fingerprint(str(app), ["--x"], None)
    store.create_dirty_result(
        JobResult(job_id=JOB, status=JobStatus.SUCCEEDED, fingerprint=fp, attempt=Attempt("d", "t", "earlier", 1))
    )
    trigger = StartInTriggererSubmitTrigger(job_id=JOB, application=str(app), application_args=["--x"])
    trigger._context = {
        "ti": SimpleNamespace(task_id="t"),
        "run_id": "manual__now",
        "dag_run": SimpleNamespace(conf=conf),
    }

    async def decide() -> str:
        try:
            await trigger._decide()
        except _GoToWorker as exc:
            return str(exc)
        finally:
            await trigger._close()
        return "decided in the triggerer"

    assert reason in asyncio.run(decide())
    store.client.close()
