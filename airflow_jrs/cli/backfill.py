"""``backfill``: the plan table, and with ``--missing-only`` runs only for the dates where some job is not committed.

Creating runs asks first, as ``forget`` and ``recompute`` do (``--yes`` for scripts, ``--dry-run``
to only preview): a run of a date that is not committed launches Spark.

What the missing-only backfill reads, decides and creates is :mod:`airflow_jrs.actions.backfill`
(the Job results page's "Backfill missing dates" calls the same functions); this module parses
the flags, prints the plan table and the outcome, and waits when asked (``--wait``).
Airflow's API: ``--airflow-url`` or ``$AIRFLOW_JRS_API_URL``, with the credentials of
:class:`airflow_jrs.actions.airflow_api.AirflowApi` (it must create backfills or trigger runs).
"""

from __future__ import annotations

from typing import Any

from airflow_jrs.actions.airflow_api import AirflowApi, AirflowApiError
from airflow_jrs.actions.backfill import (
    BACKFILL,
    TERMINAL,
    DatePlan,
    MissingPlan,
    Started,
    how,
    plan_missing,
    start_missing,
    vehicle,
)
from airflow_jrs.actions.backfill_wait import POLL_SECONDS, wait
from airflow_jrs.actions.planning.dags import load_dag
from airflow_jrs.cli.common import NOT_FOUND, OK, UNREACHABLE, USAGE, CliError, Ctx, ask, plural, stamp

__all__ = ["POLL_SECONDS", "TERMINAL", "cmd_backfill"]


def cmd_backfill(ctx: Ctx) -> int:
    a = ctx.args
    if a.from_date > a.to_date:
        raise CliError("--from-date is after --to-date; swap them", USAGE)
    dag = load_dag(a.dag_id, a.dags_folder)
    missing = plan_missing(ctx.store, dag, a.from_date, a.to_date)
    plans, todo, mode = missing.plans, missing.todo, missing.how
    summary = missing.summary
    if not ctx.out.as_json:
        _print_plan(ctx, plans, summary, len(todo), mode)
    if not a.missing_only:
        return _explain(ctx, plans, summary, len(todo))
    if a.dry_run or not todo:
        if ctx.out.as_json:
            ctx.out.json(ctx.located(_doc(a, missing, mode, Started(mode or BACKFILL), dry_run=a.dry_run)))
        elif not todo:
            ctx.out.line("every date is committed: no backfill needed, nothing created")
        else:
            ctx.out.line(f"dry run: would create {vehicle(how(todo), len(missing.needed))}; nothing created")
        return OK
    api = AirflowApi.from_environment(a.airflow_url)
    # Runs cost Spark: ask as forget and recompute do (--yes for scripts; no terminal, no --yes: exit 2).
    ask(ctx, f"create {vehicle(how(todo), len(missing.needed))} of {a.dag_id}")
    started = Started(how(todo))
    say = None if ctx.out.as_json else ctx.out.line
    try:
        start_missing(api, missing, started, max_active_runs=a.max_active_runs, say=say)
        if a.wait:
            wait(api, a.dag_id, started, missing.needed)
    except AirflowApiError as exc:
        made = started.made()
        done = f"; created so far: {', '.join(made)}" if made else "; nothing created"
        raise CliError(f"{exc}{done}", UNREACHABLE if exc.unreachable else USAGE) from None
    if ctx.out.as_json:
        ctx.out.json(ctx.located(_doc(a, missing, started.how, started, dry_run=False)))
    else:
        last = "" if a.wait else " (they run on: see the DAG's grid or the Backfills page)"
        ctx.out.line(f"created {vehicle(started.how, len(missing.needed))}{last}")
    return OK


def _print_plan(ctx: Ctx, plans: list[DatePlan], summary: dict[str, int], n_ranges: int, mode: str | None) -> None:
    a = ctx.args
    ctx.out.header(ctx, f"Missing-only backfill plan for {a.dag_id}")
    rows = []
    for p in plans:
        why = "; ".join(f"{j}: {w}" for j, w in [*p.missing, *p.blocked])
        rows.append([stamp(p.logical_date), len(p.committed), len(p.missing), len(p.blocked),
                     "run" if p.needs_run else "no run", why])  # fmt: skip
    ctx.out.table(("logical date", "committed", "missing", "blocked", "backfill", "why"), rows)
    means = f": {vehicle(mode, summary['dates_to_run'])}" if mode else ""
    ctx.out.line(
        f"{plural(summary['dates'], 'date')}, {plural(summary['jobs'], 'job')}: "
        f"{plural(summary['dates_to_run'], 'date')} {'needs' if summary['dates_to_run'] == 1 else 'need'} a run "
        f"({plural(n_ranges, 'contiguous range')}){means}"
    )
    if any(p.blocked for p in plans):
        ctx.out.line("blocked jobs fail their task: fix them first (airflow-jrs quarantined, release-quarantine)")


def _explain(ctx: Ctx, plans: list[DatePlan], summary: dict[str, int], n_ranges: int) -> int:
    a = ctx.args
    tasks = summary["jobs"]
    mode = how([[]] * n_ranges)
    text = (
        f"without --missing-only nothing is created. `airflow backfill create --dag-id {a.dag_id} "
        f"--from-date {a.from_date.date()} --to-date {a.to_date.date()}` creates a run for each date (of "
        f"{summary['dates']}) that has none in Airflow's metadata DB (it looks at runs, not results): "
        f"every guarded task of those runs is scheduled and skips a committed job "
        f"({plural(tasks, 'guarded task')} at most). `airflow-jrs backfill --missing-only` asks the store and "
        f"creates runs for the {plural(summary['dates_to_run'], 'date')} where some job is not committed"
        + (f" ({vehicle(mode, summary['dates_to_run'])})" if n_ranges else "")
        + "; add --dry-run to see only this table"
    )
    if ctx.out.as_json:
        missing = MissingPlan(a.dag_id, plans, [])
        doc = _doc(a, missing, mode if n_ranges else None, Started(mode), dry_run=True)
        ctx.out.json(ctx.located({**doc, "summary": summary, "note": text}))
    else:
        ctx.out.line(text)
    return OK if summary["dates"] else NOT_FOUND


def _doc(a: Any, missing: MissingPlan, mode: str | None, started: Started, *, dry_run: bool) -> dict[str, Any]:
    """The ``--json`` answer. ``how``: ``backfill`` (one Airflow backfill, in ``backfills``),
    ``runs`` (runs with their logical dates, in ``runs``) or null (nothing to run)."""
    return {
        "dag_id": a.dag_id,
        "from_date": a.from_date.isoformat(),
        "to_date": a.to_date.isoformat(),
        "missing_only": a.missing_only,
        "dry_run": dry_run,
        "dates": [p.json() for p in missing.plans],
        "summary": missing.summary,
        "how": mode,
        "backfills": started.backfills,
        "runs": started.runs,
    }
