"""Read commands: list, show, dirty, history, leases, intents, quarantined.

They change nothing. Each answers as a table (``--json``: one JSON document) that names the
namespace and server read; an empty answer says where it looked, so "nothing here" is never
mistaken for "nothing anywhere".
"""

from __future__ import annotations

import time
from typing import Any

from airflow_jrs.cli.common import (
    ENTRY_COLUMNS,
    HISTORY_COLUMNS,
    NOT_FOUND,
    OK,
    Ctx,
    empty_namespace,
    empty_namespace_line,
    entry_json,
    entry_row,
    history_row,
    stamp,
)
from airflow_jrs.exceptions import CorruptIntentError
from airflow_jrs.intent import Heartbeats, Intent, IntentStore
from airflow_jrs.lease import JobLease, LeaseHolder, held_leases
from airflow_jrs.store import EntryState, JobStatus
from airflow_jrs.store.query import EntryQuery


def _entries(ctx: Ctx, what: str, entries: list[Any], doc: dict[str, Any], quarantined: list[str]) -> int:
    # Nothing at all in the namespace: a wrong --namespace, most likely (exit 1, naming the real ones).
    empty = empty_namespace(ctx) if not entries and not quarantined else None
    if ctx.out.as_json:
        listed = {**doc, "entries": [entry_json(e) for e in entries], "quarantined": quarantined, **(empty or {})}
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


def _holder_json(holder: LeaseHolder) -> dict[str, Any]:
    return {"token": holder.token, "ttl_ms": holder.ttl_ms, "owner": holder.owner}


def _holder_text(holder: LeaseHolder) -> str:
    o = holder.owner
    run = " ".join(str(o[k]) for k in ("dag_id", "task_id", "run_id") if o.get(k))
    return f"{o.get('host', '?')} pid {o.get('pid', '?')} {run}".strip()


def cmd_leases(ctx: Ctx) -> int:
    held = held_leases(ctx.store.client, ctx.namespace)
    if ctx.out.as_json:
        ctx.out.json(ctx.located({"leases": [{"job_id": j, **_holder_json(h)} for j, h in held.items()]}))
    elif not held:
        ctx.out.line(f"no leases held in {ctx.where()}: no attempt is working on a job")
    else:
        ctx.out.header(ctx, "Held leases")
        rows = [[j, _holder_text(h), h.token, f"{h.ttl_ms / 1000:.1f}s"] for j, h in held.items()]
        ctx.out.table(("job id", "holder (host, pid, run)", "token", "time left"), rows)
    return OK


def _intent_json(intent: Intent) -> dict[str, Any]:
    return {k: v for k, v in vars(intent).items()}


def _verdict(intent: Intent | CorruptIntentError, holder: LeaseHolder | None, beat: Any) -> str:
    if isinstance(intent, CorruptIntentError):
        return "unreadable intent: inspect it (see the error)"
    if holder is not None and holder.token == intent.fence:
        return "running: its attempt holds the lease"
    if beat is not None and beat.running:
        return "spark-submit still running (heartbeat) without a lease: the next attempt waits or stops it"
    return "needs recovery: its attempt died; the job's next attempt adopts or recomputes"


def cmd_intents(ctx: Ctx) -> int:
    intents = IntentStore(ctx.store.client, ctx.namespace, spec_root="").list_intents()
    held = held_leases(ctx.store.client, ctx.namespace) if intents else {}
    beats = Heartbeats(ctx.store.client, ctx.namespace)
    rows: list[list[Any]] = []
    docs: list[dict[str, Any]] = []
    for job_id, intent in intents.items():
        beat = beats.get(job_id)
        verdict = _verdict(intent, held.get(job_id), beat)
        if isinstance(intent, CorruptIntentError):
            docs.append({"job_id": job_id, "error": str(intent), "verdict": verdict})
            rows.append([job_id, "?", "?", "?", verdict])
            continue
        docs.append(
            {"job_id": job_id, "intent": _intent_json(intent), "heartbeat": _beat_json(beat), "verdict": verdict}
        )
        started = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(intent.started_at))
        rows.append([job_id, intent.fence, f"{intent.host} pid {intent.pid}", started, verdict])
    if ctx.out.as_json:
        ctx.out.json(ctx.located({"intents": docs}))
    elif not rows:
        ctx.out.line(f"no intents in {ctx.where()}: no job is in flight or waiting for recovery")
    else:
        ctx.out.header(ctx, "Intents (jobs in flight or needing recovery)")
        ctx.out.table(("job id", "fence", "attempt", "started (UTC)", "verdict"), rows)
    return OK


def _beat_json(beat: Any) -> dict[str, Any] | None:
    return None if beat is None else {k: v for k, v in vars(beat).items()}


def cmd_show(ctx: Ctx) -> int:
    """One job, everything known about it. A corrupt, quarantined or newer entry raises (the
    caller prints the one-line error): every reader of the store answers the same for it."""
    job_id, store = ctx.args.job_id, ctx.store
    entry = store.get_entry(job_id)
    history = store.get_history(job_id)
    holder = JobLease(store.client, ctx.namespace, job_id).peek()
    try:
        intent: Intent | str | None = IntentStore(store.client, ctx.namespace, spec_root="").get(job_id)
    except CorruptIntentError as exc:
        intent = str(exc)
    beat = Heartbeats(store.client, ctx.namespace).get(job_id)
    running = holder is not None or (isinstance(intent, Intent) and beat is not None and beat.running)
    if entry is not None:
        summary = entry.state.value
    elif running:
        summary = "running"
    else:
        summary = "forgotten" if history else "missing"
    found = entry is not None or running or intent is not None
    if ctx.out.as_json:
        doc = {
            "job_id": job_id,
            "summary": summary,
            "state": entry.state.value if entry else None,
            "created_at": entry.created_at.isoformat() if entry and entry.created_at else None,
            "result": entry_json(entry)["result"] if entry else None,
            "running": running,
            "lease": _holder_json(holder) if holder else None,
            "intent": _intent_json(intent) if isinstance(intent, Intent) else intent,
            "heartbeat": _beat_json(beat),
            "history": [entry_json(h) for h in history],
        }
        ctx.out.json(ctx.located(doc))
        return OK if found else NOT_FOUND
    out = ctx.out
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
    elif running:
        out.line("no result yet: the job is running")
    elif history:
        out.line(f"no result now: it was forgotten or superseded; {len(history)} earlier entries are kept (below)")
    else:
        empty = empty_namespace(ctx)
        if empty:
            out.line(f"job {job_id!r} not found: {empty_namespace_line(ctx, empty)}")
        else:
            out.line(f"job {job_id!r} has no result, no history and no running attempt in {ctx.where()}")
    if holder is not None:
        out.line(f"lease: held by {_holder_text(holder)}, token {holder.token}, {holder.ttl_ms / 1000:.1f}s left")
    if intent is not None:
        if isinstance(intent, Intent):
            out.line(f"intent: fence {intent.fence}, {intent.host} pid {intent.pid}, staging {intent.staging}")
        else:
            out.line(f"intent: unreadable: {intent}")
    if beat is not None:
        out.line(f"heartbeat: fence {beat.fence} on {beat.host}, {beat.state}, {beat.ttl_ms / 1000:.1f}s left")
    if history:
        out.table(HISTORY_COLUMNS, [history_row(h) for h in history], title="History (newest first)")
    return OK if found else NOT_FOUND
