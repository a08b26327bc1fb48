"""The guarded tasks' XCom payloads in Airflow's metadata DB: the rows :mod:`airflow_jrs.views.stats`
counts for ``GET /jrs/api/stats`` (the dashboard, ``airflow-jrs stats``) and the calendar's figures.

Which tasks are guarded comes from the latest serialized DAG (:func:`~airflow_jrs.actions.planning.dags.find_dag`,
deserialized once per version; the API server runs no DAG code, docs/architecture.md invariant 9):
every task :func:`~airflow_jrs.actions.planning.serialized.plan_tasks` names, planned or not. Three
queries at most, none per task: the DAGs with a payload key in the window, then the rows of the
readable DAGs' guarded tasks, deserialized as Airflow's own XCom reads do.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from airflow_jrs.actions import ActionError
from airflow_jrs.actions.planning.dags import find_dag
from airflow_jrs.actions.planning.serialized import plan_tasks
from airflow_jrs.views.stats import PAYLOAD_KEYS, PayloadRow

log = logging.getLogger("airflow_jrs.plugins.api")


def guarded_task_ids(dag: Any) -> set[str]:
    """Every guarded task of serialized ``dag``: planned, expanded only at run time, or not plannable."""
    tasks, run_time, unplannable = plan_tasks(dag)
    return {t.task_id for t in tasks} | set(run_time) | {u.task_id for u in unplannable}


def payload_rows(
    readable: Callable[[str], bool],
    *,
    dag_id: str | None = None,
    since: datetime | None = None,
    logical_dates: tuple[datetime, datetime] | None = None,
) -> tuple[list[PayloadRow], list[str]]:
    """The payload rows of guarded tasks of the DAGs ``readable`` allows (only ``dag_id``, when
    given) pushed at or after ``since`` and of runs whose logical date is in ``logical_dates``;
    and notes on DAGs left out."""
    from airflow.models.dagrun import DagRun
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    def window(stmt: Any) -> Any:
        stmt = stmt.where(XComModel.key.in_(PAYLOAD_KEYS))
        if since is not None:
            stmt = stmt.where(XComModel.timestamp >= since)
        if logical_dates is not None:
            stmt = stmt.join(DagRun, DagRun.id == XComModel.dag_run_id).where(
                DagRun.logical_date >= logical_dates[0], DagRun.logical_date <= logical_dates[1]
            )
        return stmt

    notes: list[str] = []
    with create_session() as session:
        if dag_id is not None:
            candidates: Iterable[str] = [dag_id]
        else:
            candidates = session.scalars(window(select(XComModel.dag_id).distinct())).all()
        guarded: dict[str, set[str]] = {}
        for one in sorted(candidates):
            if not readable(one):
                continue
            try:
                tasks = guarded_task_ids(find_dag(one))
            except ActionError:  # deleted, or no longer parsed: nothing says which tasks were guarded
                notes.append(f"DAG {one!r} is not in Airflow's serialized DAGs any more: its tasks are not counted")
                continue
            if tasks:
                guarded[one] = tasks
        if not guarded:
            return [], notes
        task_ids = set().union(*guarded.values())
        stmt = window(
            select(
                XComModel.dag_id, XComModel.run_id, XComModel.task_id, XComModel.map_index, XComModel.key,
                XComModel.value, DagRun.logical_date,
            )
        ).where(XComModel.dag_id.in_(sorted(guarded)), XComModel.task_id.in_(sorted(task_ids)))  # fmt: skip
        if logical_dates is None:
            stmt = stmt.join(DagRun, DagRun.id == XComModel.dag_run_id)
        rows = [
            PayloadRow(r.dag_id, r.run_id, r.task_id, r.map_index, r.key, _value(XComModel, r), r.logical_date)
            for r in session.execute(stmt)
            if r.task_id in guarded[r.dag_id]
        ]
    return rows, notes


def _value(model: Any, row: Any) -> Any:
    try:
        return model.deserialize_value(row)
    except Exception:  # a value this Airflow cannot read: not a payload, so not counted
        log.debug("Job results stats: unreadable XCom of %s/%s/%s", row.dag_id, row.run_id, row.task_id)
        return None
