"""Stop or cancel a running job from outside Airflow (``airflow-jrs stop|cancel``, the Job results page).

The job's intent (recorded while an attempt runs, :mod:`airflow_jrs.store.intents`) names the fence of
the running attempt. The request goes to the one stop path
(:mod:`airflow_jrs.store.stop_requests`), for that fence only; the attempt's supervisor relays
it on its host (for a stream, to the driver's control file beside the stream's output). The
task then records STOPPED or CANCELED, or, when the task is gone, the supervisor does.
Airflow-free.
"""

from __future__ import annotations

import getpass
import socket
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_jrs.domain.paths import control_path_of_output
from airflow_jrs.exceptions import NoRunningStreamError
from airflow_jrs.spark.control import write_request

if TYPE_CHECKING:
    from airflow_jrs.store.namespace import JobNamespace


def request_stream(
    jobs: JobNamespace, job_id: str, kind: str, *, by: str | None = None, reason: str = ""
) -> dict[str, Any]:
    """Ask the running attempt of ``job_id`` to stop or cancel, through the one stop path
    (:mod:`airflow_jrs.store.stop_requests`); returns the request in force.

    The supervisor of the attempt relays it on its host: a stream's driver stops at a batch
    boundary (killed after its ``stop_timeout``) or is canceled at once; a batch job is
    terminated (SIGTERM, then SIGKILL after a grace period). A stream without a running
    supervisor (an attempt of an older airflow-jrs) also gets the request in its control file,
    which its driver polls."""
    intent = jobs.intents.get(job_id)
    if intent is None:
        raise NoRunningStreamError(
            f"job {job_id!r} has no running attempt in namespace {jobs.namespace!r} (no intent): nothing "
            "to stop. `airflow-jrs show` tells its last result.",
            job_id=job_id,
            namespace=jobs.namespace,
        )
    control = control_path_of_output(intent.staging)
    beat = jobs.heartbeats.get(job_id)
    supervised = beat is not None and beat.running and beat.fence == intent.fence
    if control is None and not supervised:
        raise NoRunningStreamError(
            f"job {job_id!r} (fence {intent.fence}) has no running supervisor to relay a {kind} (its "
            "spark-submit ended, or runs bare); stop it by marking its Airflow task failed, which kills "
            "spark-submit.",
            job_id=job_id,
            namespace=jobs.namespace,
        )
    who = by or f"airflow-jrs {kind} ({getpass.getuser()}@{socket.gethostname()})"
    request = jobs.stop_requests.ask(job_id, intent.fence, kind, by=who, reason=reason)
    if request is None:
        raise NoRunningStreamError(
            f"job {job_id!r}: the attempt of fence {intent.fence} ended meanwhile; nothing to {kind}. "
            "`airflow-jrs show` tells its result.",
            job_id=job_id,
            namespace=jobs.namespace,
        )
    if control is not None and not supervised:
        write_request(control, request.kind, intent.fence, by=who)
    relay = f"its supervisor on host {beat.host} (pid {beat.pid})" if supervised and beat else "its driver"
    return {
        "v": 1,
        "kind": request.kind,
        "fence": request.fence,
        "requested_at": datetime.fromtimestamp(request.at, UTC).isoformat(),
        "by": request.by,
        "job_id": job_id,
        "control": control or jobs.stop_requests.location(job_id),
        "relay": relay,
    }
