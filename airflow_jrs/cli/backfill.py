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

The runs are created through Airflow's REST API (:class:`airflow_jrs.cli.airflow_api.AirflowApi`),
at the cost of those dates alone, in one of two ways (:func:`how`, decided from the plan, so
``--dry-run`` says which):

* **one contiguous range**: one Airflow backfill of exactly those dates
  (``reprocess_behavior=completed``: an old run of such a date is run again). Its runs have the
  backfill run type, the backfill's ``max_active_runs`` and appear on the Backfills page: the
  same thing as ``airflow backfill create`` over those dates.
* **scattered dates**: Airflow 3.3's backfill takes one date range, creates a run for every
  interval in it, and allows one active backfill per DAG, so scattered dates cannot be one
  backfill, and one backfill per range, one after another, cost a scheduler round and a wait
  per range (208 s for 36 dates in 34 ranges where one backfill of 36 dates took a fraction).
  Instead each date gets one run with its logical date and the timetable's data interval, all at
  once: ``POST /api/v2/dags/{dag_id}/dagRuns`` where the date has no run, a clear of its run
  where that ended (what ``reprocess_behavior=completed`` does), nothing where it is queued or
  running. A run keyed by its logical date is the same job as the scheduled or backfill run of
  that date (:func:`airflow_jrs.domain.identity.run_key`), so the tasks compute the same jobs.
  Airflow shows these as manual runs (run type ``manual``, with a note saying why), bounded by
  the DAG's ``max_active_runs`` (not ``--max-active-runs``, which only a backfill has), not on
  the Backfills page. The same happens for one range when a backfill of the DAG is still active.

