"""What the store holds: job status, job result, entry state, and the job id rules.

A *job* is one unit of expensive Spark work, named by a stable job id (per data interval,
not per Airflow run). Its *result* is written once, when the job reaches a final state,
as a *dirty* entry; after its cleanup the entry turns *clean* (FLIP-194).
"""

from __future__ import annotations

import enum
import getpass
import re
import socket
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from airflow_jrs.exceptions import InvalidJobIdError

#: Job ids become part of Redis keys and log lines: a conservative charset keeps them
#: printable, shell-safe and free of ``{}`` (which would break Redis Cluster hash tags).
_JOB_ID_CHARS = r"A-Za-z0-9._:+=@/\-"
JOB_ID_PATTERN = re.compile(f"[{_JOB_ID_CHARS}]+")
#: One character a job id may not hold; :func:`sanitize_job_id_part` replaces each by ``_``.
JOB_ID_UNSAFE = re.compile(f"[^{_JOB_ID_CHARS}]")
JOB_ID_MAX_LENGTH = 200
NAMESPACE_PATTERN = re.compile(r"[A-Za-z0-9._\-]+")
NAMESPACE_MAX_LENGTH = 64


def validate_job_id(job_id: object) -> str:
    """Return ``job_id`` if it is a valid job id, else raise :class:`InvalidJobIdError`."""
    if not isinstance(job_id, str) or not job_id:
        raise InvalidJobIdError(f"job id must be a non-empty string, got {job_id!r}")
    if len(job_id) > JOB_ID_MAX_LENGTH:
        raise InvalidJobIdError(
            f"job id {job_id[:40]!r}... is {len(job_id)} characters; the limit is {JOB_ID_MAX_LENGTH}. "
            "Shorten it (a hash of long parts works)."
        )
    if not JOB_ID_PATTERN.fullmatch(job_id):
        bad = sorted({c for c in job_id if not JOB_ID_PATTERN.fullmatch(c)})
        raise InvalidJobIdError(f"job id {job_id!r} contains {bad!r}; allowed are letters, digits and . _ : + = @ / -")
    return job_id


def sanitize_job_id_part(part: str) -> str:
    """Replace characters a job id may not hold (``{}``, spaces, ...) by ``_``."""
    return JOB_ID_UNSAFE.sub("_", part)


def validate_namespace(namespace: object) -> str:
    """Return ``namespace`` if valid, else raise :class:`InvalidJobIdError`."""
    if (
        not isinstance(namespace, str)
        or not namespace
        or len(namespace) > NAMESPACE_MAX_LENGTH
        or not NAMESPACE_PATTERN.fullmatch(namespace)
    ):
        raise InvalidJobIdError(
            f"namespace {namespace!r} is invalid: use 1-{NAMESPACE_MAX_LENGTH} letters, digits, '.', '_' or '-'"
        )
    return namespace


class JobStatus(enum.StrEnum):
    """Final state of a job. Only ``SUCCEEDED`` makes later attempts skip the job."""

    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"
    STOPPED = "STOPPED"

    @property
    def is_success(self) -> bool:
        return self is JobStatus.SUCCEEDED


class EntryState(enum.StrEnum):
    """Where an entry is in its life: ``DIRTY`` until cleanup ran, then ``CLEAN``."""

    DIRTY = "dirty"
    CLEAN = "clean"


@dataclass(frozen=True)
class Attempt:
    """The Airflow task attempt that produced a result (for the on-call engineer, not for logic)."""

    dag_id: str
    task_id: str
    run_id: str
    try_number: int
    map_index: int = -1


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class JobResult:
    """The outcome of one job; ``JobResult(job_id="x", status=JobStatus.SUCCEEDED)`` is enough.

    ``outputs`` maps a logical name to a location (path or URL) that downstream tasks read;
    ``metrics`` holds small JSON-able numbers. Large things belong in the state backend, not here.
    """

    job_id: str
    status: JobStatus
    application_id: str | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    checkpoint_location: str | None = None
    fingerprint: str | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    attempt: Attempt | None = None
    fence: int | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        validate_job_id(self.job_id)
        if not isinstance(self.status, JobStatus):
            try:
                object.__setattr__(self, "status", JobStatus(self.status))
            except ValueError:
                raise ValueError(f"status {self.status!r} is not one of {[s.value for s in JobStatus]}") from None

    def with_fence(self, fence: int | None) -> JobResult:
        return replace(self, fence=fence)


class HistoryReason(enum.StrEnum):
    """Why an entry left the job's current slot for its history."""

    #: A person forgot it (``airflow-jrs forget``, the Job results page): the job runs again.
    FORGOTTEN = "forgotten"
    #: A DAG run asked to recompute it (``jrs_recompute``); the attempt forgot it under its lease.
    RECOMPUTED = "recomputed"
    #: A SUCCEEDED result of another fingerprint (changed code, args or ``job_version``) replaced it.
    SUPERSEDED = "superseded"
    #: It was FAILED, CANCELED or STOPPED, and a later attempt ran the job again.
    RERUN = "rerun"
    #: Committed and deleted (a store with ``delete_on_commit``).
    COMMITTED = "committed"
    #: Released from quarantine by a person (its bytes were unreadable).
    RELEASED = "released"


