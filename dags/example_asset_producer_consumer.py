"""Example pair: a committed job result starts a consumer DAG through an Airflow Asset.

``example_asset_producer`` (trigger it by hand) computes a job once per day and commits it:
``JrsCleanupOperator(outlets=[DAILY_TOTALS])`` marks the result clean, and the Asset event
Airflow emits for that outlet carries the result in its ``extra`` (``job_id``, ``status``,
``outputs``, ``fingerprint``, ``application_id``). ``example_asset_consumer`` is scheduled on
the Asset and reads the outputs from the triggering event: it needs neither the store nor the
producer's task ids.

To stay runnable without Spark, the producer's "job" is a tiny Python task that writes a file
and records its result through the store, skipping the work when a SUCCEEDED result exists
(what ``JrsSparkSubmitOperator`` does for real Spark jobs). Parsing this file needs neither
Redis nor Spark: the store is only touched when the task runs.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Asset, task

from airflow_jrs.operators import JrsCleanupOperator

#: ``jrs://<namespace>/<name>``: the namespace of the jrs connection the DAGs run against.
DAILY_TOTALS = Asset("jrs://default/example_daily_totals")


@task
def compute_totals(**context: Any) -> dict[str, Any]:
    """Stand-in for a Spark job: compute once per day, record the result dirty, return it."""
    from airflow_jrs.hooks.jrs import JrsHook
    from airflow_jrs.store import JobResult, JobStatus, result_to_dict

    day = (context.get("logical_date") or context["dag_run"].run_after).date().isoformat()
    job_id = f"example_asset_producer.totals.{day}"
    hook = JrsHook()
    store = hook.get_store()
    entry = store.get_entry(job_id)
    if entry is not None and entry.result.status is JobStatus.SUCCEEDED:
        print(f"{job_id} already has a SUCCEEDED result; nothing to compute")
        return result_to_dict(entry.result)
    out = Path(hook.settings.output_root) / hook.namespace / job_id / "totals.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"day": day, "flights": 842}))
    result = JobResult(
        job_id=job_id,
        status=JobStatus.SUCCEEDED,
        outputs={"totals": str(out)},
        application_id="python-example",
        fingerprint="example-v1",
    )
    store.create_dirty_result(result, supersede=True)
    return result_to_dict(result)


with DAG(
    "example_asset_producer",
    schedule=None,
    start_date=datetime(2013, 1, 1, tzinfo=UTC),
    catchup=False,
    tags=["jrs", "example"],
) as producer:
    totals = compute_totals()
    JrsCleanupOperator(task_id="commit", jobs=[totals.operator], outlets=[DAILY_TOTALS])


@task
def report(triggering_asset_events: Any = None) -> list[dict[str, Any]]:
    """Print what the producer committed: read from the Asset event, not from the store."""
    seen = []
    for event in triggering_asset_events[DAILY_TOTALS]:
        extra = event.extra or {}
        print(f"job {extra.get('job_id')} ({extra.get('status')}): outputs {extra.get('outputs')}")
        seen.append(extra)
    return seen


with DAG(
    "example_asset_consumer",
    schedule=[DAILY_TOTALS],
    start_date=datetime(2013, 1, 1, tzinfo=UTC),
    catchup=False,
    tags=["jrs", "example"],
) as consumer:
    report()
