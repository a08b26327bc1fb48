"""Recompute: the one way to compute given jobs or dates again, now, through Airflow.

For each job: forget its result (it goes to the job's history, naming who recomputed it), then
clear its task instance through Airflow's REST API (:mod:`airflow_jrs.actions.airflow_api`), as
the UI's Clear does: the run is queued again, the task finds no result and runs Spark, its
cleanup runs after it. No conf is involved, so nothing lingers on the run: a later retry, clear
or backfill of that date reuses the new result. ``airflow-jrs recompute`` and the Job results
page (one job, or a DAG's date range) call these same functions.

A job whose lease is held is running now: it is left alone (its result will be new). A job
whose result changed between the preview and the forget is left alone too (look again).

The clear includes downstream tasks, so guarded tasks after a recomputed one run again too and
may recompute their own jobs: the preview asks Airflow which task instances the clear clears (the
same call as a dry run) and applies the rule of :func:`airflow_jrs.domain.recompute.knock_on` to
them (:func:`add_downstream`), so it lists every job the recompute will compute, and why.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow_jrs.actions import NOT_FOUND, USAGE, ActionError
from airflow_jrs.actions.airflow_api import AirflowApi, AirflowApiError
from airflow_jrs.actions.planning.jobs import plan_range
from airflow_jrs.actions.planning.serialized import NEEDS_DAG_FILE, is_guarded, run_time_mapped
from airflow_jrs.domain.model import Actor, HistoryReason, JobResult
from airflow_jrs.domain.recompute import ClearedJob, knock_on
from airflow_jrs.exceptions import JobResultEntryChangedError, JobResultEntryError, NoSuchJobResultError
from airflow_jrs.store import JobResultEntry, JobResultStore
from airflow_jrs.views.job import job_dag

if TYPE_CHECKING:
    from airflow_jrs.store.namespace import JobNamespace


@dataclass
class Target:
    """One job to recompute: its result (if any) and the task instance that computes it again."""

    job_id: str
    entry: JobResultEntry | None
    dag_id: str | None = None
    run_id: str | None = None
    task_id: str | None = None
    map_index: int = -1
    note: str = ""  # why it is left alone, or what happens instead of a clear
    left_alone: bool = False  # running now, or changed since the preview: neither forgotten nor cleared
    forgotten: bool = False
    cleared: bool = False
    #: Not asked for: a guarded task after a recomputed one, cleared with it, that recomputes too.
    downstream: bool = False

    @property
    def clears(self) -> str:
        return f"{self.run_id} / {self.task_id}" if self.run_id else "-"

    def json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "dag_id": self.dag_id,
            "run_id": self.run_id,
            "task_id": self.task_id,
            "had_result": self.entry is not None,
            "forgotten": self.forgotten,
            "cleared": self.cleared,
            "downstream": self.downstream,
            "note": self.note,
        }


def by_job_ids(store: JobResultStore, job_ids: Sequence[str], where: str) -> list[Target]:
    """The targets of job ids: each clears the task instance its result names. ``where`` names
    the namespace (and server) in the words of a job that has no result."""
    targets = []
    for job_id in job_ids:
        try:
            entry = store.get_entry(job_id)
            # a clean reference names no task instance: its result document does (a missing one
            # is an error naming its path and the fix)
            written = store.full_entry(entry) if entry is not None else None
        except JobResultEntryError as exc:
            raise ActionError(f"job {job_id}: {exc}", USAGE) from None
        if entry is None or written is None:
            raise ActionError(
                f"job {job_id!r} has no result in {where}, so its task instance is unknown; give "
                "--dag-id with --from-date and --to-date to clear the runs of those dates instead",
                NOT_FOUND,
            )
        a = written.result.attempt
        if a is None:
            targets.append(Target(job_id, entry, note="its result names no task instance: the next run computes it"))
        else:
            targets.append(Target(job_id, entry, a.dag_id, a.run_id, a.task_id, a.map_index))
    return targets


def by_dates(
    jobs: JobNamespace,
    api: AirflowApi | None,
    dag: Any,
    start: datetime,
    end: datetime,
    task_ids: Sequence[str] | None = None,
) -> list[Target]:
    """The targets of a DAG's date range: every guarded job (of ``task_ids`` only, when given),
    each clearing the run of its date. ``api`` ``None``: a preview that cannot ask Airflow for run
    ids (no credentials), whose targets name none."""
    dag_id = dag.dag_id
    if start > end:
        raise ActionError(
            "the start date is after the end date", USAGE, cli="swap --from-date and --to-date", ui="swap them"
        )
    left_out = run_time_mapped(dag, list(task_ids) if task_ids else None)
    if left_out:  # never recompute a date's other jobs and silently not these
        raise ActionError(
            f"DAG {dag_id!r}: mapped tasks {left_out} are expanded over another task's output (or in a mapped "
            "group), so their jobs are known only in a run",
            USAGE,
            cli=f"recompute them by job id (airflow-jrs recompute {dag_id}.<task>.<date>.map-<index> ...), or "
            "leave them out with --task",
            ui="recompute them one job at a time from the Job results list, or leave them out of the tasks chosen",
        )
    planned, notes = plan_range(jobs, dag, start, end)
    unknown = [n for n in notes if NEEDS_DAG_FILE in n and (not task_ids or any(f"task {t!r}" in n for t in task_ids))]
    if unknown:  # never recompute a date's other jobs and silently not these
        raise ActionError(
            f"DAG {dag_id!r}: {unknown[0]}",
            USAGE,
            cli="recompute that task's jobs by job id, or leave it out with --task",
            ui="recompute that task's jobs one at a time from the Job results list, or leave it out of the "
            "tasks chosen",
        )
    if task_ids:
        unknown = sorted(set(task_ids) - {p.task_id for p in planned})
        if unknown:
            raise ActionError(
                f"DAG {dag_id!r} has no guarded Spark task named {unknown}",
                USAGE,
                cli="check --task",
                ui="choose tasks among the calendar's columns",
            )
        planned = [p for p in planned if p.task_id in task_ids]
    runs: dict[float, str] = {}
    if api is not None:
        runs = {_ts(r.get("logical_date")): r["dag_run_id"] for r in api.dag_runs(dag_id, start, end)}
    targets = []
    for p in planned:
        run_id = runs.get(p.logical_date.timestamp()) if p.logical_date else None
        note = "" if run_id else "no run of this date yet: its first run computes it"
        targets.append(Target(p.job_id, p.entry, dag_id, run_id, p.task_id, p.map_index, note=note))
    return targets


def _ts(raw: Any) -> float:
    return datetime.fromisoformat(str(raw).replace("Z", "+00:00")).timestamp() if raw else float("nan")


def _written(store: JobResultStore, entry: JobResultEntry | None) -> JobResult | None:
    """The full result of ``entry`` (a clean reference's outputs are in its document)."""
    if entry is None:
        return None
    try:
        return store.full_entry(entry).result
    except JobResultEntryError:
        return entry.result


def _guarded_ids(dag_id: str, dag: Any) -> set[str] | None:
    """The guarded task ids of ``dag_id`` from its serialized DAG (``dag`` when it is that DAG,
    else the metadata DB's latest version); ``None`` when no serialized DAG can be read here."""
    if dag is None or getattr(dag, "dag_id", None) != dag_id:
        try:
            from airflow_jrs.actions.planning.dags import find_dag

            dag = find_dag(dag_id)
        except Exception:  # no metadata DB here (a CLI elsewhere), or the DAG is gone
            return None
    return {t.task_id for t in dag.tasks if is_guarded(t)}


def add_downstream(store: JobResultStore, api: AirflowApi, targets: list[Target], dag: Any = None) -> list[str]:
    """The downstream jobs the clear recomputes too (appended to ``targets``), and notes: the
    task instances Airflow's dry run of the same clear names, judged by
    :func:`~airflow_jrs.domain.recompute.knock_on`.

    Which cleared tasks are guarded is read from the serialized DAG (a ``@task.jrs_pyspark``
    task too); their arguments from the dry run's rendered fields, else from the task
    instance's own (Airflow 3.2 returns none in a dry run). A guarded task whose arguments
    cannot be seen, but whose job has a successful result, is listed as "may compute", with why:
    a preview never counts fewer Spark launches than the recompute makes."""
    runs = by_run(targets)
    if not runs:
        return []
    if not api.has_credentials:
        return [
            "the clear includes downstream tasks, which may recompute their jobs too: without credentials for "
            "Airflow's API this preview cannot ask which ones (set AIRFLOW_JRS_API_TOKEN, or "
            "AIRFLOW_JRS_API_USERNAME and AIRFLOW_JRS_API_PASSWORD)"
        ]
    recomputed = {t.job_id: _written(store, t.entry) for t in targets}
    notes = []
    for (dag_id, run_id), group in runs.items():
        asked = {(t.task_id, t.map_index) for t in group}
        try:
            cleared = api.clear(dag_id, run_id, task_markers(group), dry_run=True)
        except AirflowApiError as exc:
            if exc.status != 404:
                raise
            # the run that wrote the result is gone (deleted to run its date anew): nothing is
            # cleared there, and the preview says so instead of listing nothing downstream
            notes.append(f"run {run_id} of {dag_id} is gone from Airflow: nothing is cleared there, so no downstream "
                         "job recomputes with it; recompute the date instead (--dag-id with --from-date and "
                         "--to-date) to clear the run it has now")  # fmt: skip
            continue
        jobs: list[ClearedJob] = []
        guarded = _guarded_ids(dag_id, dag)
        for ti in cleared:
            task_id, map_index = str(ti.get("task_id")), int(ti.get("map_index", -1))
            fields = ti.get("rendered_fields") or {}
            if (task_id, map_index) in asked:
                continue
            if (task_id not in guarded) if guarded is not None else ("job_id" not in fields):
                continue  # not a guarded task
            if not fields:
                fields = api.rendered_fields(dag_id, run_id, task_id, map_index)
            payload = api.xcom(dag_id, run_id, task_id, map_index)
            if not isinstance(payload, dict) or "job_id" not in payload:
                notes.append(f"{task_id} in run {run_id} is cleared too and runs again; it handed no job result "
                             "downstream yet, so which job it computes is known only when it runs")  # fmt: skip
                continue
            job_id = str(payload["job_id"])
            entry = store.get_entry(job_id)
            result = _written(store, entry)
            if not fields and result is not None and result.status.is_success:
                targets.append(Target(job_id, entry, dag_id, run_id, task_id, map_index, downstream=True,
                                      note="may compute: cleared with the recomputed jobs, and Airflow gave none of "
                                      "its rendered arguments, so whether they carry a recomputed job's output "
                                      "cannot be seen"))  # fmt: skip
                continue
            text = json.dumps(fields, sort_keys=True, default=str)
            jobs.append(ClearedJob(task_id, job_id, text, result, map_index))
        for found in knock_on(recomputed, jobs):
            if found.recompute:
                t = Target(found.job.job_id, store.get_entry(found.job.job_id), dag_id, run_id, found.job.task_id,
                           found.job.map_index, note=found.reason, downstream=True)  # fmt: skip
                targets.append(t)
            else:
                notes.append(f"{found.job.job_id}: {found.reason}")
    return notes


def by_run(targets: list[Target]) -> dict[tuple[str, str], list[Target]]:
    """The targets whose task instance is cleared, by run."""
    runs: dict[tuple[str, str], list[Target]] = defaultdict(list)
    for t in targets:
        if t.dag_id and t.run_id and t.task_id and not t.left_alone and not t.downstream:
            runs[(t.dag_id, t.run_id)].append(t)
    return runs


def task_markers(group: list[Target]) -> list[Any]:
    """The ``task_ids`` of a clear: plain ids for unmapped tasks, ``[task_id, map_index]`` for mapped ones."""
    task_ids: list[Any] = sorted({t.task_id for t in group if t.map_index == -1 and t.task_id})
    return task_ids + [[t.task_id, t.map_index] for t in group if t.map_index != -1]


def leave_running_alone(jobs: JobNamespace, targets: list[Target]) -> None:
    """Mark the targets whose lease is held: running now, their result will be new."""
    for t in targets:
        holder = jobs.lease(t.job_id).peek()
        if holder is not None:
            who = f"{holder.owner.get('host', '?')} pid {holder.owner.get('pid', '?')}"
            t.note, t.left_alone = f"running now (lease held by {who}): left alone, its result will be new", True


def leave_foreign_alone(store: JobResultStore, targets: list[Target], may_edit: Callable[[str | None], bool]) -> None:
    """Mark the targets whose result another DAG wrote (a job id shared across DAGs) that the
    person may not edit (``may_edit(dag_id)``; ``None``: a result naming no DAG, which needs
    every DAG): forgetting it would act on that DAG's result without its right."""
    for t in targets:
        if t.entry is None or t.left_alone:
            continue
        writer = job_dag(store, t.entry)
        if writer == t.dag_id or may_edit(writer):
            continue
        whose = f"DAG {writer!r}" if writer else "no DAG (editing it needs every DAG)"
        t.note = f"its result was written by {whose}, which you may not edit: left alone, neither forgotten nor cleared"
        t.left_alone = True


def preview(
    jobs: JobNamespace, api: AirflowApi, targets: list[Target], *, dag: Any = None, may_clear: bool = True
) -> list[str]:
    """Complete ``targets`` into what a recompute would do: the running ones left alone, the
    downstream jobs added; returns the notes. Changes nothing.

    ``may_clear`` ``False`` (a viewer on the page): Airflow's dry run of the clear needs the right
    to clear, so it is not asked; the guarded tasks downstream in ``dag`` are named in a note
    instead, without saying which of their jobs would recompute."""
    leave_running_alone(jobs, targets)
    if not may_clear:
        return downstream_by_structure(dag, targets)
    return add_downstream(jobs.results, api, targets, dag)


def downstream_by_structure(dag: Any, targets: list[Target]) -> list[str]:
    """A note naming the guarded tasks downstream of the targets' tasks in ``dag`` (its
    structure, without asking Airflow): the clear runs them again too."""
    asked = {t.task_id for t in targets if t.task_id and not t.left_alone}
    if dag is None or not asked or not by_run(targets):
        return []
    after: set[str] = set()
    for task_id in asked:
        if dag.has_task(task_id):
            after |= set(dag.get_task(task_id).get_flat_relative_ids(upstream=False))
    guarded = sorted(t for t in after - asked if dag.has_task(t) and is_guarded(dag.get_task(t)))
    if not guarded:
        return []
    return [f"the clear runs the guarded tasks downstream again too ({', '.join(guarded)}); each recomputes its job "
            "when its input changed. Which ones do is listed only for a user who may edit the DAG (Airflow's "
            "dry run of a clear needs that right)"]  # fmt: skip


def apply(store: JobResultStore, api: AirflowApi, targets: list[Target], actor: Actor) -> None:
    """Recompute the previewed ``targets``: check Airflow answers for every DAG (before anything
    is forgotten), forget each result asked for (a compare-and-set on the entry previewed), clear
    the task instances. An :class:`AirflowApiError` midway leaves ``forgotten`` on the targets
    it forgot, for the caller to say."""
    for dag_id in sorted({t.dag_id for t in targets if t.dag_id and t.run_id and not t.left_alone}):
        api.check_dag(dag_id)  # reachable, credentials, the DAG: fail before anything is forgotten
    forget(store, targets, actor)
    clear(api, targets)


def forget(store: JobResultStore, targets: list[Target], actor: Actor) -> None:
    for t in targets:
        if t.entry is None or t.left_alone or t.downstream:  # a downstream job supersedes its own result
            continue
        try:
            store.forget_result(t.job_id, expected=t.entry, reason=HistoryReason.RECOMPUTED, actor=actor)
            t.forgotten = True
        except NoSuchJobResultError:
            t.forgotten = True  # gone meanwhile: the clear computes it all the same
        except JobResultEntryChangedError:
            t.note, t.left_alone = "its result changed since the preview (a new one?): left alone; look again", True


def clear(api: AirflowApi, targets: list[Target]) -> None:
    for (dag_id, run_id), group in by_run(targets).items():
        try:
            cleared = api.clear(dag_id, run_id, task_markers(group))
        except AirflowApiError as exc:
            if exc.status != 404:
                raise
            for t in group:
                t.note = f"run {run_id} is gone from Airflow: the next run of the date computes the job"
            continue
        for t in group:
            t.cleared = True
        done = {(str(ti.get("task_id")), int(ti.get("map_index", -1))) for ti in cleared}
        for t in targets:  # the downstream jobs the preview listed, cleared with them by Airflow
            if t.downstream and (t.dag_id, t.run_id) == (dag_id, run_id) and (t.task_id, t.map_index) in done:
                t.cleared = True