@dataclass(frozen=True)
class Actor:
    """Who moved an entry to history: a person at the UI or the CLI, or a task attempt.

    For the on-call engineer, never for logic. ``via`` is ``ui``, ``cli``, ``task`` or ``api``
    (a Python caller that said nothing else)."""

    via: str
    user: str | None = None
    host: str | None = None
    attempt: Attempt | None = None

    @classmethod
    def cli(cls) -> Actor:
        """The person at this terminal: login name and host."""
        try:
            user: str | None = getpass.getuser()
        except (KeyError, OSError):  # no login name (a container without a passwd entry)
            user = None
        return cls(via="cli", user=user, host=socket.gethostname())

    @classmethod
    def task(cls, attempt: Attempt | None) -> Actor:
        """The task attempt running here."""
        return cls(via="task", host=socket.gethostname(), attempt=attempt)

    def describe(self) -> str:
        """One line: ``admin (Airflow UI)``, ``alice@host1 (airflow-jrs CLI)``, ``dag.task run R try 2 on host1``."""
        a = self.attempt
        if a is not None:
            who = f"{a.dag_id}.{a.task_id} run {a.run_id} try {a.try_number}"
            if a.map_index != -1:
                who += f" map {a.map_index}"
        else:
            who = self.user or "someone"
            if self.host and self.via != "ui":
                who += f"@{self.host}"
        if self.via == "ui":
            return f"{who} (Airflow UI)"
        if self.via == "cli":
            return f"{who} (airflow-jrs CLI)"
        if self.via == "task" and self.host:
            return f"{who} on {self.host}"
        return who

    def to_json(self) -> dict[str, Any]:
        """The shape the CLI's ``--json`` and the UI's API show (one shape for both)."""
        a = self.attempt
        attempt = None if a is None else {"dag_id": a.dag_id, "task_id": a.task_id, "run_id": a.run_id,
                                          "try_number": a.try_number, "map_index": a.map_index}  # fmt: skip
        doc = {"via": self.via, "user": self.user, "host": self.host, "attempt": attempt}
        return {**{k: v for k, v in doc.items() if v is not None}, "text": self.describe()}


@dataclass(frozen=True)
class HistoryNote:
    """Why, when and by whom an entry moved to the job's history (serde: the entry's ``h`` member)."""

    reason: str  # a HistoryReason value; a newer airflow-jrs may write others
    moved_at: datetime | None = None
    actor: Actor | None = None

    def describe(self) -> str:
        """One line for people: ``forgotten by alice@host1 (airflow-jrs CLI)``."""
        return f"{self.reason} by {self.actor.describe()}" if self.actor is not None else self.reason

    def to_json(self) -> dict[str, Any]:
        """The shape the CLI's ``--json`` and the UI's API show (one shape for both)."""
        return {
            "reason": self.reason,
            "moved_at": self.moved_at.isoformat() if self.moved_at else None,
            "by": self.actor.to_json() if self.actor is not None else None,
        }


@dataclass(frozen=True)
class JobResultEntry:
    """A stored result plus its state; what readers get back.

    ``stored`` holds the bytes the entry was read from (or written as): what a compare-and-set
    on "the entry I read" compares (:meth:`~.base.JobResultStore.forget_result`). ``moved`` is
    set on entries read from a job's history (``None`` when an older airflow-jrs moved it).
    Neither takes part in equality: the same result is the same entry wherever it sits.

    ``summary`` is set on an entry read from a clean *reference* (format version 3, written
    only with ``[jrs] result_documents``): its result holds what the skip decision needs (the
    status, the fence, the creation time and the fingerprint's first 33 hex digits) and nothing
    else; the full result is in its result document, one read away
    (:meth:`~.base.JobResultStore.full_entry`)."""

    result: JobResult
    state: EntryState
    created_at: datetime | None = None
    stored: bytes | None = field(default=None, compare=False, repr=False)
    moved: HistoryNote | None = field(default=None, compare=False)
    summary: bool = False

    @property
    def job_id(self) -> str:
        return self.result.job_id

    @property
    def is_dirty(self) -> bool:
        return self.state is EntryState.DIRTY

    @property
    def is_clean(self) -> bool:
        return self.state is EntryState.CLEAN


@dataclass(frozen=True)
class EntryQuery:
    """Which entries a listing keeps (:meth:`~.base.JobResultStore.find_entries`); ``None`` keeps
    everything. ``dag_id`` matches the attempt that wrote the result, or (for results written
    without one) the job id's ``<dag_id>.`` prefix."""

    state: EntryState | None = None
    status: JobStatus | None = None
    dag_id: str | None = None
    prefix: str | None = None
    since: datetime | None = None
    #: Created strictly before this instant (what a retention purge would take).
    before: datetime | None = None

    def matches(self, entry: JobResultEntry) -> bool:
        if self.state is not None and entry.state is not self.state:
            return False
        if self.status is not None and entry.result.status is not self.status:
            return False
        if self.prefix is not None and not entry.job_id.startswith(self.prefix):
            return False
        if self.dag_id is not None:
            attempt = entry.result.attempt
            owner = attempt.dag_id if attempt is not None else None
            if owner != self.dag_id and not (owner is None and entry.job_id.startswith(self.dag_id + ".")):
                return False
        created = entry.created_at
        if self.before is not None and (created is None or created >= self.before):
            return False
        return not (self.since is not None and created is not None and created < self.since)
