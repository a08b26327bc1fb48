"""The missing-only backfill: create DAG runs only for the dates where some job is not committed.

``airflow-jrs backfill --missing-only`` and the Job results page's "Backfill missing dates" both
call :func:`plan_missing` (the preview) and :func:`start_missing` (the runs).

Airflow decides what a backfill runs from its metadata DB (which DAG runs exist), not from
results: after a metadata-DB reset, a move to a new deployment, a renamed DAG or a moved
namespace, ``airflow backfill create`` runs every date again, and each guarded task
(:mod:`airflow_jrs.protocol.guarded_task`) then skips its committed job: cheap, but one
scheduled task instance per job and date.
It asks the store first, with the job ids ``airflow-jrs plan`` derives
(:func:`airflow_jrs.actions.planning.job_ids.job_ids`: the operator's own rule), one pipelined
read per batch of dates (:meth:`~airflow_jrs.store.results.base.JobResultStore.read_many`), and creates
runs only for the dates that need one. A fully committed range costs one store read per job and date and no
task instance at all.

What "committed" means here is the task's own decision (:func:`airflow_jrs.domain.decision.decide`):
a SUCCEEDED, clean result with the job's fingerprint. A dirty result needs its run (the
cleanup is pending; Spark does not run); a failed, missing or changed job needs its run; a
quarantined or unreadable entry blocks its job (the task would fail): such a date gets no run
unless another job of it needs one, and the table says what to do.

The runs are created through Airflow's REST API (:class:`airflow_jrs.actions.airflow_api.AirflowApi`),
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
With ``--wait`` the CLI returns when every run has ended (:mod:`airflow_jrs.actions.backfill_wait`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from airflow_jrs.actions import USAGE, ActionError
from airflow_jrs.actions.airflow_api import AirflowApi, AirflowApiError
from airflow_jrs.actions.planning.job_ids import RENDERABLE, UnrenderableJobId, job_ids
from airflow_jrs.actions.planning.serialized import NEEDS_DAG_FILE
from airflow_jrs.domain.decision import decide
from airflow_jrs.exceptions import JobResultEntryError
from airflow_jrs.store import JobResultStore
from airflow_jrs.store.redis.read_rules import READ_CHUNK
from airflow_jrs.views.words import plural, stamp

#: How many of :func:`_trigger`'s REST calls are in flight at once (the API server's workers serve them).
TRIGGER_CALLS = 4
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


@dataclass
class MissingPlan:
    """What a missing-only backfill of a range would create: the preview both callers show."""

    dag_id: str
    plans: list[DatePlan]
    #: The dates needing a run, in runs of adjacent intervals (:func:`ranges`).
    todo: list[list[DatePlan]]

    @property
    def needed(self) -> list[DatePlan]:
        return [p for r in self.todo for p in r]

    @property
    def how(self) -> str | None:
        """:func:`how` the dates get their runs; ``None`` when every date is committed."""
        return how(self.todo) if self.todo else None

    @property
    def summary(self) -> dict[str, int]:
        jobs = sum(len(p.committed) + len(p.missing) + len(p.blocked) for p in self.plans)
        dates_to_run = len(self.needed)
        return {
            "dates": len(self.plans),
            "jobs": jobs,
            "dates_to_run": dates_to_run,
            "backfills": int(self.how == BACKFILL),
        }


@dataclass
class Started:
    """What :func:`start_missing` created so far (filled as it goes: a failure midway still says it)."""

    how: str
    backfills: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def made(self) -> list[str]:
        return [f"backfill {b['id']}" for b in self.backfills] + [f"run {r['run_id']}" for r in self.runs]


def derive(dag: Any, start: datetime, end: datetime) -> list[tuple[Any, list[tuple[Any, str]]]]:
    """``(interval, [(task, job id)])`` per interval (a timetable's ``DagRunInfo``), or an
    :class:`ActionError` saying why the jobs cannot be derived. A date is left out of a backfill only
    on the store's word, so anything uncertain is refused rather than guessed: a job id template plan cannot render, a
    mapped task expanded over another task's output (its jobs depend on the run's expansion; one
    expanded over literal lists is derived per map index), a partitioned timetable (no logical
    date), a job id that does not change with the date."""
    try:
        jobs, notes = job_ids(dag, start, end)
    except UnrenderableJobId as exc:
        raise ActionError(f"{exc}; the missing dates cannot be derived: {ADVICE}", USAGE) from None
    unknown = [note for note in notes if NEEDS_DAG_FILE in note]
    if unknown:  # a job the plan cannot name would be left out of every date: never guess "committed"
        raise ActionError(f"{unknown[0]}; the missing dates cannot be derived: {ADVICE}", USAGE)
    if any(note.startswith("left out mapped tasks") for note in notes):
        raise ActionError(
            f"DAG {dag.dag_id!r}: {notes[0]}, so a date's missing jobs cannot be known before its run; "
            "use `airflow backfill create` for this DAG (each map index then skips its committed job), or "
            "expand the task over a list written in the DAG file",
            USAGE,
        )
    dates: dict[datetime, list[tuple[Any, str]]] = {}
    infos: dict[datetime, Any] = {}
    for info, task, job_id in jobs:
        if info.logical_date is None:
            raise ActionError(
                f"DAG {dag.dag_id!r} has a partitioned timetable (runs without a logical date): a "
                "missing-only backfill works on dated intervals only; use `airflow backfill create`",
                USAGE,
            )
        dates.setdefault(info.logical_date, []).append((task, job_id))
        infos[info.logical_date] = info
    repeated = Counter(job_id for _, _, job_id in jobs)
    same = sorted(job_id for job_id, n in repeated.items() if n > 1)
    if same:
        raise ActionError(
            f"DAG {dag.dag_id!r}: job id {same[0]!r} stands for several dates (its job_id template does not "
            f"use the date), so the store cannot tell which dates are missing; {ADVICE} including the date "
            "(e.g. {{ ds }})",
            USAGE,
        )
    return [(infos[when], jobs) for when, jobs in sorted(dates.items())]


def read_dates(
    store: JobResultStore, dates: list[tuple[Any, list[tuple[Any, str]]]], *, batch_jobs: int = READ_CHUNK
) -> list[DatePlan]:
    """Each date's :class:`DatePlan`: one pipelined store read per batch of whole dates
    (at most ``batch_jobs`` jobs, at least one date)."""
    per_date = max(len(jobs) for _, jobs in dates)
    step = max(1, batch_jobs // per_date)
    plans = []
    for first in range(0, len(dates), step):
        chunk = dates[first : first + step]
        ids = [job_id for _, jobs in chunk for _, job_id in jobs]
        answers = store.read_many(ids)
        for info, jobs in chunk:
            interval = info.data_interval
            plan = DatePlan(info.logical_date, (interval.start, interval.end) if interval else None)
            for task, job_id in jobs:  # the fingerprint the dag-processor planned (plan_facts)
                _classify(plan, task, job_id, answers[job_id], task.fingerprint)
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
    at once; see the module docstring). Decided from the plan alone, so a preview says it."""
    return BACKFILL if len(todo) == 1 else RUNS


