"""Commands that change the store: mark-clean, forget, purge, release-quarantine, stop, cancel.

Each destructive verb first shows what it will change, then asks (``--yes`` answers for a
script; without a terminal and without ``--yes`` it refuses), and ``--dry-run`` stops after
the preview. A forgotten or purged result makes its job run again on the next attempt: that
is the point of these verbs, and the reason they never act silently. The writes themselves,
with their guards, are :mod:`airflow_jrs.actions.writes` (the Job results page calls them too).
"""

from __future__ import annotations

from datetime import timedelta

from airflow_jrs.actions import writes
from airflow_jrs.actions.planning.dags import load_dag
from airflow_jrs.actions.planning.jobs import plan_range
from airflow_jrs.cli.common import (
    ENTRY_COLUMNS,
    NOT_FOUND,
    OK,
    USAGE,
    CliError,
    Ctx,
    ask,
    entry_row,
    plural,
    progress,
)
from airflow_jrs.domain.model import EntryQuery, utcnow
from airflow_jrs.exceptions import JobResultEntryError
from airflow_jrs.store import Actor, EntryState, JobResultEntry
from airflow_jrs.views.json import entry_json


def _dry_run(ctx: Ctx, doc: dict[str, object]) -> int:
    if ctx.out.as_json:
        ctx.out.json(ctx.located({**doc, "dry_run": True}))
    else:
        ctx.out.line("dry run: nothing changed")
    return OK


def cmd_mark_clean(ctx: Ctx) -> int:
    job_id = ctx.args.job_id
    entry = ctx.store.get_entry(job_id)
    if entry is None:
        raise CliError(f"job {job_id!r} has no result in {ctx.where()}; nothing to mark clean", NOT_FOUND)
    if entry.is_clean:
        ctx.out.line(f"job {job_id} is already clean in {ctx.where()}; nothing to do")
        return OK
    if not ctx.out.as_json:
        ctx.out.header(ctx, "Will mark clean, without running its cleanup (staging data and spec stay)")
        ctx.out.table(ENTRY_COLUMNS, [entry_row(entry)])
    if ctx.args.dry_run:
        return _dry_run(ctx, {"mark_clean": [job_id]})
    ask(ctx, f"mark job {job_id} clean without its cleanup")
    writes.mark_clean(ctx.store, job_id, ctx.where())
    if ctx.out.as_json:
        ctx.out.json(ctx.located({"marked_clean": [job_id]}))
    else:
        ctx.out.line(f"marked {job_id} clean; its cleanup will not run (remove its staging data by hand if needed)")
    return OK


def _forget_targets(ctx: Ctx) -> tuple[list[JobResultEntry], list[str]]:
    """Entries to forget and, for the preview, job ids that have nothing to forget (and why)."""
    a = ctx.args
    if a.job_ids:
        entries, skipped = [], []
        for job_id in a.job_ids:
            try:
                entry = ctx.store.get_entry(job_id)
            except JobResultEntryError as exc:
                skipped.append(f"{job_id}: {exc}")
                continue
            if entry is None:
                skipped.append(f"{job_id}: no result")
            else:
                entries.append(entry)
        return entries, skipped
    dag = load_dag(a.dag_id, a.dags_folder)
    planned, _notes = plan_range(ctx.jobs, dag, a.from_date, a.to_date)
    found = [p.entry for p in planned if p.entry is not None]
    return found, [f"{p.job_id}: {p.status}" for p in planned if p.entry is None]


