"""``plan``: what a backfill would compute, before anyone starts it; and the jobs of a date range.

A backfill with ``--reprocess-behavior completed`` creates a run for every interval in the
range; each guarded task (JrsSparkSubmitOperator, JrsPySparkOperator, ``@task.jrs_pyspark``,
JrsSparkSqlOperator and their start-in-triggerer variants) then asks the store and runs Spark
or not by the decision table (:mod:`airflow_jrs.domain.decision`). ``plan`` asks the same questions
without running anything, so the cost of a backfill is known before it is paid. A run that
exists already is run again with its conf: when that conf asks to recompute
(``jrs_recompute``), ``plan`` applies the task's own rule (:func:`airflow_jrs.domain.recompute.verdict`:
a request acts once) to say "run" or "skip", reading from Airflow's metadata DB which runs exist.

The guarded tasks are found by their marker (:mod:`airflow_jrs.protocol.guarded_task`), not
by importing operator classes. The job ids come from the DAG itself (loaded with Airflow's
DagBag) and the operators' own rule (:func:`airflow_jrs.domain.identity.job_id_for`): the default
id for tasks without ``job_id``; a templated ``job_id`` is rendered with the interval's
values (``ds``, ``ds_nodash``, ``ts``, ``logical_date``, ``data_interval_start``/``end``,
``dag``, ``task``, ``ti.dag_id``/``ti.task_id``, ``dag_id``, ``task_id``). A template needing
anything else (XCom, a Variable, a macro) is refused by name rather than guessed. A mapped task
whose DAG file says its expansion (``expand`` over literal lists) is planned per map index, as
the task each map index becomes (:mod:`airflow_jrs.cli.mapped`); one expanded over another task's
output (or in a mapped group) is left out, and named: only a run knows its map indexes.
Fingerprints follow each kind's rule
(:func:`~airflow_jrs.protocol.guarded_task.planned_fingerprint`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from dataclasses import dataclass
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from airflow_jrs.cli.common import NOT_FOUND, OK, USAGE, CliError, Ctx, stamp
from airflow_jrs.cli.mapped import is_mapped, map_index_of, planned_map_indexes
from airflow_jrs.domain.decision import decide
from airflow_jrs.domain.identity import job_id_for
from airflow_jrs.domain.recompute import RECOMPUTE_KEY, read_request, verdict
from airflow_jrs.exceptions import (
    CorruptIntentError,
    CorruptJobResultError,
    JobResultEntryError,
    JobResultQuarantinedError,
    JrsConfigError,
)
from airflow_jrs.protocol.guarded_task import guarded_kind, is_templated, planned_fingerprint
from airflow_jrs.store import JobResultEntry
from airflow_jrs.store.recompute_requests import RecomputeRequests
from airflow_jrs.store.results.batch_read import read_entries

#: What the error for a DAG without one names (the marker, not this list, decides what counts).
GUARDED_OPERATORS = "JrsSparkSubmitOperator, JrsPySparkOperator, @task.jrs_pyspark, JrsSparkSqlOperator"
RENDERABLE = "ds, ds_nodash, ts, ts_nodash, logical_date, data_interval_start/end, dag, task, ti, dag_id, task_id"


@dataclass(frozen=True)
class PlannedJob:
    """One job of one interval: where it stands and what a backfill would do with it."""

    logical_date: datetime | None
    task_id: str
    job_id: str
    status: str  # committed | dirty | failed | running | missing | quarantined | unreadable
    result_status: str | None
    backfill: str  # skip | run | blocked
    reason: str
    entry: JobResultEntry | None = None
    map_index: int = -1  # the task's map index for a mapped task


def load_dag(dag_id: str, dags_folder: str | None) -> Any:
    """The DAG ``dag_id`` parsed from ``dags_folder`` (default ``[core] dags_folder``)."""
    from airflow.configuration import conf

    from airflow_jrs.compat import dag_bag

    folder = dags_folder or conf.get("core", "dags_folder")
    if not folder or not os.path.exists(folder):
        raise CliError(f"dags folder {folder!r} does not exist; pass --dags-folder PATH", USAGE)
    # Airflow logs "Filling up the DagBag" to stdout, where it would corrupt --json: only warnings, on stderr.
    quiet = logging.getLogger("airflow.dag_processing.dagbag")
    level = quiet.level
    quiet.setLevel(logging.WARNING)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            bag = dag_bag(folder)
    finally:
        quiet.setLevel(level)
    dag = bag.dags.get(dag_id)
    if dag is None:
        known = ", ".join(sorted(bag.dags)[:10]) or "none"
        errors = f"; {len(bag.import_errors)} files failed to import" if bag.import_errors else ""
        raise CliError(f"DAG {dag_id!r} is not in {folder} (found: {known}{errors}); check --dag-id", NOT_FOUND)
    return dag


def _intervals(dag: Any, start: datetime, end: datetime) -> list[Any]:
    """The DAG's runs between ``start`` and ``end`` (inclusive), as its timetable makes them."""
    from airflow.timetables.base import TimeRestriction

    from airflow_jrs.compat import AIRFLOW_VERSION_TEXT, core_timetable, next_dagrun_info

    timetable = core_timetable(dag)
    if getattr(timetable, "partitioned", False):
        if not hasattr(timetable, "iter_partition_dagrun_infos"):
            raise CliError(
                f"DAG {dag.dag_id!r} has a partitioned timetable, and listing its partitions needs Airflow 3.3 "
                f"or later (this is Airflow {AIRFLOW_VERSION_TEXT}); upgrade Airflow to plan it",
                USAGE,
            )
        return list(timetable.iter_partition_dagrun_infos(earliest=start, latest=end))
    import pendulum

    restriction = TimeRestriction(pendulum.instance(start), pendulum.instance(end), catchup=True)
    infos, info = [], None
    while (info := next_dagrun_info(timetable, info, restriction)) is not None:
        infos.append(info)
    return infos


