"""Every error airflow-jrs raises, in one tree.

::

    JrsError
    ├── InvalidJobIdError              a job id breaks the charset/length rules (ValueError too)
    ├── JrsConfigError                 a connection or [jrs] setting is missing or invalid
    ├── StoreUnavailableError          Redis could not be reached or answered with an error
    ├── JobResultEntryError            something about one job's entry
    │   ├── JobResultEntryAlreadyExistsError   create_dirty_result on a job that has a result
    │   ├── NoSuchJobResultError               clean/forget on a job without a result
    │   ├── CorruptJobResultError              stored bytes are not a valid entry (now quarantined)
    │   ├── UnsupportedSchemaVersionError      entry written by a newer airflow-jrs
    │   └── JobResultQuarantinedError          the job's entry sits in quarantine: operator action needed
    ├── LeaseError                     lease problems
    │   ├── LeaseHeldError             another live attempt holds the job's lease (never had it)
    │   └── LeaseLostError             we held it and lost it: stop, write nothing (fence is stale)
    ├── JobKilledError                 the attempt was killed (on_kill/SIGTERM); it must not succeed
    └── CleanupError                   cleanup actions failed after every retry

Redis exceptions never escape: the store maps them to :class:`StoreUnavailableError`
(``raise ... from exc``) so callers fail closed on one type (DESIGN.md invariant 7).
"""

from __future__ import annotations


class JrsError(Exception):
    """Base class of every airflow-jrs error."""


class InvalidJobIdError(JrsError, ValueError):
    """A job id is empty, too long, or has characters outside the allowed set."""


class JrsConfigError(JrsError, ValueError):
    """A connection, ``[jrs]`` option or operator argument is invalid."""


class StoreUnavailableError(JrsError):
    """The job result store could not be read or written; the caller must not guess."""


class JobResultEntryError(JrsError):
    """An error about one job's entry; carries ``job_id`` and ``namespace``."""

    def __init__(self, message: str, *, job_id: str, namespace: str) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.namespace = namespace


class JobResultEntryAlreadyExistsError(JobResultEntryError):
    """``create_dirty_result`` found an entry (dirty or clean) for the job."""


class NoSuchJobResultError(JobResultEntryError):
    """The job has no entry in the store."""


class CorruptJobResultError(JobResultEntryError):
    """The stored entry could not be decoded; it was moved to quarantine (``key`` names where)."""

    def __init__(self, message: str, *, job_id: str, namespace: str, key: str) -> None:
        super().__init__(message, job_id=job_id, namespace=namespace)
        self.key = key


class UnsupportedSchemaVersionError(JobResultEntryError):
    """The entry has a schema version this airflow-jrs cannot read; upgrade, do not overwrite."""

    def __init__(self, message: str, *, job_id: str, namespace: str, key: str, version: object) -> None:
        super().__init__(message, job_id=job_id, namespace=namespace)
        self.key = key
        self.version = version


class JobResultQuarantinedError(JobResultEntryError):
    """The job's entry was quarantined; the job is blocked until someone inspects and releases it."""

    def __init__(self, message: str, *, job_id: str, namespace: str, key: str) -> None:
        super().__init__(message, job_id=job_id, namespace=namespace)
        self.key = key


class LeaseError(JrsError):
    """Base class of lease errors; carries ``job_id``."""

    def __init__(self, message: str, *, job_id: str) -> None:
        super().__init__(message)
        self.job_id = job_id


class LeaseHeldError(LeaseError):
    """Another live attempt holds the lease; ``holder`` describes it."""

    def __init__(self, message: str, *, job_id: str, holder: dict[str, object]) -> None:
        super().__init__(message, job_id=job_id)
        self.holder = holder


class LeaseLostError(LeaseError):
    """The lease expired or was taken over; the attempt's fence is stale and its writes are refused."""

    def __init__(self, message: str, *, job_id: str, fence: int) -> None:
        super().__init__(message, job_id=job_id)
        self.fence = fence


class JobKilledError(JrsError):
    """The attempt was killed while it ran; it records nothing and must not report success."""


class CleanupError(JrsError):
    """A cleanup action kept failing; the result stays dirty so the next cleanup retries it."""
