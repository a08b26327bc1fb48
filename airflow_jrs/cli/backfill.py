"""``backfill --missing-only``: create DAG runs only for the dates where some job is not committed.

Airflow decides what a backfill runs from its metadata DB (which DAG runs exist), not from
results: after a metadata-DB reset, a move to a new deployment, a renamed DAG or a moved
namespace, ``airflow backfill create`` runs every date again, and each guarded task
(:mod:`airflow_jrs.protocol.guarded_task`) then skips its committed job: cheap, but one
scheduled task instance per job and date.
This command asks the store first, with the job ids ``airflow-jrs plan`` derives
(:func:`airflow_jrs.cli.plan.job_ids`: the operator's own rule), one pipelined read per batch
of dates (:func:`airflow_jrs.store.batch_read.read_entries`), and creates runs only for the
dates that need one. A fully committed range costs one store read per job and date and no
task instance at all.

What "committed" means here is the task's own decision (:func:`airflow_jrs.domain.decision.decide`):
a SUCCEEDED, clean result with the job's fingerprint. A dirty result needs its run (the
cleanup is pending; Spark does not run); a failed, missing or changed job needs its run; a
quarantined or unreadable entry blocks its job (the task would fail): such a date gets no run
unless another job of it needs one, and the table says what to do.

The runs are created through Airflow's REST API (:class:`airflow_jrs.cli.airflow_api.AirflowApi`)
as Airflow backfills, so they have the backfill run type, the backfill's ``max_active_runs``
and appear on the Backfills page. Airflow 3.3's ``POST /api/v2/backfills`` takes one date
range and creates a run for every interval in it, and allows one active backfill per DAG: so
each contiguous range of missing dates is one backfill (``reprocess_behavior=completed``: an
old run of such a date is run again), created after the previous one's runs ended. Airflow
marks a backfill complete on a 30 s timer; a backfill whose runs all ended is completed at
once with ``PUT .../cancel`` (it fails only queued runs, and none are left) so the next range
starts without that wait. The last range is created and left to run unless ``--wait``.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from airflow_jrs.cli.airflow_api import AirflowApi, AirflowApiError
from airflow_jrs.cli.common import NOT_FOUND, OK, UNREACHABLE, USAGE, CliError, Ctx, plural, stamp
from airflow_jrs.cli.plan import RENDERABLE, _fingerprint, job_ids, load_dag
from airflow_jrs.domain.decision import decide
from airflow_jrs.exceptions import JobResultEntryError
from airflow_jrs.store.batch_read import read_entries
from airflow_jrs.store.read_rules import READ_CHUNK

#: How often the command looks at a backfill's runs while it waits for them.
POLL_SECONDS = 2.0
TERMINAL = frozenset({"success", "failed"})
ADVICE = (
    "use `airflow backfill create` for this DAG instead (each task then decides from the store itself), "
    f"or give the task a job_id that uses only {RENDERABLE}"
)


@dataclass
class DatePlan:
    """One interval of the DAG: which of its jobs are committed, missing (need a run) or blocked."""

    logical_date: datetime
    committed: list[str] = field(default_factory=list)
    missing: list[tuple[str, str]] = field(default_factory=list)  # (job id, why)
    blocked: list[tuple[str, str]] = field(default_factory=list)  # (job id, what to do)

    @property
    def needs_run(self) -> bool:
        return bool(self.missing)

    def json(self) -> dict[str, Any]:
        return {
            "logical_date": self.logical_date.isoformat(),
            "committed": len(self.committed),
            "missing": [{"job_id": j, "why": w} for j, w in self.missing],
            "blocked": [{"job_id": j, "why": w} for j, w in self.blocked],
            "run": self.needs_run,
        }


def derive(dag: Any, start: datetime, end: datetime) -> list[tuple[datetime, list[tuple[Any, str]]]]:
    """``(logical date, [(task, job id)])`` per interval, or a :class:`CliError` saying why the
    jobs cannot be derived. A date is left out of a backfill only on the store's word, so
    anything uncertain is refused rather than guessed: a job id template plan cannot render, a
    mapped task expanded over another task's output (its jobs depend on the run's expansion; one
    expanded over literal lists is derived per map index), a partitioned timetable (no logical
    date), a job id that does not change with the date."""
    try:
        jobs, notes = job_ids(dag, start, end)
    except CliError as exc:
        if "job_id template" in str(exc):
            raise CliError(f"{exc}; the missing dates cannot be derived: {ADVICE}", USAGE) from None
        raise
    if any(note.startswith("left out mapped tasks") for note in notes):
        raise CliError(
            f"DAG {dag.dag_id!r}: {notes[0]}, so a date's missing jobs cannot be known before its run; "
            "use `airflow backfill create` for this DAG (each map index then skips its committed job), or "
            "expand the task over a list written in the DAG file",
            USAGE,
        )
    dates: dict[datetime, list[tuple[Any, str]]] = {}
    for info, task, job_id in jobs:
        if info.logical_date is None:
            raise CliError(
                f"DAG {dag.dag_id!r} has a partitioned timetable (runs without a logical date): a "
                "missing-only backfill works on dated intervals only; use `airflow backfill create`",
                USAGE,
            )
        dates.setdefault(info.logical_date, []).append((task, job_id))
    repeated = Counter(job_id for _, _, job_id in jobs)
    same = sorted(job_id for job_id, n in repeated.items() if n > 1)
    if same:
        raise CliError(
            f"DAG {dag.dag_id!r}: job id {same[0]!r} stands for several dates (its job_id template does not "
            f"use the date), so the store cannot tell which dates are missing; {ADVICE} including the date "
            "(e.g. {{ ds }})",
            USAGE,
        )
    return sorted(dates.items())


def read_dates(
    ctx: Ctx, dates: list[tuple[datetime, list[tuple[Any, str]]]], *, batch_jobs: int = READ_CHUNK
) -> list[DatePlan]:
    """Each date's :class:`DatePlan`: one pipelined store read per batch of whole dates
    (at most ``batch_jobs`` jobs, at least one date)."""
    per_date = max(len(jobs) for _, jobs in dates)
    step = max(1, batch_jobs // per_date)
    fingerprints: dict[int, str | None] = {}
    plans = []
    for first in range(0, len(dates), step):
        chunk = dates[first : first + step]
        ids = [job_id for _, jobs in chunk for _, job_id in jobs]
        answers = read_entries(ctx.store, ids, batch=len(ids))
        for when, jobs in chunk:
            plan = DatePlan(when)
            for task, job_id in jobs:
                if id(task) not in fingerprints:  # per task, and per map index of a mapped one
                    fingerprints[id(task)] = _fingerprint(task)
                _classify(plan, task, job_id, answers[job_id], fingerprints[id(task)])
            plans.append(plan)
    return plans


def _classify(plan: DatePlan, task: Any, job_id: str, answer: Any, fingerprint: str | None) -> None:
    if isinstance(answer, JobResultEntryError):
        plan.blocked.append((job_id, str(answer)))
        return
    decision = decide(answer, fingerprint, accept_changed_fingerprint=task.accept_changed_fingerprint)
    if decision.skip and answer is not None and answer.is_clean:
        plan.committed.append(job_id)
    elif decision.skip:
        plan.missing.append((job_id, "cleanup pending (dirty): the run cleans up, Spark does not run"))
    else:
        plan.missing.append((job_id, decision.reason))


def ranges(plans: list[DatePlan]) -> list[list[DatePlan]]:
    """The dates needing a run, grouped into runs of adjacent intervals (one backfill each)."""
    out: list[list[DatePlan]] = []
    previous_needed = False
    for plan in plans:
        if plan.needs_run:
            if previous_needed:
                out[-1].append(plan)
            else:
                out.append([plan])
        previous_needed = plan.needs_run
    return out


def cmd_backfill(ctx: Ctx) -> int:
    a = ctx.args
    if a.from_date > a.to_date:
        raise CliError("--from-date is after --to-date; swap them", USAGE)
    dag = load_dag(a.dag_id, a.dags_folder)
    plans = read_dates(ctx, derive(dag, a.from_date, a.to_date))
    todo = ranges(plans)
    needed = sum(len(r) for r in todo)
    jobs = sum(len(p.committed) + len(p.missing) + len(p.blocked) for p in plans)
    summary = {"dates": len(plans), "jobs": jobs, "dates_to_run": needed, "backfills": len(todo)}
    if not ctx.out.as_json:
        _print_plan(ctx, plans, summary)
    if not a.missing_only:
        return _explain(ctx, plans, summary)
    if a.dry_run or not todo:
        if ctx.out.as_json:
            ctx.out.json(ctx.located(_doc(a, plans, summary, [], dry_run=a.dry_run)))
        elif not todo:
            ctx.out.line("every date is committed: no backfill needed, nothing created")
        else:
            ctx.out.line(
                f"dry run: would create {plural(len(todo), 'backfill')} for {plural(needed, 'date')}; nothing created"
            )
        return OK
    api = AirflowApi.from_environment(a.airflow_url)
    created: list[dict[str, Any]] = []
    try:
        api.check_dag(a.dag_id)
        active = api.active_backfills(a.dag_id)
        if active:
            b = active[0]
            raise CliError(
                f"backfill {b['id']} of {a.dag_id} ({b['from_date']} to {b['to_date']}) is still active and "
                "Airflow runs one backfill per DAG: wait until it completes, or cancel it (Backfills page, or "
                f"PUT /api/v2/backfills/{b['id']}/cancel); nothing created",
                USAGE,
            )
        for i, group in enumerate(todo):
            if i:
                _finish(ctx, api, a.dag_id, created[-1], todo[i - 1])
            created.append(_create(ctx, api, a, group))
        if a.wait:
            _finish(ctx, api, a.dag_id, created[-1], todo[-1])
    except AirflowApiError as exc:
        done = f"; created so far: backfills {[b['id'] for b in created]}" if created else "; nothing created"
        raise CliError(f"{exc}{done}", UNREACHABLE if exc.unreachable else USAGE) from None
    if ctx.out.as_json:
        ctx.out.json(ctx.located(_doc(a, plans, summary, created, dry_run=False)))
    else:
        last = "" if a.wait else " (the last one runs on: see the Backfills page)"
        ctx.out.line(f"created {plural(len(created), 'backfill')} for {plural(needed, 'date')}{last}")
    return OK


def _create(ctx: Ctx, api: AirflowApi, a: Any, group: list[DatePlan]) -> dict[str, Any]:
    start, end = group[0].logical_date, group[-1].logical_date
    doc = api.create_backfill(a.dag_id, start, end, reprocess_behavior="completed", max_active_runs=a.max_active_runs)
    info = {"id": doc["id"], "from_date": start.isoformat(), "to_date": end.isoformat(), "dates": len(group)}
    if not ctx.out.as_json:
        ctx.out.line(f"backfill {doc['id']}: {stamp(start)} to {stamp(end)} ({plural(len(group), 'date')})")
    return info


def _finish(ctx: Ctx, api: AirflowApi, dag_id: str, backfill: dict[str, Any], group: list[DatePlan]) -> None:
    """Wait until every run of ``group`` ended, then have Airflow mark the backfill complete so
    the next one may start (see the module docstring)."""
    wanted = {p.logical_date.timestamp() for p in group}
    start, end = group[0].logical_date, group[-1].logical_date
    while True:
        doc = api.backfill(int(backfill["id"]))
        if doc.get("completed_at"):
            return
        runs = api.dag_runs(dag_id, start, end)
        ended = {_ts(r["logical_date"]) for r in runs if r.get("logical_date") and r.get("state") in TERMINAL}
        if wanted <= ended:
            break
        time.sleep(POLL_SECONDS)
    try:
        api.cancel_backfill(int(backfill["id"]))  # nothing is queued any more: this only completes it
    except AirflowApiError as exc:
        if exc.status != 409:  # 409: the scheduler completed it meanwhile
            raise


def _ts(raw: str) -> float:
    return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()


def _print_plan(ctx: Ctx, plans: list[DatePlan], summary: dict[str, int]) -> None:
    a = ctx.args
    ctx.out.header(ctx, f"Missing-only backfill plan for {a.dag_id}")
    rows = []
    for p in plans:
        why = "; ".join(f"{j}: {w}" for j, w in [*p.missing, *p.blocked])
        rows.append([stamp(p.logical_date), len(p.committed), len(p.missing), len(p.blocked),
                     "run" if p.needs_run else "no run", why])  # fmt: skip
    ctx.out.table(("logical date", "committed", "missing", "blocked", "backfill", "why"), rows)
    ctx.out.line(
        f"{plural(summary['dates'], 'date')}, {plural(summary['jobs'], 'job')}: "
        f"{plural(summary['dates_to_run'], 'date')} {'needs' if summary['dates_to_run'] == 1 else 'need'} a run "
        f"({plural(summary['backfills'], 'contiguous range')})"
    )
    if any(p.blocked for p in plans):
        ctx.out.line("blocked jobs fail their task: fix them first (airflow-jrs quarantined, release-quarantine)")


def _explain(ctx: Ctx, plans: list[DatePlan], summary: dict[str, int]) -> int:
    a = ctx.args
    tasks = summary["jobs"]
    text = (
        f"without --missing-only nothing is created. `airflow backfill create --dag-id {a.dag_id} "
        f"--from-date {a.from_date.date()} --to-date {a.to_date.date()}` creates a run for each date (of "
        f"{summary['dates']}) that has none in Airflow's metadata DB (it looks at runs, not results): "
        f"every guarded task of those runs is scheduled and skips a committed job "
        f"({plural(tasks, 'guarded task')} at most). `airflow-jrs backfill --missing-only` asks the store and "
        "creates "
        f"runs for the {plural(summary['dates_to_run'], 'date')} where some job is not committed, in "
        f"{plural(summary['backfills'], 'Airflow backfill')}; add --dry-run to see only this table"
    )
    if ctx.out.as_json:
        ctx.out.json(ctx.located({**_doc(a, plans, summary, [], dry_run=True), "note": text}))
    else:
        ctx.out.line(text)
    return OK if summary["dates"] else NOT_FOUND


def _doc(
    a: Any, plans: list[DatePlan], summary: dict[str, int], created: list[dict[str, Any]], *, dry_run: bool
) -> dict[str, Any]:
    return {
        "dag_id": a.dag_id,
        "from_date": a.from_date.isoformat(),
        "to_date": a.to_date.isoformat(),
        "missing_only": a.missing_only,
        "dry_run": dry_run,
        "dates": [p.json() for p in plans],
        "summary": summary,
        "backfills": created,
    }
