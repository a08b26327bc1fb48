"""Job identity and fingerprint: what a job is, whoever asks (worker, triggerer, CLI).

Airflow-free on purpose: the worker and the triggerer both call these rules, and a rule
that exists twice drifts into a wrong skip. ``default_job_id`` reads only plain attributes
of the task context it is given.

The job id names *what* is computed for *which* data, never which run computes it: a
scheduled run, a backfill run and a cleared run of one date are the same job. Rule, first
that applies: ``{dag_id}.{task_id}.{key}[.map-N]`` with key = the run's partition key, else
the data interval start, else the logical date, else (a manual run without a logical date)
the run id. Midnight UTC renders as ``2013-01-01``, other times as ``2013-01-01T060000Z``.
A key with characters a job id may not hold gets them replaced by ``_`` plus ``-h`` and a
digest of the key as given, so two keys never become one job id.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow_jrs.store.model import JOB_ID_MAX_LENGTH, sanitize_job_id_part, validate_job_id


def _format_instant(value: datetime) -> str:
    value = value.astimezone(UTC)
    if (value.hour, value.minute, value.second, value.microsecond) == (0, 0, 0, 0):
        return value.strftime("%Y-%m-%d")
    return value.strftime("%Y-%m-%dT%H%M%SZ")


def default_job_id(context: Mapping[str, Any]) -> str:
    ti = context["ti"]
    dag_id, task_id = ti.dag_id, ti.task_id
    key: str
    if context.get("partition_key"):
        key = str(context["partition_key"])
    elif context.get("data_interval_start") is not None:
        key = _format_instant(context["data_interval_start"])
    elif context.get("logical_date") is not None:
        key = _format_instant(context["logical_date"])
    else:
        key = f"run-{context['run_id']}"
    safe_key = sanitize_job_id_part(key)
    if safe_key != key:
        # Replacing characters maps several keys to one ("a;b" and "a<b" both become "a_b"): the
        # second partition would find the first one's result and be skipped. A digest of the
        # key as given keeps them apart.
        safe_key += "-h" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    job_id = sanitize_job_id_part(f"{dag_id}.{task_id}.{safe_key}")
    map_index = getattr(ti, "map_index", -1)
    if map_index is not None and map_index >= 0:
        job_id += f".map-{map_index}"
    if len(job_id) > JOB_ID_MAX_LENGTH:
        digest = hashlib.sha256(job_id.encode()).hexdigest()[:16]
        job_id = f"{job_id[: JOB_ID_MAX_LENGTH - 18]}~{digest}".replace("~", "-h")[:JOB_ID_MAX_LENGTH]
    return validate_job_id(job_id)


def fingerprint(
    *,
    application_bytes: bytes | None,
    application: str,
    application_args: Sequence[Any] | None,
    job_version: str | None,
) -> str:
    """sha256 over what is computed: code, arguments, version. Resources are left out on purpose."""
    h = hashlib.sha256()
    h.update(b"jrs-fp-v1\0")
    h.update(application_bytes if application_bytes is not None else application.encode())
    h.update(b"\0")
    h.update(json.dumps([str(a) for a in application_args or []]).encode())
    h.update(b"\0")
    h.update((job_version or "").encode())
    return h.hexdigest()


def application_fingerprint(application: str, application_args: Sequence[Any] | None, job_version: str | None) -> str:
    """The fingerprint of a submission: the application file's content when ``application`` is
    a local file readable here, else its path string (a remote URL, a file this host lacks).

    The worker and the triggerer both call this, so they can only disagree when they see
    different files (the triggerer then sends the task to the worker, which decides)."""
    data: bytes | None = None
    if application and "://" not in application and os.path.isfile(application):
        data = Path(application).read_bytes()
    return fingerprint(
        application_bytes=data, application=application, application_args=application_args, job_version=job_version
    )
