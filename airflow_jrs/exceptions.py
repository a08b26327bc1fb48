"""Every error airflow-jrs raises, in one tree.

::

    JrsError                           (defined in spark/errors.py: a PySpark driver raises it too)
    ├── InvalidJobIdError              a job id breaks the charset/length rules (ValueError too)
    ├── JrsConfigError                 a connection or [jrs] setting is missing or invalid
    ├── StoreUnavailableError          Redis could not be reached or answered with an error
    ├── CorruptIntentError             a running job's intent cannot be read (operator action needed)
    ├── CorruptCommitMarkerError       a commit marker exists but is not valid (ValueError too;
    │                                  defined in spark/errors.py)
    ├── EntryDecodeError               stored bytes are not an entry this version reads (inside the
    │                                  store only: it becomes CorruptJobResultError or
    │                                  UnsupportedSchemaVersionError; defined in store/results/serde.py)
    ├── JobResultEntryError            something about one job's entry
    │   ├── JobResultEntryAlreadyExistsError   create_dirty_result on a job that has a result
    │   ├── NoSuchJobResultError               clean/forget on a job without a result
    │   ├── JobResultEntryChangedError         forget of an entry that changed since it was read
    │   ├── CorruptJobResultError              stored bytes are not a valid entry (now quarantined)
    │   ├── UnsupportedSchemaVersionError      entry written by a newer airflow-jrs
    │   ├── JobResultQuarantinedError          the job's entry sits in quarantine: operator action needed
    │   └── ResultDocumentError                a clean entry's result document is missing or unreadable
    ├── LeaseError                     lease problems
    │   ├── LeaseHeldError             another live attempt holds the job's lease (never had it)
    │   └── LeaseLostError             we held it and lost it: stop, write nothing (fence is stale)
    ├── StaleHeartbeat                 a newer fence owns the job's heartbeat: the supervisor stops
    │   └── HeartbeatGone              the heartbeat expired early: a successor may run
    ├── JobKilledError                 the attempt was killed (on_kill/SIGTERM); it must not succeed
    ├── JobNotStartedError             another attempt works on the job; this one gave up waiting
    ├── JobEndedOnRequestError         stopped or canceled on request: recorded, never retried
    ├── DriverMayStillRunError         the launch ended, its cluster driver may not have: intent kept
    ├── ApplicationFailedError         the application failed (what the FAILED result says)
    ├── NoRunningStreamError           stop/cancel of a job with no running attempt to ask
    └── CleanupError                   cleanup actions failed after every retry

Every error carries the identifiers an on-call engineer searches for (``job_id``,
``namespace``, ``fence``, ``key``) and its message says what to do next.

Redis exceptions never escape: the store, the lease and the intent wrap their I/O in
:func:`airflow_jrs.store.redis.errors.redis_errors`, the one place that maps them to
:class:`StoreUnavailableError` (``raise ... from exc``), so callers fail closed on one type
(docs/architecture.md invariant 7). This module imports the standard library only.

Not an error, so not here: ``NeedsQuarantine`` (:mod:`airflow_jrs.store.redis.read_rules`) tells the
store's own caller to quarantine bytes it read and never leaves the store.
"""

from __future__ import annotations

from airflow_jrs.spark.errors import CorruptCommitMarkerError, JrsError

__all__ = [
    "ApplicationFailedError",
    "CleanupError",
    "CorruptCommitMarkerError",
    "CorruptIntentError",
    "CorruptJobResultError",
    "DriverMayStillRunError",
    "HeartbeatGone",
    "InvalidJobIdError",
    "JobEndedOnRequestError",
    "JobKilledError",
    "JobNotStartedError",
    "JobResultEntryAlreadyExistsError",
    "JobResultEntryChangedError",
    "JobResultEntryError",
    "JobResultQuarantinedError",
    "JrsConfigError",
    "JrsError",
    "LeaseError",
    "LeaseHeldError",
    "LeaseLostError",
    "NoRunningStreamError",
    "NoSuchJobResultError",
    "ResultDocumentError",
    "StaleHeartbeat",
    "StoreUnavailableError",
    "UnsupportedSchemaVersionError",
]


class InvalidJobIdError(JrsError, ValueError):
    """A job id is empty, too long, or has characters outside the allowed set."""


class JrsConfigError(JrsError, ValueError):
    """A connection, ``[jrs]`` option or operator argument is invalid."""