def _render(
    template: str, dag: Any, task: Any, info: Any, compiled: dict[str, Any] | None = None, map_index: int = -1
) -> str:
    """``template`` rendered for one interval. ``compiled`` caches the compiled template across
    intervals: compiling is 5 ms a job, so ten years of ten jobs would spend minutes on it."""
    import jinja2

    logical = info.logical_date
    interval = info.data_interval
    context: dict[str, Any] = {
        "dag": dag,
        "task": task,
        "ti": SimpleNamespace(dag_id=dag.dag_id, task_id=task.task_id, map_index=map_index),
        "dag_id": dag.dag_id,
        "task_id": task.task_id,
        "logical_date": logical,
        "data_interval_start": interval.start if interval else None,
        "data_interval_end": interval.end if interval else None,
    }
    if logical is not None:
        context |= {
            "ds": logical.strftime("%Y-%m-%d"),
            "ds_nodash": logical.strftime("%Y%m%d"),
            "ts": logical.isoformat(),
            "ts_nodash": logical.strftime("%Y%m%dT%H%M%S"),
        }
    if compiled is None:
        compiled = {}
    if template not in compiled:
        env = dag.get_template_env().overlay(undefined=jinja2.StrictUndefined)
        compiled[template] = env.from_string(template)
    try:
        return str(compiled[template].render(**context))
    except jinja2.UndefinedError as exc:
        raise CliError(
            f"task {task.task_id!r}: its job_id template {template!r} uses something plan cannot render "
            f"({exc.message}); plan renders {RENDERABLE}",
            USAGE,
        ) from None


def guarded_tasks(dag: Any) -> tuple[list[Any], list[str]]:
    """The DAG's guarded tasks (:mod:`airflow_jrs.protocol.guarded_task`: whatever runs Spark
    through the job result store, operators and ``@task.jrs_pyspark`` alike; a mapped one as one
    task per map index when its DAG file says its expansion), and the task ids of the mapped ones
    only a run can expand, which are left out. Asks the marker, not the operator classes."""
    tasks, mapped = [], []
    for task in dag.tasks:
        if not is_mapped(task):
            if guarded_kind(task):
                tasks.append(task)
        elif guarded_kind(getattr(task, "operator_class", None)) or guarded_kind(task):
            per_index = planned_map_indexes(task)
            if per_index is None:
                mapped.append(task.task_id)
            else:
                tasks.extend(per_index)
    return tasks, mapped


