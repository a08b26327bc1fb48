"""Asset integration through Airflow: committing a result emits an Asset event carrying its outputs.

Runs the example pair in ``dags/example_asset_producer_consumer.py`` (no Spark) against real
Redis and reads what Airflow recorded: the AssetEvent rows and the consumer's queued run.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.airflow

EXAMPLE = Path(__file__).parents[2] / "dags" / "example_asset_producer_consumer.py"
DATE = datetime(2013, 1, 1, tzinfo=UTC)
JOB = "example_asset_producer.totals.2013-01-01"
_counter = itertools.count()


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location(f"example_asset_{next(_counter)}", EXAMPLE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def asset_events(run_id: str) -> list[Any]:
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.scalars(select(AssetEvent).where(AssetEvent.source_run_id == run_id)).all()
        session.expunge_all()
        return list(rows)


def set_paused(dag_id: str, paused: bool) -> None:
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session

    with create_session() as session:
        session.get(DagModel, dag_id).is_paused = paused


def queued_runs(dag_id: str, *, clear: bool = False) -> int:
    """Asset-triggered runs waiting for the scheduler (one row per asset and DAG)."""
    from airflow.models.asset import AssetDagRunQueue
    from airflow.utils.session import create_session
    from sqlalchemy import delete, func, select

    with create_session() as session:
        if clear:  # an AIRFLOW_HOME reused from an earlier session may hold one
            session.execute(delete(AssetDagRunQueue).where(AssetDagRunQueue.target_dag_id == dag_id))
        return session.scalar(
            select(func.count()).select_from(AssetDagRunQueue).where(AssetDagRunQueue.target_dag_id == dag_id)
        )


def test_commit_emits_an_asset_event_with_the_outputs_and_queues_the_consumer(jrs_env):
    example = load_example()
    dr = example.producer.test(logical_date=DATE)
    states = {ti.task_id: str(ti.state) for ti in dr.get_task_instances()}
    assert states == {"compute_totals": "success", "commit": "success"}
    entry = jrs_env.store.get_entry(JOB)
    assert entry is not None and entry.is_clean

    [event] = asset_events(dr.run_id)
    assert event.source_task_id == "commit"
    extra = event.extra
    assert extra["job_id"] == JOB and extra["status"] == "SUCCEEDED"
    assert extra["outputs"] == entry.result.outputs
    assert json.loads(Path(extra["outputs"]["totals"]).read_text())["day"] == "2013-01-01"
    assert extra["fingerprint"] == "example-v1" and extra["application_id"] == "python-example"
    assert extra["jobs"] == [{k: extra[k] for k in ("job_id", "status", "outputs", "fingerprint", "application_id")}]

    # The consumer DAG (now known to Airflow) starts on the next event: run the producer again.
    # The job is done and clean, so nothing is recomputed, yet the event still says where the data is.
    set_paused("example_asset_consumer", False)
    try:
        assert queued_runs("example_asset_consumer", clear=True) == 0
        dr2 = example.producer.test(logical_date=DATE)
        [again] = asset_events(dr2.run_id)
        assert again.extra["outputs"] == extra["outputs"]
        assert queued_runs("example_asset_consumer") == 1
    finally:
        set_paused("example_asset_consumer", True)
    assert jrs_env.store.get_history(JOB) == []  # computed once

    # What the consumer prints comes from the event alone.
    # (looked up by URI, as Airflow's accessor does: Airflow 3.1's Asset cannot be a dict key,
    # its __hash__ hashes a dict of its fields)
    class EventsByAsset:
        def __getitem__(self, asset: Any) -> list[Any]:
            assert asset.uri == example.DAILY_TOTALS.uri, asset
            return [again]

    seen = example.report.function(triggering_asset_events=EventsByAsset())
    assert seen[0]["outputs"] == extra["outputs"]
