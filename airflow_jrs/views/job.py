"""Everything known about a job, gathered once from its namespace.

The Job results page, its task-instance tab and ``airflow-jrs show`` all answer "where is this
job?". Each once gathered the answer itself and the copies drifted: the page showed a
quarantined entry as a problem where the CLI raised, and only one of them read the heartbeat.
:func:`inspect_job` gathers it here, Airflow-free, through
:class:`~airflow_jrs.protocol.JobNamespace` (nothing here touches a Redis client); how a view
reads as JSON is :mod:`airflow_jrs.views.json`, how it reads in a terminal is the CLI's.

A view is a snapshot of several keys read one after another, not a transaction: a job may
move between two reads (its lease released just after its entry was read). Every reader
shows what it read; none decides anything from a view (the protocol does, under the lease).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from airflow_jrs.domain.paths import control_path_of_output
from airflow_jrs.exceptions import CorruptIntentError, JobResultEntryError, ResultDocumentError
from airflow_jrs.store import JobResultEntry, JobResultStore
from airflow_jrs.store.heartbeats import Heartbeat
from airflow_jrs.store.intents import Intent
from airflow_jrs.store.leases.lease import LeaseHolder
from airflow_jrs.store.recoveries import RecoveryStep
from airflow_jrs.store.stop_requests import StopRequest, addresses
from airflow_jrs.views.holder import RUNNING, TASK_GONE, HolderState, holder_state

if TYPE_CHECKING:
    from airflow_jrs.store.namespace import JobNamespace


def entry_dag(entry: JobResultEntry | None) -> str | None:
    """The DAG of the attempt that wrote ``entry`` (what the UI authorizes a job against)."""
    attempt = entry.result.attempt if entry is not None else None
    return attempt.dag_id if attempt is not None else None


def job_dag(results: JobResultStore, entry: JobResultEntry | None) -> str | None:
    """:func:`entry_dag` of the full entry: a summary (a clean reference) names no attempt, so
    its document is read; ``None`` (every DAG's permission needed) when it cannot be."""
    return entry_dag(_with_document(results, entry) if entry is not None else None)


def lease_dag(holder: LeaseHolder | None) -> str | None:
    """The DAG the lease's holder names, for a job that has no entry yet."""
    dag_id = holder.owner.get("dag_id") if holder is not None else None
    return dag_id if isinstance(dag_id, str) else None


def verdict(intent: Intent | CorruptIntentError, holder: LeaseHolder | None, beat: Heartbeat | None) -> str:
    """What an intent means for the on-call engineer: running, its task gone while its Spark runs
    (:mod:`.holder`), or waiting for recovery."""
    if isinstance(intent, CorruptIntentError):
        return "unreadable intent: inspect it (see the error)"
    if holder is not None and holder.fence == intent.fence:  # identities: a failover can repeat a token
        now = holder_state(holder, beat)
        if now is None or now.state == RUNNING:
            return "running: its attempt holds the lease"
        supervisor = f"its supervisor (pid {now.supervisor_pid}) still runs Spark" if now.state == TASK_GONE else (
            "nothing of it runs")  # fmt: skip
        gone = "gone" if now.seen_gone else f"silent for {now.silent_s:g} s"
        return (
            f"task process {gone}, {supervisor}; lease expires in {now.expires_in_s:g} s: the task's retry takes "
            "it over at once and " + ("adopts the output if it finished" if now.state == TASK_GONE else "recovers")
        )
    if beat is not None and beat.running:
        return "spark-submit still running (heartbeat) without a lease: the next attempt waits or stops it"
    return "needs recovery: its attempt died; the job's next attempt adopts or recomputes"


@dataclass(frozen=True)
class JobView:
    """One job as the store knows it now."""

    job_id: str
    namespace: str
    entry: JobResultEntry | None
    #: Why the entry could not be read (quarantined, corrupt, a newer schema): shown, never
    #: hidden, and never taken for "no result" (that would mean the job may run again).
    problem: JobResultEntryError | None
    quarantined: bool
    #: Earlier entries, newest first, each with the note of why it moved there.
    history: list[JobResultEntry]
    holder: LeaseHolder | None
    intent: Intent | CorruptIntentError | None
    heartbeat: Heartbeat | None
    #: The last stop or cancel asked of the job (kept a day), for whichever attempt it named.
    stop_request: StopRequest | None
    #: What successors did about dead attempts of the job, newest first (which try died, what
    #: was found, waited for, stopped, adopted or submitted again; :mod:`~airflow_jrs.store.recoveries`).
    recoveries: list[RecoveryStep] = field(default_factory=list)

    @property
    def holder_state(self) -> HolderState | None:
        """What the lease's holder is doing now (:mod:`.holder`); ``None`` when nobody holds it."""
        return holder_state(self.holder, self.heartbeat)

    @property
    def streaming(self) -> bool | None:
        """Is the attempt in flight a stream (its staging is a stream's output folder, with a control
        folder beside it)? ``None`` without a readable intent."""
        if not isinstance(self.intent, Intent):
            return None
        return control_path_of_output(self.intent.staging) is not None

    @property
    def dag_id(self) -> str | None:
        """The DAG of the entry's attempt, else of the lease holder; ``None`` when neither names one."""
        return entry_dag(self.entry) or lease_dag(self.holder)

    @property
    def running(self) -> bool:
        """An attempt holds the lease, or a spark-submit it started still beats."""
        beating = isinstance(self.intent, Intent) and self.heartbeat is not None and self.heartbeat.running
        return self.holder is not None or beating

    @property
    def stop_pending(self) -> bool:
        """The stop request addresses the attempt in flight (its intent's fence; a person's bare token
        addresses whichever attempt holds it: :func:`~airflow_jrs.store.stop_requests.addresses`)."""
        r = self.stop_request
        return r is not None and isinstance(self.intent, Intent) and addresses(r.fence, self.intent.fence)

    @property
    def summary(self) -> str:
        """One word: the entry's state, else ``running``, ``forgotten`` (only history), ``missing``
        or ``unreadable`` (see :attr:`problem`)."""
        if self.entry is not None:
            return self.entry.state.value
        if self.problem is not None:
            return "unreadable"
        if self.running:
            return "running"
        return "forgotten" if self.history else "missing"

    @property
    def found(self) -> bool:
        """Anything to show beyond history: an entry (readable or not), an attempt or an intent."""
        return self.entry is not None or self.problem is not None or self.running or self.intent is not None


def _with_document(results: JobResultStore, item: JobResultEntry) -> JobResultEntry:
    """A history item with its full result when it keeps a reference (its document is
    immutable per fence, so still there); the summary when that document cannot be read."""
    if not item.summary:
        return item
    try:
        return results.full_entry(item)
    except ResultDocumentError:
        return item


def inspect_job(jobs: JobNamespace, job_id: str) -> JobView:
    """Everything known about ``job_id`` in ``jobs``' namespace. An unreadable entry is kept as
    :attr:`JobView.problem`; an unreachable store raises (fail closed, as every reader does)."""
    results = jobs.results
    entry: JobResultEntry | None = None
    problem: JobResultEntryError | None = None
    try:
        entry = results.get_entry(job_id)
    except JobResultEntryError as exc:
        problem = exc
    if entry is not None and entry.summary:
        # committed as a reference: the result a person reads is in its document; a missing
        # one is the problem shown (with where and the fix), beside what Redis holds
        try:
            entry = results.full_entry(entry)
        except ResultDocumentError as exc:
            problem = exc
    intent: Intent | CorruptIntentError | None
    try:
        intent = jobs.intents.get(job_id)
    except CorruptIntentError as exc:
        intent = exc
    return JobView(
        job_id=job_id,
        namespace=jobs.namespace,
        entry=entry,
        problem=problem,
        quarantined=job_id in results.get_quarantined(),
        history=[_with_document(results, item) for item in results.get_history(job_id)],
        holder=jobs.lease(job_id).peek(),
        intent=intent,
        heartbeat=jobs.heartbeats.get(job_id),
        stop_request=jobs.stop_requests.get(job_id),
        recoveries=jobs.recoveries.get(job_id),
    )


@dataclass(frozen=True)
class HeldLease:
    """A lease held now, with the intent of its job (what the attempt started, if anything yet)."""

    job_id: str
    holder: LeaseHolder
    intent: Intent | CorruptIntentError | None


def held_leases(jobs: JobNamespace) -> list[HeldLease]:
    """The namespace's held leases, by job id: who computes what."""
    held = jobs.held_leases()
    intents = jobs.intents.list_intents() if held else {}
    return [HeldLease(job_id, holder, intents.get(job_id)) for job_id, holder in sorted(held.items())]


@dataclass(frozen=True)
class InFlight:
    """A job's intent, with its lease holder and heartbeat: running, or waiting for recovery."""

    job_id: str
    intent: Intent | CorruptIntentError
    holder: LeaseHolder | None
    heartbeat: Heartbeat | None

    @property
    def verdict(self) -> str:
        return verdict(self.intent, self.holder, self.heartbeat)


def in_flight(jobs: JobNamespace) -> list[InFlight]:
    """Every intent of the namespace: the jobs in flight or needing recovery."""
    intents = jobs.intents.list_intents()
    held = jobs.held_leases() if intents else {}
    return [
        InFlight(job_id, intent, held.get(job_id), jobs.heartbeats.get(job_id))
        for job_id, intent in sorted(intents.items())
    ]
