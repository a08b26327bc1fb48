"""The sensor's wait rule: when is a wait for job results over, and how does it end?

One rule for the three ways to wait (poke, reschedule, deferred) and for the trigger that
waits in the triggerer: :func:`evaluate` takes the entries, whoever read them, and says
done (with the payloads), failed (with a message), or still waiting (with the reasons).
Airflow-free.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_jrs.domain.model import JobResultEntry, JobStatus
from airflow_jrs.domain.payload import entry_payload
from airflow_jrs.exceptions import JrsConfigError

#: ``any``: a result exists (dirty or clean); ``dirty``: cleanup still pending; ``clean``: committed.
TARGET_STATES = ("any", "dirty", "clean")
DEFAULT_STATUSES = (JobStatus.SUCCEEDED.value,)


def validate_wait_args(target_state: str, statuses: Collection[str]) -> list[str]:
    """Check ``target_state`` and ``statuses``; return the statuses as plain strings."""
    if target_state not in TARGET_STATES:
        raise JrsConfigError(
            f"target_state {target_state!r} is not one of {list(TARGET_STATES)}: 'any' waits for "
            "any result, 'dirty' for one whose cleanup is pending, 'clean' for a committed one"
        )
    values = [s.value if isinstance(s, JobStatus) else str(s) for s in statuses]
    unknown = sorted(set(values) - {s.value for s in JobStatus})
    if unknown or not values:
        raise JrsConfigError(
            f"statuses {list(statuses)!r} must be a non-empty subset of {[s.value for s in JobStatus]}"
        )
    return values


@dataclass(frozen=True)
class WaitOutcome:
    """Verdict on a set of entries: done (with results), failed (with a message), or waiting."""

    done: bool = False
    results: list[dict[str, Any]] = field(default_factory=list)
    failed_job_id: str | None = None
    failure: str | None = None
    failed_result: dict[str, Any] | None = None
    waiting: dict[str, str] = field(default_factory=dict)

    def describe_wait(self) -> str:
        return "; ".join(f"{job_id}: {why}" for job_id, why in self.waiting.items())


def evaluate(
    job_ids: Sequence[str],
    entries: Mapping[str, JobResultEntry | None],
    *,
    namespace: str,
    target_state: str = "any",
    statuses: Collection[str] = DEFAULT_STATUSES,
    fail_on_unsuccessful: bool = True,
) -> WaitOutcome:
    """Decide whether the wait is over; the single rule shared by the sensor and the trigger.

    A job counts when its entry exists, its status is in ``statuses`` and its state matches
    ``target_state``. An unsuccessful result (FAILED, CANCELED, STOPPED) outside ``statuses``
    ends the wait as a failure when ``fail_on_unsuccessful``, whatever its entry state: its
    cleanup does not make it succeed. Otherwise the wait goes on (a later attempt may
    supersede it).
    """
    wanted = set(statuses)
    waiting: dict[str, str] = {}
    for job_id in job_ids:
        entry = entries.get(job_id)
        if entry is None:
            waiting[job_id] = "no result yet"
            continue
        status = entry.result.status
        if status.value not in wanted:
            if not status.is_success and fail_on_unsuccessful:
                error = f": {entry.result.error}" if entry.result.error else ""
                return WaitOutcome(
                    failed_job_id=job_id,
                    failure=(
                        f"job {job_id!r} (namespace {namespace!r}) has a {status.value} result{error}. "
                        "Failing now instead of waiting for a result that will not come: re-run the "
                        "job (a new attempt supersedes the result), or set fail_on_unsuccessful=False "
                        f"to wait for a later attempt, or add {status.value!r} to statuses to accept it."
                    ),
                    failed_result=entry_payload(entry),
                )
            waiting[job_id] = f"{status.value} result, waiting for one of {sorted(wanted)}"
            continue
        if target_state != "any" and entry.state.value != target_state:
            waiting[job_id] = f"result is {entry.state.value}, waiting for {target_state}"
    if waiting:
        return WaitOutcome(waiting=waiting)
    return WaitOutcome(done=True, results=[entry_payload(entries[j]) for j in job_ids])  # type: ignore[arg-type]