class StoreUnavailableError(JrsError):
    """The job result store could not be read or written; the caller must not guess.

    ``retryable`` tells a lost or slow connection (trying again may work) from a refusal
    (wrong password, missing ACL permission, a script error): waiting cannot fix those.

    ``what`` completes "could not ..." and ``kind`` names the case of
    :mod:`airflow_jrs.store.redis.diagnosis` (``refused``, ``timeout``, ``auth``, ...) when Redis failed,
    or is ``not_durable`` when Redis made a write that ``durability`` could not confirm (a refusal
    of the store that answered, never a reason to run without it).
    """

    def __init__(
        self,
        message: str,
        *,
        namespace: str,
        job_id: str | None = None,
        retryable: bool = False,
        what: str | None = None,
        kind: str | None = None,
    ) -> None:
        super().__init__(message)
        self.namespace = namespace
        self.job_id = job_id
        self.retryable = retryable
        self.what = what
        self.kind = kind


class CorruptIntentError(JrsError):
    """A job's intent (the running-job reference) cannot be read; ``key`` names it."""

    def __init__(self, message: str, *, job_id: str, namespace: str, key: str) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.namespace = namespace
        self.key = key


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


class JobResultEntryChangedError(JobResultEntryError):
    """A compare-and-set on the entry the caller read found another one (a newer result, or a
    changed state): nothing was done. Read the entry again and decide on what is there now."""


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


class ResultDocumentError(JobResultEntryError):
    """A clean entry's full result lives in a result document (``[jrs] result_documents``) that
    is missing, unreadable or not the entry's own (``location`` names where it should be). The
    entry itself is fine and stays: restore the document, or forget the job so it runs again."""

    def __init__(self, message: str, *, job_id: str, namespace: str, location: str) -> None:
        super().__init__(message, job_id=job_id, namespace=namespace)
        self.location = location


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


class StaleHeartbeat(JrsError):
    """A newer fence owns the job's heartbeat: this supervisor's spark-submit must stop."""

    def __init__(self, job_id: str, fence: int) -> None:
        super().__init__(f"job {job_id!r}: a newer attempt owns the heartbeat; fence {fence} stops")
        self.job_id = job_id
        self.fence = fence


class HeartbeatGone(StaleHeartbeat):
    """A later beat found its heartbeat gone: it expired before its TTL (a clock step on the
    Redis host, a failover to a replica with another clock, a pause), so a successor may run."""

    def __init__(self, job_id: str, fence: int) -> None:
        JrsError.__init__(
            self, f"job {job_id!r}: the heartbeat of fence {fence} is gone (expired early); fence {fence} stops"
        )
        self.job_id = job_id
        self.fence = fence


class JobKilledError(JrsError):
    """The attempt was killed while it ran; it records nothing and must not report success."""

    def __init__(self, message: str, *, job_id: str, fence: int | None = None) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.fence = fence


class _JobError(JrsError):
    """An attempt's outcome that is not a result: carries the ``job_id`` and the attempt's ``fence``."""

    def __init__(self, message: str, *, job_id: str, fence: int | None = None) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.fence = fence


class JobNotStartedError(_JobError):
    """Another live attempt holds the job's lease and this one waited as long as it may: the
    message says for what, and whether a retry follows (:func:`airflow_jrs.protocol.takeover.refusal`)."""


class JobEndedOnRequestError(_JobError):
    """The application was stopped or canceled on request (the CLI, the UI, ``on_kill``): the
    outcome is recorded and a retry would undo what was asked, so none must follow."""


class DriverMayStillRunError(_JobError):
    """The launch ended but its driver may run on in the cluster: the intent stays and nothing is
    recorded, so the next attempt finds the driver before it submits anything."""


class ApplicationFailedError(_JobError):
    """The application failed or left no complete output; the message is what the log and, on the
    last try, the FAILED result say."""


class CleanupError(JrsError):
    """A cleanup action kept failing; the result stays dirty so the next cleanup retries it.

    ``job_id`` is ``None`` when the failure is not about one job (a submit task without a result).
    """

    def __init__(self, message: str, *, job_id: str | None, namespace: str | None = None) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.namespace = namespace


class NoRunningStreamError(JrsError):
    """The job has no running attempt of a streaming application to stop or cancel."""

    def __init__(self, message: str, *, job_id: str, namespace: str) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.namespace = namespace
