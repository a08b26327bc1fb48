"""A result as a JSON document: what XCom carries, the CLI prints and an intent refers to.

The store's own encoding (:mod:`airflow_jrs.store.results.serde`) is compact and versioned; this is the
plain form that every reader outside Redis shares, so it belongs to the domain.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any

from airflow_jrs.domain.model import Attempt, JobResult, JobStatus


def _dt(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _attempt_dict(attempt: Attempt | None) -> dict[str, Any] | None:
    if attempt is None:
        return None
    data = asdict(attempt)
    if data.get("map_index") == -1:  # the default: leave it out (entries stay under a memory size class)
        del data["map_index"]
    return data


def result_to_dict(result: JobResult) -> dict[str, Any]:
    """The JSON form of a result, without empty members (also what XCom carries)."""
    data: dict[str, Any] = {
        "job_id": result.job_id,
        "status": result.status.value,
        "application_id": result.application_id,
        "outputs": dict(result.outputs) or None,
        "metrics": dict(result.metrics) or None,
        "checkpoint_location": result.checkpoint_location,
        "fingerprint": result.fingerprint,
        "start_time": _dt(result.start_time),
        "end_time": _dt(result.end_time),
        "attempt": _attempt_dict(result.attempt),
        "fence": result.fence,
        "error": result.error,
    }
    return {k: v for k, v in data.items() if v is not None}


def result_from_dict(data: dict[str, Any]) -> JobResult:
    """Inverse of :func:`result_to_dict`; raises ``ValueError``/``TypeError``/``KeyError`` on bad data."""
    if not isinstance(data, dict):
        raise TypeError(f"result must be a JSON object, got {type(data).__name__}")
    attempt = data.get("attempt")
    if attempt is not None and not isinstance(attempt, dict):
        raise TypeError(f"attempt must be a JSON object, got {type(attempt).__name__}")

    def dt(name: str) -> datetime | None:
        raw = data.get(name)
        return datetime.fromisoformat(raw) if raw is not None else None

    return JobResult(
        job_id=data["job_id"],
        status=JobStatus(data["status"]),
        application_id=data.get("application_id"),
        outputs=dict(data.get("outputs") or {}),
        metrics=dict(data.get("metrics") or {}),
        checkpoint_location=data.get("checkpoint_location"),
        fingerprint=data.get("fingerprint"),
        start_time=dt("start_time"),
        end_time=dt("end_time"),
        attempt=Attempt(**attempt) if attempt else None,
        fence=data.get("fence"),
        error=data.get("error"),
    )
