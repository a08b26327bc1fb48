"""Every error airflow-jrs raises, in one tree.

::

    JrsError
    ├── InvalidJobIdError              a job id breaks the charset/length rules (ValueError too)
    ├── JrsConfigError                 a connection or [jrs] setting is missing or invalid
    ├── StoreUnavailableError          Redis could not be reached or answered with an error
    ├── CorruptIntentError             a running job's intent cannot be read (operator action needed)
    ├── CorruptCommitMarkerError       a commit marker exists but is not valid (ValueError too)
    ├── JobResultEntryError            something about one job's entry
    │   ├── JobResultEntryAlreadyExistsError   create_dirty_result on a job that has a result
    │   ├── NoSuchJobResultError               clean/forget on a job without a result
    │   ├── JobResultEntryChangedError         forget of an entry that changed since it was read
    │   ├── CorruptJobResultError              stored bytes are not a valid entry (now quarantined)
    │   ├── UnsupportedSchemaVersionError      entry written by a newer airflow-jrs
    │   └── JobResultQuarantinedError          the job's entry sits in quarantine: operator action needed
    ├── LeaseError                     lease problems
    │   ├── LeaseHeldError             another live attempt holds the job's lease (never had it)
    │   └── LeaseLostError             we held it and lost it: stop, write nothing (fence is stale)
    ├── JobKilledError                 the attempt was killed (on_kill/SIGTERM); it must not succeed
    ├── JobNotStartedError             another attempt works on the job; this one gave up waiting
    ├── JobEndedOnRequestError         stopped or canceled on request: recorded, never retried
    ├── DriverMayStillRunError         the launch ended, its cluster driver may not have: intent kept
    ├── ApplicationFailedError         the application failed (what the FAILED result says)
    └── CleanupError                   cleanup actions failed after every retry

Every error carries the identifiers an on-call engineer searches for (``job_id``,
``namespace``, ``fence``, ``key``) and its message says what to do next.

Redis exceptions never escape: the store, the lease and the intent wrap their I/O in
:func:`redis_errors`, the one place that maps them to :class:`StoreUnavailableError`
(``raise ... from exc``), so callers fail closed on one type (DESIGN.md invariant 7).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis as redis_lib

from airflow_jrs.redis_diagnosis import diagnose


class JrsError(Exception):
    """Base class of every airflow-jrs error."""


class InvalidJobIdError(JrsError, ValueError):
    """A job id is empty, too long, or has characters outside the allowed set."""


class JrsConfigError(JrsError, ValueError):
    """A connection, ``[jrs]`` option or operator argument is invalid."""


class StoreUnavailableError(JrsError):
    """The job result store could not be read or written; the caller must not guess.

    ``retryable`` tells a lost or slow connection (trying again may work) from a refusal
    (wrong password, missing ACL permission, a script error): waiting cannot fix those.

    ``what`` completes "could not ..." and ``kind`` names the case of
    :mod:`airflow_jrs.redis_diagnosis` (``refused``, ``timeout``, ``auth``, ...) when Redis failed.
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


class CorruptCommitMarkerError(JrsError, ValueError):
    """A commit marker exists but is not a valid marker document; ``path`` names it."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


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


#: A connection that failed or timed out: trying again may work.
_LOST = (
    # Not a RedisError: what a cluster client raises when no node answers (or none knows the slot).
    redis_lib.exceptions.RedisClusterException,
    redis_lib.exceptions.ConnectionError,
    redis_lib.exceptions.TimeoutError,
    redis_lib.exceptions.BusyLoadingError,
    ConnectionError,
    TimeoutError,
)
#: Subclasses of ConnectionError that no retry fixes.
_REFUSED = (redis_lib.exceptions.AuthenticationError, redis_lib.exceptions.AuthorizationError)


@contextmanager
def redis_errors(what: str, namespace: str, job_id: str | None = None) -> Iterator[None]:
    """Map redis-py errors raised inside the block to :class:`StoreUnavailableError`.

    ``what`` completes "could not ...". Works around ``await`` too: the mapping happens where
    the exception surfaces. ``NoScriptError`` passes through (redis-py reloads the script).
    """
    try:
        yield
    except redis_lib.exceptions.NoScriptError:
        raise
    except (
        redis_lib.exceptions.RedisError,
        redis_lib.exceptions.RedisClusterException,
        ConnectionError,
        TimeoutError,
    ) as exc:
        # The server's words are not shown as they are: diagnose() says what is wrong and what
        # to do (the Airflow-facing layer says it again with the connection id and host).
        problem = diagnose(exc)
        retryable = problem.retryable
        if problem.kind == "other":
            retryable = isinstance(exc, _LOST) and not isinstance(exc, _REFUSED)
        raise StoreUnavailableError(
            f"job result store (namespace {namespace!r}) could not {what}: {problem.sentence()}",
            namespace=namespace,
            job_id=job_id,
            retryable=retryable,
            what=what,
            kind=problem.kind,
        ) from exc