def job_ids(
    dag: Any, start: datetime, end: datetime, runs: dict[float, ExistingRun] | None = None
) -> tuple[list[tuple[Any, Any, str]], list[str]]:
    """``(interval, task, job id)`` for every guarded task and interval, and notes. An interval
    whose date has a run in ``runs`` (:func:`existing_runs`) is seen with that run's data interval
    (:func:`_as_run`): a backfill runs it again as it is, so its tasks render with it."""
    notes: list[str] = []
    tasks, mapped = guarded_tasks(dag)
    if mapped:
        notes.append(
            f"left out mapped tasks {mapped}: expanded over another task's output (or in a mapped group), their "
            "job ids depend on the run's expansion"
        )
    if not tasks:
        raise CliError(
            f"DAG {dag.dag_id!r} has no guarded task ({GUARDED_OPERATORS}){' besides mapped ones' if mapped else ''}; "
            "nothing to plan",
            NOT_FOUND,
        )
    infos = [_as_run(info, runs) for info in _intervals(dag, start, end)]
    if not infos:
        raise CliError(
            f"DAG {dag.dag_id!r} has no scheduled run between {stamp(start)} and {stamp(end)} "
            "(no schedule, or outside its start/end date); check the dates",
            NOT_FOUND,
        )
    out = []
    compiled: dict[str, Any] = {}
    for info in infos:
        for task in tasks:
            template, index = task.job_id, map_index_of(task)
            rendered = _render(template, dag, task, info, compiled, index) if is_templated(template) else template
            interval = info.data_interval
            context = {
                "ti": SimpleNamespace(dag_id=dag.dag_id, task_id=task.task_id, map_index=index),
                "partition_key": getattr(info, "partition_key", None),
                "data_interval_start": interval.start if interval else None,
                "logical_date": info.logical_date,
                "run_id": f"backfill__{info.run_after.isoformat()}",
            }
            out.append((info, task, job_id_for(rendered, context)))
    _one_job_per_map_index(out)
    return out, notes


def _one_job_per_map_index(jobs: list[tuple[Any, Any, str]]) -> None:
    """Refuse a mapped task whose map indexes of one date share a job id (a ``job_id`` without the
    map index): at run time all but one would skip on the first one's result."""
    seen: dict[tuple[int, str, str], int] = {}
    for info, task, job_id in jobs:
        index = map_index_of(task)
        if index < 0:
            continue
        first = seen.setdefault((id(info), task.task_id, job_id), index)
        if first != index:
            raise CliError(
                f"task {task.task_id!r} is mapped, and its map indexes {first} and {index} both have job id "
                f"{job_id!r}: all but one would skip on the first one's result. Leave job_id unset (the "
                "default ends in .map-<index>) or name the map index in it ({{ ti.map_index }})",
                USAGE,
            )


def _fingerprint(task: Any) -> str | None:
    """The task's fingerprint when it does not depend on templating; ``None`` (counts as the same
    job, as the decision table says for unknown fingerprints) otherwise."""
    return planned_fingerprint(task)


@dataclass(frozen=True)
class ExistingRun:
    """A DAG run a backfill with ``--reprocess-behavior completed`` would run again, conf and all."""

    run_id: str
    conf: Any
    #: ``(start, end)`` as Airflow stored it: a run triggered by hand has one of its own (the
    #: trigger time's, or one ending at its logical date), which a backfill keeps when it re-runs it.
    data_interval: tuple[datetime, datetime] | None = None


def _as_run(info: Any, runs: dict[float, ExistingRun] | None) -> Any:
    """``info`` (a timetable's ``DagRunInfo``) with the data interval of the run that exists at
    its logical date, if any: what that run's ``data_interval_start``/``end`` templates render.
    The default job id reads the logical date (:func:`airflow_jrs.domain.identity.run_key`), the
    same either way."""
    run = runs.get(info.logical_date.timestamp()) if runs and info.logical_date is not None else None
    if run is None or run.data_interval is None or info.data_interval is None:
        return info
    import pendulum
    from airflow.timetables.base import DataInterval

    start, end = run.data_interval
    # Not info._replace(): DagRunInfo.logical_date is a property, its data interval's start.
    return SimpleNamespace(
        logical_date=info.logical_date,
        data_interval=DataInterval(pendulum.instance(start), pendulum.instance(end)),
        run_after=info.run_after,
        partition_key=getattr(info, "partition_key", None),
        partition_date=getattr(info, "partition_date", None),
    )


def existing_runs(dag_id: str, start: datetime, end: datetime) -> tuple[dict[float, ExistingRun], str | None]:
    """The DAG's runs in the range from Airflow's metadata DB, by logical date (a timestamp),
    and a note when the DB cannot be read (the plan then shows what a run without conf does)."""
    try:
        from airflow.configuration import conf
        from airflow.models.dagrun import DagRun
        from airflow.utils.session import create_session
        from sqlalchemy import select
        from sqlalchemy.engine import make_url

        url = make_url(conf.get("database", "sql_alchemy_conn"))
        if url.get_backend_name() == "sqlite" and url.database and not os.path.exists(url.database):
            raise FileNotFoundError(f"no metadata DB at {url.database}")  # connecting would create an empty one
        with create_session() as session:
            rows = session.execute(
                select(
                    DagRun.logical_date,
                    DagRun.run_id,
                    DagRun.conf,
                    DagRun.data_interval_start,
                    DagRun.data_interval_end,
                ).where(DagRun.dag_id == dag_id, DagRun.logical_date >= start, DagRun.logical_date <= end)
            ).all()
    except Exception as exc:  # a plan is a preview: say what it could not see, and go on
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        return {}, (
            f"could not read the DAG's runs from Airflow's metadata DB ({type(exc).__name__}: {first}); "
            f"runs whose conf asks to recompute ({RECOMPUTE_KEY}) are not taken into account"
        )
    return {
        row.logical_date.timestamp(): ExistingRun(
            row.run_id, row.conf, (row.data_interval_start, row.data_interval_end) if row.data_interval_start else None
        )
        for row in rows
        if row.logical_date
    }, None