def plan_missing(store: JobResultStore, dag: Any, start: datetime, end: datetime) -> MissingPlan:
    """The preview: each date of ``dag`` from ``start`` to ``end`` as the store sees it, and the
    dates that need a run. Changes nothing."""
    if start > end:
        raise ActionError("the start date is after the end date; swap them", USAGE)
    plans = read_dates(store, derive(dag, start, end))
    return MissingPlan(dag.dag_id, plans, ranges(plans))


def vehicle(mode: str, dates: int) -> str:
    """What :func:`start_missing` creates, in words."""
    if mode == BACKFILL:
        return f"1 backfill for {plural(dates, 'date')}"
    return f"{plural(dates, 'run')} with their logical dates (run type manual, all at once)"


def start_missing(
    api: AirflowApi,
    plan: MissingPlan,
    started: Started,
    *,
    max_active_runs: int = 10,
    say: Callable[[str], None] | None = None,
) -> Started:
    """Create the runs :func:`plan_missing` found needed, through Airflow's REST API (as ``api``'s
    user: Airflow authorizes each call and writes its audit log). ``started`` is filled as runs
    are made, so a caller whose call fails midway can say what exists; ``say`` hears each step."""
    needed = plan.needed
    if not needed:
        return started
    api.check_dag(plan.dag_id)
    if started.how == BACKFILL:
        active = api.active_backfills(plan.dag_id)
        if active:
            started.how = RUNS  # Airflow runs one backfill per DAG: do not wait for that one
            note = (
                f"backfill {active[0]['id']} of {plan.dag_id} is still active (Airflow allows one per DAG): "
                "the dates get runs with their logical dates instead"
            )
            started.notes.append(note)
            if say:
                say(note)
    if started.how == BACKFILL:
        started.backfills.append(_create(api, plan.dag_id, needed, max_active_runs, say))
    else:
        _trigger(api, plan.dag_id, needed, started.runs, say)
    return started


