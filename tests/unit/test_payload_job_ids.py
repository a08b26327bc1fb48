"""The cleanup names its submit tasks' jobs without their XComs when their rule allows it.

A cleanup reads each job's entry from the store anyway; pulling the submit's payload only told
it the job id, at one Execution API call per task. It now computes the id with the submit's own
rule (``job_id_for``) when that rule renders the same in any task of the run, and pulls it
otherwise. Real operators, a real DAG; the trigger against real Redis.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk import DAG
from airflow.triggers.base import TaskSuccessEvent

from airflow_jrs.compat import AIRFLOW_V_3_3_PLUS, AIRFLOW_VERSION_TEXT
from airflow_jrs.domain.payload import derivable_job_id, tasks_job_ids
from airflow_jrs.operators import JrsCleanupOperator, JrsSparkSubmitOperator
from airflow_jrs.operators.start_in_triggerer import JrsStartInTriggererCleanupOperator
from airflow_jrs.store import JobResult, JobStatus, RedisJobResultStore
from airflow_jrs.triggers.start_in_triggerer import StartInTriggererCleanupTrigger, _GoToWorker

DAY = datetime(2013, 1, 1, tzinfo=UTC)


def submit(task_id: str = "ingest.submit", **kwargs: Any) -> JrsSparkSubmitOperator:
    return JrsSparkSubmitOperator(task_id=task_id, application="/apps/a.py", **kwargs)


@pytest.mark.parametrize(
    ("job_id", "expected"),
    [
        (None, (True, None)),  # the default rule
        ("daily.totals", (True, "daily.totals")),
        ("bench.ingest.{{ ds }}", (True, "bench.ingest.{{ ds }}")),
        ("x.{{ data_interval_start | ds }}.{{ dag_run.conf.get('v', 1) }}", None),  # run-level: derivable
        ("x.{{ ti.task_id }}.{{ ds }}", (False, None)),  # task-level: pulled
        ("x.{{ params.day }}", (False, None)),  # task params merge in: pulled
        ("x.{{ var.value.v }}", (False, None)),  # read at render time: pulled
        ("x.{{ ds ", (False, None)),  # not a template Jinja parses: pulled (the submit fails clearly)
    ],
)
def test_which_job_id_rules_a_cleanup_derives(job_id, expected):
    with DAG("d", schedule=None) as dag:
        task = submit(job_id=job_id)
    found = derivable_job_id(task, dag.get_template_env())
    assert found == (expected or (True, job_id))


def test_a_task_that_is_not_a_guarded_operator_is_pulled():
    from airflow.providers.standard.operators.empty import EmptyOperator

    assert derivable_job_id(EmptyOperator(task_id="e")) == (False, None)
    # a filter the environment does not know (Airflow's, outside a DAG): pulled, never guessed
    assert derivable_job_id(submit(job_id="x.{{ data_interval_start | ds }}")) == (False, None)


def context(**extra: Any) -> dict[str, Any]:
    ti = SimpleNamespace(dag_id="d", task_id="ingest.cleanup", map_index=-1, **extra)
    return {"ti": ti, "run_id": "scheduled__2013-01-01", "data_interval_start": DAY, "logical_date": DAY}


def test_derived_ids_are_the_submits_own_and_only_the_others_are_pulled():
    pulled: list[str] = []

    def pull(task_ids: str, key: str = "return_value") -> Any:  # what the XCom table holds
        pulled.append(task_ids)
        return {"job_id": "other.job.2013-01-01"}

    ids = tasks_job_ids(
        context(), pull, ["ingest.submit", "legacy", "ontime.submit"], {"ingest.submit": None, "ontime.submit": "o.1"}
    )
    assert ids == ["d.ingest.submit.2013-01-01", "other.job.2013-01-01", "o.1"]
    assert pulled == ["legacy"]


def test_a_mapped_cleanup_pulls():
    pulled: list[str] = []

    def pull(task_ids: str, key: str = "return_value") -> Any:
        pulled.append(task_ids)
        return {"job_id": "d.ingest.submit.2013-01-01.map-2"}

    ctx = context()
    ctx["ti"].map_index = 2
    assert tasks_job_ids(ctx, pull, ["ingest.submit"], {"ingest.submit": None}) == ["d.ingest.submit.2013-01-01.map-2"]
    assert pulled == ["ingest.submit"]


def test_the_cleanup_operator_records_the_rules_and_pushes_no_xcom_by_default():
    with DAG("d", schedule=None):
        a = submit("a", job_id="j.{{ ds }}")
        b = submit("b", job_id="j.{{ ti.task_id }}")
        c = submit("c")
        cleanup = JrsCleanupOperator(task_id="cleanup", jobs=[a, b, c, "named.job"])
        kept = JrsCleanupOperator(task_id="kept", jobs=[a], do_xcom_push=True)
    assert cleanup.job_tasks == ["a", "b", "c"]
    assert cleanup.submit_job_ids == {"a": "j.{{ ds }}", "c": None}
    assert cleanup.do_xcom_push is False and kept.do_xcom_push is True


def trigger_for(op: Any, pulls: list[str]) -> StartInTriggererCleanupTrigger:
    """The trigger as the triggerer builds it: from the operator's start_trigger_args, its task
    instance set (which selects the template fields to render), then rendered in the run's context."""
    args = op.start_trigger_args
    trigger = StartInTriggererCleanupTrigger(**args.trigger_kwargs)

    def xcom_pull(*a: Any, **kw: Any) -> Any:
        pulls.append(kw.get("task_ids"))
        return None

    ti = SimpleNamespace(
        task=op, dag_id=op.dag_id, task_id=op.task_id, run_id="scheduled__2013-01-01", map_index=-1, xcom_pull=xcom_pull
    )
    trigger.task_instance = ti
    trigger.render_template_fields({**context(), "ti": ti, "ds": "2013-01-01"})
    return trigger


@pytest.mark.skipif(
    not AIRFLOW_V_3_3_PLUS, reason=f"the trigger renders templates from Airflow 3.3 (this is {AIRFLOW_VERSION_TEXT})"
)
@pytest.mark.parametrize("clean", [True, False])
def test_the_cleanup_trigger_reads_no_xcom_for_derived_ids(redis_url, namespace, monkeypatch, clean):
    monkeypatch.setenv("AIRFLOW_CONN_JRS_DEFAULT", f"{redis_url}?namespace={namespace}")
    with DAG("d", schedule=None, start_date=DAY):
        a = submit("ingest.submit", job_id="xf.ingest.{{ ds }}")
        b = submit("ontime.submit")
        op = JrsStartInTriggererCleanupOperator(task_id="cleanup", jobs=[a, b])
    store = RedisJobResultStore(redis_url, namespace)
    for job in ("xf.ingest.2013-01-01", "d.ontime.submit.2013-01-01"):
        store.create_dirty_result(JobResult(job_id=job, status=JobStatus.SUCCEEDED))
        if clean:
            store.mark_result_as_clean(job)
    pulls: list[str] = []
    trigger = trigger_for(op, pulls)

    async def decide() -> Any:
        try:
            return await trigger._decide()
        except _GoToWorker as exc:
            return str(exc)
        finally:
            await trigger._close()

    outcome = asyncio.run(decide())
    if clean:  # ends in the triggerer; no XCom pushed (do_xcom_push is off), none read
        assert isinstance(outcome, TaskSuccessEvent)
    else:
        assert outcome == "job xf.ingest.2013-01-01 needs cleanup (dirty)"
    assert pulls == []
    store.client.close()
