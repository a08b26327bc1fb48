"""A task started in the triggerer honours the run's ``jrs_recompute`` conf: it hands the task to a
worker (which recomputes) instead of ending it with the stored result, unless the request is met
already (the result is newer than the request: a request acts once). Real Redis."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from airflow_jrs.domain.identity import application_fingerprint
from airflow_jrs.store import Attempt, JobResult, JobStatus, RedisJobResultStore
from airflow_jrs.store.redis.leases import RedisJobLease
from airflow_jrs.store.redis.recompute_requests import RedisRecomputeRequests
from airflow_jrs.triggers.start_in_triggerer import StartInTriggererSubmitTrigger, _GoToWorker

JOB = "d.t.2013-01-01"


@pytest.mark.parametrize(
    ("conf", "reason"),
    [
        ({"jrs_recompute": True}, "the run's conf asks to recompute it (the request acts once, now)"),
        ({"jrs_recompute": ["t"]}, "the run's conf asks to recompute it (the request acts once, now)"),
        ({"jrs_recompute": True, "jrs_recompute_at": "2999-01-01T00:00:00Z"}, "before the request of 2999-01-01"),
        ({"jrs_recompute": 3}, "must be true/false or a list of task ids or job ids"),
        ({"jrs_recompute": True, "jrs_recompute_at": "soon"}, "must be an ISO-8601 time"),
        # the run's request met the job before this result was created: met, so the task ends
        # here with the stored result (it gets as far as writing the XCom: no task instance here)
        ({"jrs_recompute": True, "met": True}, "no task instance in the triggerer to write the XCom"),
        ({"jrs_recompute": True, "jrs_recompute_at": "2000-01-01T00:00:00Z"}, "to write the XCom"),
    ],
)
def test_a_due_request_sends_a_done_job_to_a_worker_a_met_one_does_not(
    redis_url, namespace, monkeypatch, tmp_path, conf, reason
):
    monkeypatch.setenv("AIRFLOW_CONN_JRS_DEFAULT", f"{redis_url}?namespace={namespace}")
    if conf.pop("met", False):
        RedisRecomputeRequests(RedisJobResultStore(redis_url, namespace).client, namespace).first_seen(
            JOB, "manual__now"
        )
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


def test_a_result_fenced_after_the_request_ends_the_task_in_the_triggerer_whatever_the_writers_clock(
    redis_url, namespace, monkeypatch, tmp_path
):
    """Finding 7: the run's task met its request (recorded), then a lease taken after it computed
    the job. The clock that stamped the request ran a day ahead of the one that stamped the
    result (an older version stamped the worker's clock; today a failover to a server whose
    clock is behind does the same). The request is met: the triggerer must not send the task to
    a worker to recompute it a second time."""
    monkeypatch.setenv("AIRFLOW_CONN_JRS_DEFAULT", f"{redis_url}?namespace={namespace}")
    store = RedisJobResultStore(redis_url, namespace)
    RedisRecomputeRequests(store.client, namespace).first_seen(JOB, "manual__now")
    key = store.keys.recompute_requests(JOB)
    mark = json.loads(store.client.hget(key, "manual__now"))
    store.client.hset(key, "manual__now", json.dumps({**mark, "at_ms": mark["at_ms"] + 24 * 3600 * 1000}))
    app = tmp_path / "app.py"
    app.write_text("print('hi')\n")
    lease = RedisJobLease(store.client, namespace, JOB)
    lease.acquire()
    store.create_dirty_result(
        JobResult(job_id=JOB, status=JobStatus.SUCCEEDED, fingerprint=application_fingerprint(str(app), [], None)),
        fence=lease.token,
    )
    lease.release()
    trigger = StartInTriggererSubmitTrigger(job_id=JOB, application=str(app), application_args=[])
    trigger._context = {
        "ti": SimpleNamespace(task_id="t"),
        "run_id": "manual__now",
        "dag_run": SimpleNamespace(conf={"jrs_recompute": True}),
    }

    async def decide() -> str:
        try:
            await trigger._decide()
        except _GoToWorker as exc:
            return str(exc)
        finally:
            await trigger._close()
        return "decided in the triggerer"

    assert "to write the XCom" in asyncio.run(decide())
    store.client.close()
