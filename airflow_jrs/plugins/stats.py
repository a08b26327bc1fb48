"""The guarded tasks' XCom payloads in Airflow's metadata DB: the rows :mod:`airflow_jrs.views.stats`
counts for ``GET /jrs/api/stats`` (the dashboard, ``airflow-jrs stats``) and the calendar's figures.

Which tasks are guarded comes from the latest serialized DAG (the API server runs no DAG code,
docs/architecture.md invariant 9): every task :func:`~airflow_jrs.actions.planning.serialized.plan_tasks`
names, planned or not, kept per DAG version and content (:data:`_GUARDED`), so the dashboard
deserializes a DAG only when a new version of it appears, however many DAGs it counts. Three
queries, none per DAG or task: the DAGs with a payload key in the window, their latest versions,
then the rows of the readable DAGs' guarded tasks, deserialized as Airflow's own XCom reads do.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from airflow_jrs.actions.planning.dags import version_dag
from airflow_jrs.actions.planning.serialized import plan_tasks
from airflow_jrs.views.stats import PAYLOAD_KEYS, PayloadRow

log = logging.getLogger("airflow_jrs.plugins.api")

#: Guarded task ids by (DAG version id, content hash): Airflow rewrites a version in place until a
#: task ran with it, so the id alone could keep a stale answer. Small entries; the oldest leaves first.
_GUARDED: dict[tuple[str, str], frozenset[str]] = {}
_KEPT = 4096


def guarded_task_ids(dag: Any) -> set[str]:
    """Every guarded task of serialized ``dag``: planned, expanded only at run time, or not plannable."""
    tasks, run_time, unplannable = plan_tasks(dag)
    return {t.task_id for t in tasks} | set(run_time) | {u.task_id for u in unplannable}


def latest_guarded(session: Any, dag_ids: Iterable[str]) -> dict[str, frozenset[str]]:
    """The guarded task ids of each DAG's latest serialized version (the highest version number,
    as Airflow picks it); a DAG Airflow no longer has is left out."""
    from airflow.models.dag_version import DagVersion
    from airflow.models.serialized_dag import SerializedDagModel
    from sqlalchemy import select

    model = SerializedDagModel
    found = session.execute(
        select(model.dag_id, model.dag_version_id, model.dag_hash, DagVersion.version_number)
        .join(DagVersion, model.dag_version_id == DagVersion.id)
        .where(model.dag_id.in_(sorted(set(dag_ids))))
    ).all()
    latest: dict[str, Any] = {}
    for row in found:
        if row.dag_id not in latest or row.version_number > latest[row.dag_id].version_number:
            latest[row.dag_id] = row
    out: dict[str, frozenset[str]] = {}
    for dag_id, row in latest.items():
        key = (str(row.dag_version_id), row.dag_hash)
        tasks = _GUARDED.get(key)
        if tasks is None:
            dag = version_dag(row.dag_version_id)  # the column's own type (a UUID), not its text
            if dag is None:  # pruned between the two reads
                continue
            tasks = frozenset(guarded_task_ids(dag))
            if len(_GUARDED) >= _KEPT:
                _GUARDED.pop(next(iter(_GUARDED)), None)
            _GUARDED[key] = tasks
        out[dag_id] = tasks
    return out


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
        asked = [one for one in sorted(candidates) if readable(one)]
        known = latest_guarded(session, asked) if asked else {}
        # deleted, or no longer parsed: nothing says which of its tasks were guarded
        notes += [f"DAG {one!r} is not in Airflow's serialized DAGs any more: its tasks are not counted"
                  for one in asked if one not in known]  # fmt: skip
        guarded = {one: tasks for one, tasks in known.items() if tasks}
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
