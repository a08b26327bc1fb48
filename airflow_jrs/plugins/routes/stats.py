"""Spark time spent and avoided, from the guarded tasks' XCom payloads in Airflow's metadata DB.

* ``GET /api/stats``: by DAG and in total, for the dashboard widget and ``airflow-jrs stats``
  (which prints this answer: the two cannot disagree);
* ``GET /api/dags/{dag_id}/stats``: by logical date, for the DAG's calendar (its own request,
  beside the calendar's, so the calendar's query path is unchanged).

The figures are :mod:`airflow_jrs.views.stats`; the rows :mod:`airflow_jrs.plugins.stats`. Only
DAGs the user may read are counted. Nothing here reads the job result store.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from airflow.api_fastapi.core_api.security import GetUserDep
from fastapi import APIRouter, Query

from airflow_jrs.plugins.routes.deps import day_range, parse_since
from airflow_jrs.plugins.security import Access
from airflow_jrs.plugins.stats import payload_rows
from airflow_jrs.views.stats import dates_json, default_since, stats_json

router = APIRouter()


@router.get("/api/stats")
def stats(
    user: GetUserDep,
    since: Annotated[str | None, Query(description="ISO-8601; tasks that handed on their result at or after")] = None,
    dag_id: Annotated[str | None, Query()] = None,
) -> dict[str, Any]:
    """Guarded tasks that computed, reused or adopted their job, and the Spark time spent and
    avoided, by DAG (the user may read) and in total; ``since`` defaults to midnight UTC 30 days ago."""
    access = Access(user)
    if dag_id:
        access.require("GET", dag_id)
    when = parse_since(since) or default_since(datetime.now(UTC))
    rows, notes = payload_rows(lambda d: access.allowed("GET", d), dag_id=dag_id or None, since=when)
    return stats_json(rows, since=when, dag_id=dag_id or None, notes=notes)


@router.get("/api/dags/{dag_id}/stats")
def dag_stats(user: GetUserDep, dag_id: str, start: str, end: str) -> dict[str, Any]:
    """The same figures for the DAG's runs of logical dates ``start`` to ``end`` (``YYYY-MM-DD``,
    inclusive), by logical date: the calendar's rows."""
    access = Access(user)
    access.require("GET", dag_id)
    first, last = day_range(start, end)
    rows, _ = payload_rows(lambda d: access.allowed("GET", d), dag_id=dag_id, logical_dates=(first, last))
    return dates_json(rows, dag_id=dag_id, start=first, end=last)
