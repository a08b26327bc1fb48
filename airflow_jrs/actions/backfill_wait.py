"""Waiting for the runs a missing-only backfill made (``airflow-jrs backfill --missing-only --wait``).

:func:`airflow_jrs.actions.backfill.start_missing` returns once the runs exist; this polls
Airflow's REST API every :data:`POLL_SECONDS` until each has ended. One backfill is waited for
through its runs' states or its ``completed_at``, whichever comes first: the backfill itself is
never completed from here (``PUT .../cancel`` would pause it, see the backfill module).
"""

from __future__ import annotations

import time
from typing import Any

from airflow_jrs.actions.airflow_api import AirflowApi
from airflow_jrs.actions.backfill import TERMINAL, DatePlan, Started, runs_by_date, timestamp_of

#: How often :func:`wait` looks at the runs while it waits for them.
POLL_SECONDS = 1.0


def wait(api: AirflowApi, dag_id: str, started: Started, needed: list[DatePlan]) -> None:
    """Return when every run :func:`~airflow_jrs.actions.backfill.start_missing` made has ended."""
    if started.backfills:
        _wait_backfill(api, dag_id, started.backfills[0], needed)
    else:
        _wait_runs(api, dag_id, started.runs, needed)


def _wait_runs(api: AirflowApi, dag_id: str, runs: list[dict[str, Any]], needed: list[DatePlan]) -> None:
    """Wait until every run of ``runs`` ended (each was queued when triggered or cleared)."""
    wanted = {r["run_id"] for r in runs}
    while True:
        states = {r["dag_run_id"]: r.get("state") for r in runs_by_date(api, dag_id, needed).values()}
        if all(states.get(run_id) in TERMINAL for run_id in wanted):
            return
        time.sleep(POLL_SECONDS)


def _wait_backfill(api: AirflowApi, dag_id: str, backfill: dict[str, Any], group: list[DatePlan]) -> None:
    """Wait until every run of ``group`` ended. The backfill is left for the scheduler to mark
    complete (within 30 s): completing it with ``PUT .../cancel`` would also pause it, and a
    run of a paused backfill that is cleared later (recompute, Clear) would stay queued forever."""
    wanted = {p.logical_date.timestamp() for p in group}
    start, end = group[0].logical_date, group[-1].logical_date
    while True:
        doc = api.backfill(int(backfill["id"]))
        if doc.get("completed_at"):
            return
        runs = api.dag_runs(dag_id, start, end)
        ended = {timestamp_of(r["logical_date"]) for r in runs if r.get("logical_date") and r.get("state") in TERMINAL}
        if wanted <= ended:
            return
        time.sleep(POLL_SECONDS)
