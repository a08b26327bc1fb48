"""``recompute``: compute given jobs or dates again, now, through Airflow.

What it does is :mod:`airflow_jrs.actions.recompute` (the Job results page's Recompute calls the
same functions): forget each result (kept in history, naming who), then clear its task
instance through Airflow's REST API, downstream jobs included in the preview. This module parses
the flags, prints the preview and asks, then prints what was done.
"""

from __future__ import annotations

from airflow_jrs.actions.airflow_api import AirflowApi, AirflowApiError
from airflow_jrs.actions.planning.dags import load_dag
from airflow_jrs.actions.recompute import Target, apply, by_dates, by_job_ids, clear, preview
from airflow_jrs.cli.common import NOT_FOUND, OK, UNREACHABLE, USAGE, CliError, Ctx, ask, plural, stamp
from airflow_jrs.domain.model import Actor

__all__ = ["Target", "clear", "cmd_recompute"]

COLUMNS = ("job id", "result now", "created (UTC)", "clears (run / task)")


def cmd_recompute(ctx: Ctx) -> int:
    a = ctx.args
    if bool(a.job_ids) == bool(a.dag_id):
        raise CliError("give JOB_IDs, or --dag-id with --from-date and --to-date (not both)", USAGE)
    if a.dag_id and (a.from_date is None or a.to_date is None):
        raise CliError("--dag-id needs --from-date and --to-date, e.g. --from-date 2013-01-01 --to-date 2013-01-31")
    if a.task and not a.dag_id:
        raise CliError("--task goes with --dag-id (a job id names its task already)", USAGE)
    api = AirflowApi.from_environment(a.airflow_url)
    targets: list[Target] = []
    try:
        if a.job_ids:
            targets = by_job_ids(ctx.store, a.job_ids, ctx.where())
        else:
            if a.from_date > a.to_date:
                raise CliError("--from-date is after --to-date; swap them", USAGE)
            dag = load_dag(a.dag_id, a.dags_folder)
            asks = None if a.dry_run and not api.has_credentials else api  # a preview without credentials: no run ids
            targets = by_dates(ctx.jobs, asks, dag, a.from_date, a.to_date, a.task)
        if not targets:
            raise CliError(f"no jobs to recompute in {ctx.where()}", NOT_FOUND)
        notes = preview(ctx.jobs, api, targets)
        downstream = sum(t.downstream for t in targets)
        if not ctx.out.as_json:
            more = f" (and {plural(downstream, 'job')} downstream of them, cleared with them)" if downstream else ""
            ctx.out.header(ctx, f"Will recompute {plural(len(targets) - downstream, 'job')}{more}: forget each "
                                f"result (kept in history), then clear its task instance through Airflow's API "
                                f"at {api.base_url}")  # fmt: skip
            rows = [
                [t.job_id, t.entry.state.value if t.entry else "no result",
                 stamp(t.entry.created_at if t.entry else None), "-" if t.left_alone else t.clears]
                for t in targets
            ]  # fmt: skip
            ctx.out.table(COLUMNS, rows)
            for t in targets:
                if t.note:
                    ctx.out.line(f"{t.job_id}: {t.note}")
            for note in notes:
                ctx.out.line(f"note: {note}")
        if a.dry_run:
            if ctx.out.as_json:
                doc = {"recompute": [t.json() for t in targets], "notes": notes, "dry_run": True}
                ctx.out.json(ctx.located(doc))
            else:
                ctx.out.line("dry run: nothing changed")
            return OK
        ask(ctx, f"recompute {plural(len(targets), 'job')} (forget the results asked for and clear their task "
                 "instances)")  # fmt: skip
        apply(ctx.store, api, targets, Actor.cli())
    except AirflowApiError as exc:
        forgotten = [t.job_id for t in targets if t.forgotten]
        done = (
            f"; the results of {forgotten} are forgotten (kept in history): their next runs compute them, or "
            "clear their task instances in the Airflow UI"
            if forgotten
            else "; nothing was changed"
        )
        code = UNREACHABLE if exc.unreachable else USAGE
        raise CliError(f"{exc}{done}", code) from None
    if ctx.out.as_json:
        ctx.out.json(ctx.located({"recompute": [t.json() for t in targets], "notes": notes}))
        return OK
    for t in targets:
        if t.downstream:
            done = "cleared with them by Airflow; it recomputes" if t.cleared else "not cleared"
            ctx.out.line(f"{t.job_id}: {done} ({t.note})")
        elif t.cleared:
            what = "forgot its result (kept in history), " if t.forgotten else ""
            ctx.out.line(f"{t.job_id}: {what}cleared {t.dag_id} run {t.run_id} task {t.task_id}; it runs again now")
        elif t.forgotten:
            ctx.out.line(f"{t.job_id}: forgot its result (kept in history); {t.note or 'its next run computes it'}")
        else:
            ctx.out.line(f"{t.job_id}: {t.note or 'nothing to do'}")
    return OK