def _requested(
    requests: RecomputeRequests, run: ExistingRun | None, task_id: str, job_id: str, entry: JobResultEntry
) -> tuple[str, str] | None:
    """``(backfill action, why)`` for a SUCCEEDED entry when the run's conf asks to recompute
    the job: the rule the task applies (:func:`airflow_jrs.domain.recompute.verdict`), read-only."""
    if run is None:
        return None
    try:
        request = read_request(run.conf if isinstance(run.conf, dict) else None)
    except JrsConfigError as exc:
        return "blocked", f"run {run.run_id}: {exc}; its task fails without retries"
    if request is None or not request.names_job(task_id, job_id):
        return None
    first_seen = requests.seen(job_id, run.run_id) if request.at is None else None
    found = verdict(request, task_id=task_id, job_id=job_id, entry=entry, first_seen=first_seen)
    if found.recompute:
        return "run", f"runs Spark (recompute): run {run.run_id}: {found.reason}"
    return "skip", f"run {run.run_id}: {found.reason}"


def plan_jobs(ctx: Ctx, dag: Any, start: datetime, end: datetime) -> tuple[list[PlannedJob], list[str]]:
    runs, runs_note = existing_runs(dag.dag_id, start, end)
    jobs, notes = job_ids(dag, start, end, runs)
    store = ctx.store
    if runs_note:
        notes.append(runs_note)
    requests = ctx.jobs.recompute_requests
    leases = ctx.jobs.held_leases()
    intents = ctx.jobs.intents.list_intents()
    fingerprints = {id(task): _fingerprint(task) for _, task, _ in jobs}  # one per map index of a mapped task
    planned = []
    answers = read_entries(store, [job_id for _, _, job_id in jobs])  # one round trip per 500 jobs
    for info, task, job_id in jobs:
        holder = leases.get(job_id)
        intent = intents.get(job_id)
        entry = answers[job_id]
        if isinstance(entry, (CorruptJobResultError, JobResultQuarantinedError)):
            planned.append(_row(info, task, job_id, "quarantined", None, "blocked", "entry in quarantine: fails"))
            continue
        if isinstance(entry, JobResultEntryError):  # a newer schema version
            planned.append(_row(info, task, job_id, "unreadable", None, "blocked", "written by a newer airflow-jrs"))
            continue
        if entry is None:
            status = "running" if holder is not None else "missing"
        elif entry.result.status.is_success:
            status = "committed" if entry.is_clean else "dirty"
        else:
            status = "failed"
        decision = decide(entry, fingerprints[id(task)], accept_changed_fingerprint=task.accept_changed_fingerprint)
        logical = info.logical_date
        run = runs.get(logical.timestamp()) if logical is not None else None
        asked = _requested(requests, run, task.task_id, job_id, entry) if decision.skip and entry else None
        if asked is not None and asked[0] != "skip":
            action, reason = asked
        elif decision.skip:
            action, reason = "skip", decision.reason + (f"; {asked[1]}" if asked else "")
        elif holder is not None:
            who = f"{holder.owner.get('host', '?')} pid {holder.owner.get('pid', '?')}"
            action, reason = "blocked", f"lease held by {who} (token {holder.token}): waits or fails, no second copy"
        else:
            action, reason = "run", "runs Spark: " + decision.reason
            if intent is not None and not isinstance(intent, CorruptIntentError):
                reason += f"; recovers fence {intent.fence}'s unfinished attempt first"
        result_status = entry.result.status.value if entry else None
        planned.append(_row(info, task, job_id, status, result_status, action, reason, entry))
    return planned, notes


def _row(
    info: Any,
    task: Any,
    job_id: str,
    status: str,
    result_status: str | None,
    action: str,
    reason: str,
    entry: JobResultEntry | None = None,
) -> PlannedJob:
    when = info.logical_date or getattr(info, "partition_date", None) or info.run_after
    return PlannedJob(when, task.task_id, job_id, status, result_status, action, reason, entry, map_index_of(task))


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
