"""What the store holds: job status, job result, entry state, and the job id rules.

A *job* is one unit of expensive Spark work, named by a stable job id (per data interval,
not per Airflow run). Its *result* is written once, when the job reaches a final state,
as a *dirty* entry; after its cleanup the entry turns *clean* (FLIP-194).
"""

from __future__ import annotations

import enum
import re
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


@dataclass(frozen=True)
class JobResultEntry:
    """A stored result plus its state; what readers get back."""

    result: JobResult
    state: EntryState
    created_at: datetime | None = None

    @property
    def job_id(self) -> str:
        return self.result.job_id

    @property
    def is_dirty(self) -> bool:
        return self.state is EntryState.DIRTY

    @property
    def is_clean(self) -> bool:
        return self.state is EntryState.CLEAN
