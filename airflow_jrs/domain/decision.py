"""The decision table: given what the store holds, does an attempt run Spark?

===========================  ======================  =========================================
entry found                  same fingerprint?       decision
===========================  ======================  =========================================
none                         -                       RUN
SUCCEEDED, clean             yes (or accepted)       SKIP: return the stored result
SUCCEEDED, dirty             yes (or accepted)       SKIP: the work is done, cleanup is pending
SUCCEEDED, clean or dirty    no                      RUN as a new job; the old entry -> history
FAILED / CANCELED / STOPPED  -                       RUN; the old entry -> history
===========================  ======================  =========================================

"Same fingerprint" compares what is computed (application file content, rendered application
arguments, the user's ``job_version``), not resource settings. A result without a fingerprint
(written by hand or by an older version) counts as matching: we never recompute on missing data.
``accept_changed_fingerprint=True`` skips on any SUCCEEDED result. A *summary* entry (a clean
reference, ``[jrs] result_documents``) keeps the fingerprint's first 33 hex digits (132 bits):
it matches when the job's fingerprint starts with them, so the decision still needs nothing but
the one Redis read.

STOPPED and CANCELED are written by streaming jobs (docs/streaming.md): the stream ended on
request and keeps its checkpoint, so RUN *resumes* it from there (no rewind); the new result
supersedes the old one, which stays in the job's history. A streaming job that finished on its
own (``Trigger.AvailableNow``) records SUCCEEDED and skips like any batch job.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from airflow_jrs.domain.model import JobResultEntry


class Action(enum.StrEnum):
    RUN = "run"
    SKIP = "skip"


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str
    entry: JobResultEntry | None = None
    #: RUN over an existing entry: the new result must supersede it (old one -> history).
    supersede: bool = False

    @property
    def skip(self) -> bool:
        return self.action is Action.SKIP


def decide(
    entry: JobResultEntry | None, fingerprint: str | None, *, accept_changed_fingerprint: bool = False
) -> Decision:
    if entry is None:
        return Decision(Action.RUN, "no result in the store")
    result = entry.result
    if not result.status.is_success:
        return Decision(Action.RUN, f"last result is {result.status.value}", entry, supersede=True)
    same = result.fingerprint is None or fingerprint is None or result.fingerprint == fingerprint
    if entry.summary and result.fingerprint is not None and fingerprint is not None:
        same = fingerprint.startswith(result.fingerprint)
    if not same and not accept_changed_fingerprint:
        return Decision(
            Action.RUN,
            f"stored result has fingerprint {result.fingerprint[:12] if result.fingerprint else None}, "
            f"this job computes {fingerprint[:12] if fingerprint else None}: the job changed",
            entry,
            supersede=True,
        )
    state = "committed (clean)" if entry.is_clean else "done, cleanup pending (dirty)"
    return Decision(Action.SKIP, f"SUCCEEDED result already {state}", entry)