def _create(
    api: AirflowApi, dag_id: str, group: list[DatePlan], max_active_runs: int, say: Callable[[str], None] | None
) -> dict[str, Any]:
    start, end = group[0].logical_date, group[-1].logical_date
    doc = api.create_backfill(dag_id, start, end, reprocess_behavior="completed", max_active_runs=max_active_runs)
    info = {"id": doc["id"], "from_date": start.isoformat(), "to_date": end.isoformat(), "dates": len(group)}
    if say:
        say(f"backfill {doc['id']}: {stamp(start)} to {stamp(end)} ({plural(len(group), 'date')})")
    return info


def _trigger(
    api: AirflowApi,
    dag_id: str,
    needed: list[DatePlan],
    out: list[dict[str, Any]],
    say: Callable[[str], None] | None,
) -> None:
    """One run per date, with its logical date and the timetable's data interval: a new one
    (``POST .../dagRuns``) where the date has no run, the existing run cleared where it ended
    (as a backfill with ``reprocess_behavior=completed`` does), left alone where it is queued or
    running (it runs anyway). All at once: the calls go out :data:`TRIGGER_CALLS` at a time, so
    the last date's run is queued about when a backfill's would be (a backfill creates its runs
    in one call), and the DAG's ``max_active_runs`` bounds how many run. ``out`` lists them by
    date; a call that fails leaves the runs made before it listed, then raises."""
    existing = runs_by_date(api, dag_id, needed)
    api.token()  # once, before the calls share it
    with ThreadPoolExecutor(max_workers=TRIGGER_CALLS, thread_name_prefix="jrs-trigger") as pool:
        futures = [
            pool.submit(_one_run, api, dag_id, plan, existing.get(plan.logical_date.timestamp())) for plan in needed
        ]
    failure: BaseException | None = None
    for plan, future in zip(needed, futures, strict=True):
        try:
            run_id, action = future.result()
        except BaseException as exc:  # the others' runs exist: list them, then raise the first failure
            failure = failure or exc
            continue
        out.append({"logical_date": plan.logical_date.isoformat(), "run_id": run_id, "action": action})
        if say:
            say(f"{stamp(plan.logical_date)}: run {run_id} {action}")
    if failure is not None:
        raise failure


def _one_run(api: AirflowApi, dag_id: str, plan: DatePlan, run: dict[str, Any] | None) -> tuple[str, str]:
    """The run of one date (:func:`_trigger`): its id and what was done to it."""
    action = ""
    if run is None:
        try:
            run, action = api.trigger_run(dag_id, plan.logical_date, plan.data_interval, note=NOTE), "triggered"
        except AirflowApiError as exc:
            # 409: the date has a run already (made since the plan was read). Timed out: the
            # server may have made it all the same; if not, one more POST (a second run of the
            # date cannot be made: Airflow answers 409).
            if exc.status != 409 and not exc.timed_out:
                raise
            run = runs_by_date(api, dag_id, [plan]).get(plan.logical_date.timestamp())
            if exc.timed_out:
                action = "triggered"  # by the POST that timed out, or else by this one
                run = run or api.trigger_run(dag_id, plan.logical_date, plan.data_interval, note=NOTE)
            elif run is None:
                raise
    if not action:
        if run.get("state") in TERMINAL:
            api.clear_run(dag_id, run["dag_run_id"])
            action = "cleared"
        else:
            action = "in flight"
    return run["dag_run_id"], action


def runs_by_date(api: AirflowApi, dag_id: str, plans: list[DatePlan]) -> dict[float, dict[str, Any]]:
    """The DAG's runs from the first to the last of ``plans``' dates, by logical date (a timestamp)."""
    runs = api.dag_runs(dag_id, plans[0].logical_date, plans[-1].logical_date)
    return {timestamp_of(r["logical_date"]): r for r in runs if r.get("logical_date")}


def timestamp_of(raw: str) -> float:
    """A logical date as Airflow's REST API writes it (``...Z``), as a timestamp."""
    return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