def cmd_forget(ctx: Ctx) -> int:
    a = ctx.args
    if bool(a.job_ids) == bool(a.dag_id):
        raise CliError("give JOB_IDs, or --dag-id with --from-date and --to-date (not both)", USAGE)
    if a.dag_id and (a.from_date is None or a.to_date is None):
        raise CliError("--dag-id needs --from-date and --to-date, e.g. --from-date 2013-01-01 --to-date 2013-01-31")
    entries, skipped = _forget_targets(ctx)
    if not entries:
        detail = "; ".join(skipped[:5]) + (" ..." if len(skipped) > 5 else "")
        raise CliError(f"nothing to forget in {ctx.where()} ({detail})", NOT_FOUND)
    if not ctx.out.as_json:
        ctx.out.header(ctx, f"Will forget {plural(len(entries), 'result')} (kept in history; these jobs run again)")
        ctx.out.table(ENTRY_COLUMNS, [entry_row(e) for e in entries])
        for line in skipped:
            ctx.out.line(f"skipped {line}")
    if a.dry_run:
        return _dry_run(ctx, {"forget": [entry_json(e) for e in entries], "skipped": skipped})
    ask(ctx, f"forget {plural(len(entries), 'result')} so their jobs run again")
    shown = len(skipped)
    with progress(ctx, "forgetting", None):
        forgotten, missed = writes.forget_entries(ctx.store, entries, Actor.cli())
    skipped.extend(missed)
    if ctx.out.as_json:
        ctx.out.json(ctx.located({"forgotten": forgotten, "skipped": skipped}))
    else:
        for job_id in forgotten:
            ctx.out.line(f"forgot {job_id} (kept in its history); the next run of the job computes it again")
        for line in skipped[shown:]:
            ctx.out.line(f"skipped {line}")
    return OK


def cmd_purge(ctx: Ctx) -> int:
    days = ctx.args.older_than_days
    age = f"{days:g} day{'' if days == 1 else 's'}"
    cutoff = utcnow() - timedelta(days=days)
    with progress(ctx, "finding clean results to purge", None):
        old = ctx.store.find_entries(EntryQuery(state=EntryState.CLEAN, before=cutoff), limit=10_000_000)
    if not old:
        if ctx.out.as_json:  # one JSON document on stdout, nothing else
            ctx.out.json(ctx.located({"purge": [], "purged": 0}))
        else:
            ctx.out.line(f"no clean results older than {age} in {ctx.where()}; nothing to purge")
        return OK
    if not ctx.out.as_json:
        ctx.out.header(ctx, f"Will delete {plural(len(old), 'clean result')} older than {age} (no history kept)")
        ctx.out.table(ENTRY_COLUMNS, [entry_row(e) for e in old[:20]])
        if len(old) > 20:
            ctx.out.line(f"... and {len(old) - 20} more; a backfill over these dates would recompute them")
    if ctx.args.dry_run:
        return _dry_run(ctx, {"purge": [e.job_id for e in old]})
    ask(ctx, f"delete {plural(len(old), 'clean result')} older than {age}")
    with progress(ctx, f"purging {plural(len(old), 'clean result')}", None):
        purged = writes.purge_clean(ctx.store, timedelta(days=days))
    if ctx.out.as_json:
        ctx.out.json(ctx.located({"purged": purged}))
    else:
        ctx.out.line(f"purged {plural(purged, 'clean result')} older than {age} (dirty ones are kept)")
    return OK


def cmd_release_quarantine(ctx: Ctx) -> int:
    job_id = ctx.args.job_id
    if job_id not in ctx.store.get_quarantined():
        raise CliError(f"job {job_id!r} has nothing in quarantine in {ctx.where()}", NOT_FOUND)
    if not ctx.out.as_json:
        ctx.out.line(
            f"will drop the quarantined entry of {job_id} (its bytes go to its history); the job may run again"
        )
    if ctx.args.dry_run:
        return _dry_run(ctx, {"release": [job_id]})
    ask(ctx, f"release job {job_id} from quarantine")
    text = writes.release_quarantine(ctx.store, job_id, Actor.cli(), ctx.where())
    if ctx.out.as_json:
        ctx.out.json(ctx.located({"released": job_id, "bytes": text}))
    else:
        print(f"released {job_id}; its quarantined bytes (kept in history):")
        print(text)
    return OK


def cmd_stream(ctx: Ctx) -> int:
    from airflow_jrs.protocol.stream_requests import NoRunningStreamError

    kind, job_id = ctx.args.command, ctx.args.job_id
    try:
        doc = writes.stream(ctx.jobs, job_id, kind)
    except NoRunningStreamError as exc:  # nothing running to stop: "not found" (exit 1), in plain words
        raise CliError(str(exc), NOT_FOUND) from None
    if ctx.out.as_json:
        ctx.out.json(ctx.located(doc))
    else:
        ctx.out.line(f"{kind} requested for {job_id} (fence {doc['fence']}) in {doc['control']}")
    return OK
