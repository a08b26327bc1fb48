"""The terms of one attempt of a job: what defines the job, how the attempt behaves where the
protocol leaves a choice, and what it did.

Values only, apart from :class:`~airflow_jrs.protocol.attempt.JobAttempt` (which runs them), so a
caller builds them and reads an outcome without the sequence itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from airflow_jrs.domain import recompute
from airflow_jrs.store import JobResult, JobResultEntry

#: What :meth:`~airflow_jrs.protocol.attempt.JobAttempt.run` did.
SKIPPED, ADOPTED, COMPUTED = "skipped", "adopted", "computed"


@dataclass(frozen=True)
class JobSpec:
    """What defines the job: its id, the fingerprint of what it computes, its outputs."""

    job_id: str
    fingerprint: str
    #: logical output name -> sub-path of the staging folder ("" is the folder itself)
    outputs: Mapping[str, str] = field(default_factory=lambda: {"output": ""})


@dataclass(frozen=True)
class AttemptPolicy:
    """How this attempt behaves where the protocol leaves a choice."""

    accept_changed_fingerprint: bool = False
    #: seconds to wait for another live attempt's lease before giving up
    lease_wait_timeout: float = 0.0
    #: what to do with a predecessor's application that still runs: "wait" or "stop"
    predecessor: str = "wait"
    #: the task has no retry left: a failure is recorded as FAILED (sensors fail fast)
    last_try: bool = False
    #: the task's retries, for the message of an attempt that gives up on a held lease
    retries: int = 0
    #: seconds between two looks at a held lease
    lease_poll: float = 0.5
    #: the run's recompute request (:func:`airflow_jrs.domain.recompute.read_request`), if any
    recompute: recompute.Request | None = None


@dataclass(frozen=True)
class Outcome:
    """What the attempt did: :data:`SKIPPED` (a result was there), :data:`ADOPTED` (a predecessor's
    finished output was published) or :data:`COMPUTED` (this attempt launched and succeeded)."""

    kind: str
    job_id: str
    #: the result found (skipped) or written dirty (adopted, computed)
    result: JobResult
    #: the entry read, when skipped
    entry: JobResultEntry | None = None
    reason: str = ""
    #: the fence whose output was adopted
    adopted_from: int | None = None
    #: the fence that wrote the result (adopted, computed)
    fence: int | None = None
