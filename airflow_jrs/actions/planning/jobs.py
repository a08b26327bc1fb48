"""Where each job of a DAG's date range stands, and what a backfill would do with it.

A backfill with ``--reprocess-behavior completed`` creates a run for every interval in the
range; each guarded task (JrsSparkSubmitOperator, JrsPySparkOperator, ``@task.jrs_pyspark``,
JrsSparkSqlOperator and their start-in-triggerer variants) then asks the store and runs Spark
or not by the decision table (:mod:`airflow_jrs.domain.decision`). :func:`plan_range` asks the
same questions without running anything, so the cost of a backfill is known before it is paid:
``airflow-jrs plan`` prints it, ``forget --dag-id`` and recompute by dates act on it, the page's
calendar shows it. A run that exists already is run again with its conf (:mod:`.runs`): when
that conf asks to recompute (``jrs_recompute``), the task's own rule
(:func:`airflow_jrs.domain.recompute.verdict`: a request acts once) says "run" or "skip".
Fingerprints are the ones the dag-processor planned (:func:`~airflow_jrs.protocol.guarded_task.plan_facts`).
The job ids are :func:`.job_ids.job_ids`, read in one pipelined batch per 500 jobs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_jrs.actions.planning.dags import version_dag
from airflow_jrs.actions.planning.job_ids import job_ids
from airflow_jrs.actions.planning.runs import ExistingRun, existing_runs
from airflow_jrs.domain.decision import decide
from airflow_jrs.domain.recompute import read_request, verdict
from airflow_jrs.exceptions import (
    CorruptIntentError,
    CorruptJobResultError,
    JobResultEntryError,
    JobResultQuarantinedError,
    JrsConfigError,
)
from airflow_jrs.store import JobResultEntry
from airflow_jrs.store.leases.lease import LeaseHolder
from airflow_jrs.store.namespace import JobNamespace
from airflow_jrs.store.recompute_requests import RecomputeRequests
from airflow_jrs.store.results.base import Answer


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
    #: A SUCCEEDED result whose fingerprint differs from the one the task plans: it computes again.
    stale: bool = False
    #: ``False`` when the task's fingerprint is known only once it renders its arguments at run time.
    fingerprint_known: bool = True


def plan_range(
    jobs: JobNamespace, dag: Any, start: datetime, end: datetime, versions: Callable[[str], Any] | None = version_dag
) -> tuple[list[PlannedJob], list[str]]:
    """Every guarded job of ``dag`` from ``start`` to ``end`` (inclusive) in ``jobs``' namespace,
    where it stands and what a backfill would do with it; and notes on what the plan could not see."""
    runs, runs_note = existing_runs(dag.dag_id, start, end)
    found, notes = job_ids(dag, start, end, runs, versions)
    if runs_note:
        notes.append(runs_note)
    answers = jobs.results.read_many([job_id for _, _, job_id in found])  # one round trip per 500 jobs
    return plan_jobs(jobs, found, runs, answers, jobs.held_leases(), jobs.intents.list_intents()), notes


def plan_jobs(
    jobs: JobNamespace,
    found: Iterable[tuple[Any, Any, str]],
    runs: Mapping[float, ExistingRun],
    answers: Mapping[str, Answer],
    leases: Mapping[str, LeaseHolder],
    intents: Mapping[str, Any],
) -> list[PlannedJob]:
    """Where each of ``found`` (:func:`.job_ids.job_ids`) stands, from what was read of it:
    ``answers`` (:meth:`~airflow_jrs.store.results.base.JobResultStore.read_many`), the held leases and
    the intents. The one rule :func:`plan_range` and the page's kept calendar rows
    (:mod:`airflow_jrs.plugins.calendar`) both apply."""
    requests = jobs.recompute_requests
    planned = []
    for info, task, job_id in found:
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
        decision = decide(entry, task.fingerprint, accept_changed_fingerprint=task.accept_changed_fingerprint)
        logical = info.logical_date
        run = runs.get(logical.timestamp()) if logical is not None else None
        asked = _requested(requests, run, task.task_id, job_id, entry) if decision.skip and entry else None
        if asked is not None and asked[0] != "skip":
            action, reason = asked
        elif decision.skip:
            action, reason = "skip", decision.reason + (f"; {asked[1]}" if asked else "")
            if entry is not None and task.fingerprint is None and entry.result.fingerprint:
                reason += f"; may compute if its arguments changed ({task.fingerprint_why or 'fingerprint unknown'})"
        elif holder is not None:
            who = f"{holder.owner.get('host', '?')} pid {holder.owner.get('pid', '?')}"
            action, reason = "blocked", f"lease held by {who} (token {holder.token}): waits or fails, no second copy"
        else:
            action, reason = "run", "runs Spark: " + decision.reason
            if intent is not None and not isinstance(intent, CorruptIntentError):
                reason += f"; recovers fence {intent.fence}'s unfinished attempt first"
        result_status = entry.result.status.value if entry else None
        stale = status in ("committed", "dirty") and not decision.skip
        planned.append(_row(info, task, job_id, status, result_status, action, reason, entry, stale))
    return planned


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


def planned_date(info: Any) -> datetime | None:
    """The date a planned job is shown under: its run's logical date (a partitioned run's
    partition date, an asset-triggered run's time to run)."""
    when: datetime | None = info.logical_date or getattr(info, "partition_date", None) or info.run_after
    return when


def _row(
    info: Any,
    task: Any,
    job_id: str,
    status: str,
    result_status: str | None,
    action: str,
    reason: str,
    entry: JobResultEntry | None = None,
    stale: bool = False,
) -> PlannedJob:
    return PlannedJob(
        planned_date(info), task.task_id, job_id, status, result_status, action, reason, entry, task.map_index, stale,
        task.fingerprint is not None,
    )  # fmt: skip
