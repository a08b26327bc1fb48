"""Stop or cancel a running streaming job from outside Airflow (``airflow-jrs stop|cancel``).

The job's intent (recorded while an attempt runs, :mod:`airflow_jrs.intent`) names the fence of
the running attempt and its staging folder, which for a streaming job is the stream's stable
output folder; its ``control/`` folder sits beside it. The request goes there
(:mod:`airflow_jrs.spark.control`), for that fence only, and the driver acts on it wherever it
runs. The operator then records STOPPED or CANCELED. Airflow-free.
"""

from __future__ import annotations

import getpass
import socket
from typing import Any

from airflow_jrs.exceptions import JrsError
from airflow_jrs.intent import IntentStore
from airflow_jrs.paths import control_path_of_output
from airflow_jrs.spark.control import write_request
from airflow_jrs.store import RedisJobResultStore


class NoRunningStreamError(JrsError):
    """The job has no running attempt of a streaming application to stop or cancel."""

    def __init__(self, message: str, *, job_id: str, namespace: str) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.namespace = namespace


def request_stream(store: RedisJobResultStore, job_id: str, kind: str, *, by: str | None = None) -> dict[str, Any]:
    """Write a ``stop`` or ``cancel`` request for the running attempt of ``job_id``; returns it."""
    intent = IntentStore(store.client, store.namespace, spec_root="").get(job_id)
    if intent is None:
        raise NoRunningStreamError(
            f"job {job_id!r} has no running attempt in namespace {store.namespace!r} (no intent): nothing "
            "to stop. `airflow-jrs show` tells its last result.",
            job_id=job_id,
            namespace=store.namespace,
        )
    control = control_path_of_output(intent.staging)
    if control is None:
        raise NoRunningStreamError(
            f"job {job_id!r} (fence {intent.fence}) is not a streaming job (its output {intent.staging} is "
            "per attempt); stop it by marking its Airflow task failed, which kills spark-submit.",
            job_id=job_id,
            namespace=store.namespace,
        )
    who = by or f"airflow-jrs {kind} ({getpass.getuser()}@{socket.gethostname()})"
    doc = write_request(control, kind, intent.fence, by=who)
    return {**doc, "job_id": job_id, "control": control}
