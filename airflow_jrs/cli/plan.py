"""``plan``: what a backfill would compute, before anyone starts it.

The planning itself is :mod:`airflow_jrs.actions.planning` (the missing-only backfill, recompute
by dates and the page's calendar read the same plan): this module parses the command's flags and
prints the plan, a table or ``--json``. Its refusals are :class:`airflow_jrs.actions.ActionError`,
which the CLI turns into an exit code like any action's.

``load_dag``, ``PlannedJob``, ``job_ids``, ``existing_runs`` and friends are still importable from
here, as they were before the planning moved below the CLI.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow_jrs.actions.planning.dags import load_dag
from airflow_jrs.actions.planning.job_ids import GUARDED_OPERATORS, RENDERABLE, guarded_tasks, job_ids
from airflow_jrs.actions.planning.jobs import PlannedJob, plan_range
from airflow_jrs.actions.planning.runs import ExistingRun, existing_runs
from airflow_jrs.cli.common import OK, USAGE, CliError, Ctx, stamp

__all__ = [
    "GUARDED_OPERATORS",
    "RENDERABLE",
    "ExistingRun",
    "PlannedJob",
    "cmd_plan",
    "existing_runs",
    "guarded_tasks",
    "job_ids",
    "load_dag",
    "plan_jobs",
]


def plan_jobs(ctx: Ctx, dag: Any, start: datetime, end: datetime) -> tuple[list[PlannedJob], list[str]]:
    """:func:`~airflow_jrs.actions.planning.jobs.plan_range` in the command's namespace."""
    return plan_range(ctx.jobs, dag, start, end)


def cmd_plan(ctx: Ctx) -> int:
    a = ctx.args
    if a.from_date > a.to_date:
        raise CliError("--from-date is after --to-date; swap them", USAGE)
    dag = load_dag(a.dag_id, a.dags_folder)
    planned, notes = plan_jobs(ctx, dag, a.from_date, a.to_date)
    counts = {k: sum(p.backfill == k for p in planned) for k in ("run", "skip", "blocked")}
    if ctx.out.as_json:
        rows = [
            {
                "logical_date": p.logical_date.isoformat() if p.logical_date else None,
                "task_id": p.task_id,
                "job_id": p.job_id,
                "status": p.status,
                "result_status": p.result_status,
                "backfill": p.backfill,
                "reason": p.reason,
            }
            for p in planned
        ]
        doc = {"dag_id": a.dag_id, "from_date": a.from_date.isoformat(), "to_date": a.to_date.isoformat()}
        ctx.out.json(
            ctx.located({**doc, "reprocess_behavior": "completed", "jobs": rows, "summary": counts, "notes": notes})
        )
        return OK
    ctx.out.header(ctx, f"Backfill plan for {a.dag_id} --reprocess-behavior completed (nothing runs)")
    rows2 = [[stamp(p.logical_date), p.task_id, p.job_id, p.status, p.backfill, p.reason] for p in planned]
    ctx.out.table(("logical date", "task", "job id", "now", "backfill", "why"), rows2)
    ctx.out.line(
        f"a backfill would run Spark for {counts['run']} jobs, skip {counts['skip']}, "
        f"and find {counts['blocked']} blocked"
    )
    for note in notes:
        ctx.out.line(f"note: {note}")
    return OK
