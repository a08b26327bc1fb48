"""Read commands: list, show, dirty, history, leases, intents, quarantined, stats.

They change nothing. Each answers as a table (``--json``: one JSON document) that names the
namespace and server read; an empty answer says where it looked, so "nothing here" is never
mistaken for "nothing anywhere".
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime
from typing import Any

from airflow_jrs.actions.airflow_api import AirflowApi, AirflowApiError
from airflow_jrs.cli.common import (
    ENTRY_COLUMNS,
    HISTORY_COLUMNS,
    NOT_FOUND,
    OK,
    UNREACHABLE,
    USAGE,
    CliError,
    Ctx,
    Output,
    documents_note,
    empty_namespace,
    empty_namespace_line,
    entry_row,
    history_row,
    stamp,
)
from airflow_jrs.domain.model import EntryQuery
from airflow_jrs.exceptions import CorruptIntentError
from airflow_jrs.protocol.takeover import describe
from airflow_jrs.store import EntryState, JobStatus
from airflow_jrs.store.heartbeats import Heartbeat
from airflow_jrs.views.holder import RUNNING
from airflow_jrs.views.job import JobView, held_leases, in_flight, inspect_job
from airflow_jrs.views.json import entry_json, held_lease_json, in_flight_json, job_json


def _entries(ctx: Ctx, what: str, entries: list[Any], doc: dict[str, Any], quarantined: list[str]) -> int:
    # Nothing at all in the namespace: a wrong --namespace, most likely (exit 1, naming the real ones).
    empty = empty_namespace(ctx) if not entries and not quarantined else None
    note = documents_note(ctx, entries)  # clean references and no folder: say it, as show does
    if ctx.out.as_json:
        listed = {**doc, "entries": [entry_json(e) for e in entries], "quarantined": quarantined, **(empty or {})}
        listed |= {"documents_needed": note} if note else {}
        ctx.out.json(ctx.located(listed))
        return NOT_FOUND if empty else OK
    if empty:
        ctx.out.line(f"no {what}: {empty_namespace_line(ctx, empty)}")
        return NOT_FOUND
    if not entries and not quarantined:
        ctx.out.line(f"no {what} in {ctx.where()}")
        return OK
    ctx.out.header(ctx, what.capitalize())
    rows = [entry_row(e) for e in entries] + [[j, "quarantined", "?", "", "", "blocked: see show"] for j in quarantined]
    ctx.out.table(ENTRY_COLUMNS, rows)
    if note:
        ctx.out.line(f"note: {note}")
    return OK


def cmd_list(ctx: Ctx) -> int:
    a = ctx.args
    state = None if a.state in (None, "quarantined") else EntryState(a.state)
    query = EntryQuery(
        state=state,
        status=JobStatus(a.status.upper()) if a.status else None,
        dag_id=a.dag_id,
        prefix=a.prefix,
        since=a.since,
    )
    entries = [] if a.state == "quarantined" else ctx.store.find_entries(query, limit=a.limit, offset=a.offset)
    quarantined: list[str] = []
    # Quarantined jobs have no readable entry to filter on: show them unless a filter needs one.
    if a.state in (None, "quarantined") and a.status is None and a.since is None and a.offset == 0:
        quarantined = [
            j
            for j in ctx.store.get_quarantined()
            if (a.prefix is None or j.startswith(a.prefix)) and (a.dag_id is None or j.startswith(a.dag_id + "."))
        ]
    filters = {k: getattr(a, k) for k in ("state", "status", "dag_id", "prefix", "since") if getattr(a, k)}
    doc = {"filters": filters, "limit": a.limit, "offset": a.offset}
    what = "results" + (" matching " + ", ".join(f"{k}={v}" for k, v in filters.items()) if filters else "")
    return _entries(ctx, what, entries, doc, quarantined)


def cmd_dirty(ctx: Ctx) -> int:
    entries = ctx.store.get_dirty_entries()
    return _entries(ctx, "dirty results (cleanup pending)", entries, {}, [])


def cmd_unsuccessful(ctx: Ctx) -> int:
    entries = ctx.store.get_unsuccessful_entries()
    return _entries(
        ctx, "unsuccessful results (FAILED, CANCELED, STOPPED: a later run supersedes them)", entries, {}, []
    )


def cmd_quarantined(ctx: Ctx) -> int:
    jobs = ctx.store.get_quarantined()
    if ctx.out.as_json:
        ctx.out.json(ctx.located({"quarantined": jobs}))
    elif not jobs:
        ctx.out.line(f"no quarantined jobs in {ctx.where()}")
    else:
        ctx.out.header(ctx, "Quarantined jobs (blocked until release-quarantine)")
        ctx.out.table(("job id",), [[j] for j in jobs])
    return OK


def cmd_history(ctx: Ctx) -> int:
    job_id = ctx.args.job_id
    history = ctx.store.get_history(job_id)
    if ctx.out.as_json:
        ctx.out.json(ctx.located({"job_id": job_id, "history": [entry_json(h) for h in history]}))
    elif not history:
        ctx.out.line(f"job {job_id!r} has no history in {ctx.where()}")
    else:
        ctx.out.header(ctx, f"History of {job_id} (newest first)")
        ctx.out.table(HISTORY_COLUMNS, [history_row(h) for h in history])
    return OK if history else NOT_FOUND


def cmd_leases(ctx: Ctx) -> int:
    held = held_leases(ctx.jobs)
    if ctx.out.as_json:
        ctx.out.json(ctx.located({"leases": [held_lease_json(h) for h in held]}))
    elif not held:
        ctx.out.line(f"no leases held in {ctx.where()}: no attempt is working on a job")
    else:
        ctx.out.header(ctx, "Held leases")
        rows = [[h.job_id, describe(h.holder), f"{h.holder.ttl_ms / 1000:.1f}s"] for h in held]
        ctx.out.table(("job id", "holder", "time left"), rows)
    return OK


def cmd_intents(ctx: Ctx) -> int:
    found = in_flight(ctx.jobs)
    if ctx.out.as_json:
        ctx.out.json(ctx.located({"intents": [in_flight_json(f) for f in found]}))
    elif not found:
        ctx.out.line(f"no intents in {ctx.where()}: no job is in flight or waiting for recovery")
    else:
        rows: list[list[Any]] = []
        for f in found:
            i = f.intent
            if isinstance(i, CorruptIntentError):
                rows.append([f.job_id, "?", "?", "?", f.verdict])
            else:
                started = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(i.started_at))
                rows.append([f.job_id, i.fence, f"{i.host} pid {i.pid}", started, f.verdict])
        ctx.out.header(ctx, "Intents (jobs in flight or needing recovery)")
        ctx.out.table(("job id", "fence", "attempt", "started (UTC)", "verdict"), rows)
    return OK


def cmd_show(ctx: Ctx) -> int:
    """One job, everything known about it (:func:`~airflow_jrs.views.job.inspect_job`). A corrupt,
    quarantined or newer entry raises (the caller prints the one-line error): every reader of
    the store answers the same for it."""
    view = inspect_job(ctx.jobs, ctx.args.job_id)
    if view.problem is not None:
        raise view.problem
    if ctx.out.as_json:
        ctx.out.json(ctx.located(dict(job_json(view))))
    else:
        _print_job(ctx, view)
    return OK if view.found else NOT_FOUND


def _print_job(ctx: Ctx, view: JobView) -> None:
    out, job_id, entry, history = ctx.out, view.job_id, view.entry, view.history
    out.header(ctx, f"Job {job_id}")
    if entry is not None:
        r = entry.result
        facts = [
            ("state", entry.state.value),
            ("status", r.status.value),
            ("fence", r.fence),
            ("created", stamp(entry.created_at)),
            ("application", r.application_id),
            ("fingerprint", r.fingerprint),
            ("outputs", ", ".join(f"{k}={v}" for k, v in r.outputs.items()) or None),
            ("metrics", ", ".join(f"{k}={v}" for k, v in r.metrics.items()) or None),
            ("error", r.error),
        ]
        if r.attempt:
            facts.append(("written by", f"{r.attempt.dag_id}/{r.attempt.task_id} {r.attempt.run_id}"))
        out.table(("field", "value"), [(k, v) for k, v in facts if v not in (None, "")])
    elif view.running:
        now = view.holder_state
        gone = now is not None and now.state != RUNNING
        out.line("no result yet: its task process is gone (below)" if gone else "no result yet: the job is running")
    elif history:
        out.line(f"no result now: it was forgotten or superseded; {len(history)} earlier entries are kept (below)")
    else:
        empty = empty_namespace(ctx)
        if empty:
            out.line(f"job {job_id!r} not found: {empty_namespace_line(ctx, empty)}")
        else:
            out.line(f"job {job_id!r} has no result, no history and no running attempt in {ctx.where()}")
    holder, intent, beat, request = view.holder, view.intent, view.heartbeat, view.stop_request
    if holder is not None:
        out.line(f"lease: held by {describe(holder)}, {holder.ttl_ms / 1000:.1f}s left")
        now = view.holder_state
        if now is not None and now.state != RUNNING:  # a crash: say what the retry will find and do
            out.line(f"now: {now.text} {now.next}")
    if isinstance(intent, CorruptIntentError):
        out.line(f"intent: unreadable: {intent}")
    elif intent is not None:
        out.line(f"intent: fence {intent.fence}, {intent.host} pid {intent.pid}, staging {intent.staging}")
    if beat is not None:
        out.line(f"heartbeat: {_heartbeat_line(beat)}")
    if request is not None:
        state = "pending" if view.stop_pending else "for an earlier attempt"
        out.line(f"stop request ({state}): {request.describe()} for fence {request.fence}")
    if history:
        out.table(HISTORY_COLUMNS, [history_row(h) for h in history], title="History (newest first)")
    if view.recoveries:
        rows = [[stamp(r.at), r.event, r.fence, r.predecessor, r.text] for r in view.recoveries]
        out.table(RECOVERY_COLUMNS, rows, title="Recoveries (newest first): what successors did about dead attempts")


#: A recovery step: when (the Redis server's clock), what, by which fence, about which one.
RECOVERY_COLUMNS = ("at (UTC)", "step", "fence", "of fence", "what happened")


def _heartbeat_line(beat: Heartbeat) -> str:
    """The supervisor's heartbeat: a running one with the time it has left to be renewed; an
    ended one with its exit code (its key only lingers so a successor can read that code: the
    time left is when Redis drops it, which means nothing to a reader)."""
    if beat.running:
        return f"fence {beat.fence} on {beat.host}, running (supervisor pid {beat.pid}), {beat.ttl_ms / 1000:.1f}s left"
    code = "" if beat.exit_code is None else f" with exit code {beat.exit_code}"
    return f"fence {beat.fence} on {beat.host}, {beat.state}{code}"


#: ``stats``' columns: the figures of :mod:`airflow_jrs.views.stats`, as the dashboard shows them.
STATS_COLUMNS = ("DAG", "computed", "reused", "adopted", "Spark spent", "Spark avoided", "untimed")


def cmd_stats(args: argparse.Namespace, out: Output) -> int:
    """Spark time spent and avoided by DAG, as the dashboard shows it: the Job results plugin's
    ``GET /jrs/api/stats`` on Airflow's API server (it reads the guarded tasks' XCom payloads in
    Airflow's metadata DB), printed. No store is read: the figures are what the tasks recorded."""
    api = AirflowApi.from_environment(args.airflow_url)
    try:
        doc = api.jrs_stats(since=args.since, dag_id=args.dag_id)
    except AirflowApiError as exc:
        raise CliError(str(exc), UNREACHABLE if exc.unreachable else USAGE) from None
    doc = {"airflow_url": api.base_url, **doc}
    if out.as_json:
        out.json(doc)
        return OK
    since = stamp(datetime.fromisoformat(doc["since"])) if doc.get("since") else "the start"
    what = f"DAG {args.dag_id}" if args.dag_id else "DAGs you may read"
    total = doc["total"]
    if not total["computed"] and not total["reused"]:
        out.line(f"no guarded task of {what} handed on a result since {since} (Airflow at {api.base_url})")
    else:
        rows = [_stats_row(d["dag_id"], d) for d in doc["dags"]]
        if len(rows) > 1:
            rows.append(_stats_row("total", total))
        out.table(STATS_COLUMNS, rows, title=f"Guarded tasks of {what} since {since} (Airflow at {api.base_url})")
    for note in doc.get("notes", []):
        out.line(f"note: {note}")
    return OK


def _stats_row(name: str, f: dict[str, Any]) -> list[Any]:
    return [name, f["computed"], f["reused"], f["adopted"], f["spent"], f["avoided"], f["untimed"]]