A backfill is never completed with ``PUT .../cancel`` (Airflow's scheduler marks it complete
within 30 s): in Airflow 3.3 the cancel also pauses the backfill, the scheduler never starts a
queued run of a paused backfill, and ``unpause`` is refused once it is complete; so a run of it
cleared later (``airflow-jrs recompute``, Recompute, Airflow's Clear) would stay queued forever.
With ``--wait`` the command returns when every run has ended.
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

#: How often the command looks at its runs while it waits for them.
POLL_SECONDS = 1.0
TERMINAL = frozenset({"success", "failed"})
#: The two ways the missing dates get their runs (:func:`how`).
BACKFILL, RUNS = "backfill", "runs"
#: The note on each run made with its logical date: Airflow shows it as a manual run, this says why.
NOTE = "airflow-jrs backfill --missing-only: a job of this date was not committed"
ADVICE = (
    "use `airflow backfill create` for this DAG instead (each task then decides from the store itself), "
    f"or give the task a job_id that uses only {RENDERABLE}"
)


@dataclass
class DatePlan:
    """One interval of the DAG: which of its jobs are committed, missing (need a run) or blocked."""

    logical_date: datetime
    #: The timetable's ``(start, end)`` for this date: a run made with its logical date gets it.
    data_interval: tuple[datetime, datetime] | None = None
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


def derive(dag: Any, start: datetime, end: datetime) -> list[tuple[Any, list[tuple[Any, str]]]]:
    """``(interval, [(task, job id)])`` per interval (a timetable's ``DagRunInfo``), or a
    :class:`CliError` saying why the jobs cannot be derived. A date is left out of a backfill only
    on the store's word, so anything uncertain is refused rather than guessed: a job id template plan cannot render, a
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
    infos: dict[datetime, Any] = {}
    for info, task, job_id in jobs:
        if info.logical_date is None:
            raise CliError(
                f"DAG {dag.dag_id!r} has a partitioned timetable (runs without a logical date): a "
                "missing-only backfill works on dated intervals only; use `airflow backfill create`",
                USAGE,
            )
        dates.setdefault(info.logical_date, []).append((task, job_id))
        infos[info.logical_date] = info
    repeated = Counter(job_id for _, _, job_id in jobs)
    same = sorted(job_id for job_id, n in repeated.items() if n > 1)
    if same:
        raise CliError(
            f"DAG {dag.dag_id!r}: job id {same[0]!r} stands for several dates (its job_id template does not "
            f"use the date), so the store cannot tell which dates are missing; {ADVICE} including the date "
            "(e.g. {{ ds }})",
            USAGE,
        )
    return [(infos[when], jobs) for when, jobs in sorted(dates.items())]


def read_dates(
    ctx: Ctx, dates: list[tuple[Any, list[tuple[Any, str]]]], *, batch_jobs: int = READ_CHUNK
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
        for info, jobs in chunk:
            interval = info.data_interval
            plan = DatePlan(info.logical_date, (interval.start, interval.end) if interval else None)
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
    """The dates needing a run, grouped into runs of adjacent intervals."""
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


def how(todo: list[list[DatePlan]]) -> str:
    """How the dates get their runs: ``"backfill"`` when they are one contiguous range (one Airflow
    backfill of exactly those dates), else ``"runs"`` (one run per date with its logical date, all
    at once; see the module docstring). Decided from the plan alone, so ``--dry-run`` says it."""
    return BACKFILL if len(todo) == 1 else RUNS


def cmd_backfill(ctx: Ctx) -> int:
    a = ctx.args
    if a.from_date > a.to_date:
        raise CliError("--from-date is after --to-date; swap them", USAGE)
    dag = load_dag(a.dag_id, a.dags_folder)
    plans = read_dates(ctx, derive(dag, a.from_date, a.to_date))
    todo = ranges(plans)
    needed = [p for r in todo for p in r]
    mode = how(todo)
    jobs = sum(len(p.committed) + len(p.missing) + len(p.blocked) for p in plans)
    summary = {"dates": len(plans), "jobs": jobs, "dates_to_run": len(needed), "backfills": int(mode == BACKFILL)}
    if not ctx.out.as_json:
        _print_plan(ctx, plans, summary, len(todo), mode if todo else None)
    if not a.missing_only:
        return _explain(ctx, plans, summary, len(todo))
    if a.dry_run or not todo:
        if ctx.out.as_json:
            ctx.out.json(ctx.located(_doc(a, plans, summary, mode if todo else None, [], [], dry_run=a.dry_run)))
        elif not todo:
            ctx.out.line("every date is committed: no backfill needed, nothing created")
        else:
            ctx.out.line(f"dry run: would create {_vehicle(mode, len(needed))}; nothing created")
        return OK
    api = AirflowApi.from_environment(a.airflow_url)
    created: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    try:
        api.check_dag(a.dag_id)
        if mode == BACKFILL:
            active = api.active_backfills(a.dag_id)
            if active:
                b = active[0]
                mode = RUNS  # Airflow runs one backfill per DAG: do not wait for that one
                if not ctx.out.as_json:
                    ctx.out.line(
                        f"backfill {b['id']} of {a.dag_id} is still active (Airflow allows one per DAG): "
                        "the dates get runs with their logical dates instead"
                    )
        if mode == BACKFILL:
            created.append(_create(ctx, api, a, needed))
            if a.wait:
                _wait_backfill(api, a.dag_id, created[0], needed)
        else:
            runs = _trigger(ctx, api, a.dag_id, needed)
            if a.wait:
                _wait_runs(api, a.dag_id, runs, needed)
    except AirflowApiError as exc:
        made = [f"backfill {b['id']}" for b in created] + [f"run {r['run_id']}" for r in runs]
        done = f"; created so far: {', '.join(made)}" if made else "; nothing created"
        raise CliError(f"{exc}{done}", UNREACHABLE if exc.unreachable else USAGE) from None
    if ctx.out.as_json:
        ctx.out.json(ctx.located(_doc(a, plans, summary, mode, created, runs, dry_run=False)))
    else:
        last = "" if a.wait else " (they run on: see the DAG's grid or the Backfills page)"
        ctx.out.line(f"created {_vehicle(mode, len(needed))}{last}")
    return OK


def _vehicle(mode: str, dates: int) -> str:
    if mode == BACKFILL:
        return f"1 backfill for {plural(dates, 'date')}"
    return f"{plural(dates, 'run')} with their logical dates (run type manual, all at once)"


def _create(ctx: Ctx, api: AirflowApi, a: Any, group: list[DatePlan]) -> dict[str, Any]:
    start, end = group[0].logical_date, group[-1].logical_date
    doc = api.create_backfill(a.dag_id, start, end, reprocess_behavior="completed", max_active_runs=a.max_active_runs)
    info = {"id": doc["id"], "from_date": start.isoformat(), "to_date": end.isoformat(), "dates": len(group)}
    if not ctx.out.as_json:
        ctx.out.line(f"backfill {doc['id']}: {stamp(start)} to {stamp(end)} ({plural(len(group), 'date')})")
    return info


def _trigger(ctx: Ctx, api: AirflowApi, dag_id: str, needed: list[DatePlan]) -> list[dict[str, Any]]:
    """One run per date, with its logical date and the timetable's data interval: a new one
    (``POST .../dagRuns``) where the date has no run, the existing run cleared where it ended
    (as a backfill with ``reprocess_behavior=completed`` does), left alone where it is queued or
    running (it runs anyway). All at once: the DAG's ``max_active_runs`` bounds how many run."""
    existing = _runs_by_date(api, dag_id, needed)
    out = []
    for plan in needed:
        run, action = existing.get(plan.logical_date.timestamp()), ""
        if run is None:
            try:
                run, action = api.trigger_run(dag_id, plan.logical_date, plan.data_interval, note=NOTE), "triggered"
            except AirflowApiError as exc:
                if exc.status != 409:
                    raise
                run = _runs_by_date(api, dag_id, [plan]).get(plan.logical_date.timestamp())
                if run is None:
                    raise
        if not action:
            if run.get("state") in TERMINAL:
                api.clear_run(dag_id, run["dag_run_id"])
                action = "cleared"
            else:
                action = "in flight"
        out.append({"logical_date": plan.logical_date.isoformat(), "run_id": run["dag_run_id"], "action": action})
        if not ctx.out.as_json:
            ctx.out.line(f"{stamp(plan.logical_date)}: run {run['dag_run_id']} {action}")
    return out


def _runs_by_date(api: AirflowApi, dag_id: str, plans: list[DatePlan]) -> dict[float, dict[str, Any]]:
    runs = api.dag_runs(dag_id, plans[0].logical_date, plans[-1].logical_date)
    return {_ts(r["logical_date"]): r for r in runs if r.get("logical_date")}


def _wait_runs(api: AirflowApi, dag_id: str, runs: list[dict[str, Any]], needed: list[DatePlan]) -> None:
    """Wait until every run of ``runs`` ended (each was queued when triggered or cleared)."""
    wanted = {r["run_id"] for r in runs}
    while True:
        states = {r["dag_run_id"]: r.get("state") for r in _runs_by_date(api, dag_id, needed).values()}
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
        ended = {_ts(r["logical_date"]) for r in runs if r.get("logical_date") and r.get("state") in TERMINAL}
        if wanted <= ended:
            return
        time.sleep(POLL_SECONDS)


def _ts(raw: str) -> float:
    return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()


def _print_plan(ctx: Ctx, plans: list[DatePlan], summary: dict[str, int], n_ranges: int, mode: str | None) -> None:
    a = ctx.args
    ctx.out.header(ctx, f"Missing-only backfill plan for {a.dag_id}")
    rows = []
    for p in plans:
        why = "; ".join(f"{j}: {w}" for j, w in [*p.missing, *p.blocked])
        rows.append([stamp(p.logical_date), len(p.committed), len(p.missing), len(p.blocked),
                     "run" if p.needs_run else "no run", why])  # fmt: skip
    ctx.out.table(("logical date", "committed", "missing", "blocked", "backfill", "why"), rows)
    vehicle = f": {_vehicle(mode, summary['dates_to_run'])}" if mode else ""
    ctx.out.line(
        f"{plural(summary['dates'], 'date')}, {plural(summary['jobs'], 'job')}: "
        f"{plural(summary['dates_to_run'], 'date')} {'needs' if summary['dates_to_run'] == 1 else 'need'} a run "
        f"({plural(n_ranges, 'contiguous range')}){vehicle}"
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
        + (f" ({_vehicle(mode, summary['dates_to_run'])})" if n_ranges else "")
        + "; add --dry-run to see only this table"
    )
    if ctx.out.as_json:
        ctx.out.json(
            ctx.located({**_doc(a, plans, summary, mode if n_ranges else None, [], [], dry_run=True), "note": text})
        )
    else:
        ctx.out.line(text)
    return OK if summary["dates"] else NOT_FOUND


def _doc(
    a: Any,
    plans: list[DatePlan],
    summary: dict[str, int],
    mode: str | None,
    created: list[dict[str, Any]],
    runs: list[dict[str, Any]],
    *,
    dry_run: bool,
) -> dict[str, Any]:
    """The ``--json`` answer. ``how``: ``backfill`` (one Airflow backfill, in ``backfills``),
    ``runs`` (runs with their logical dates, in ``runs``) or null (nothing to run)."""
    return {
        "dag_id": a.dag_id,
        "from_date": a.from_date.isoformat(),
        "to_date": a.to_date.isoformat(),
        "missing_only": a.missing_only,
        "dry_run": dry_run,
        "dates": [p.json() for p in plans],
        "summary": summary,
        "how": mode,
        "backfills": created,
        "runs": runs,
    }
