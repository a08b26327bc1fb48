"""Which commit marker is an attempt's own: output is published only for a marker bound to it.

An application writes its commit marker last (:mod:`airflow_jrs.spark.commit`), naming the job
and the fence it was launched under. Recovery adopts a predecessor's output, and a cluster
attempt publishes its driver's, only when the marker names that very attempt: a marker written
by hand, by another attempt, or by an application launched outside the protocol binds nothing.
"""

from __future__ import annotations

from typing import Any

from airflow_jrs.exceptions import CorruptCommitMarkerError
from airflow_jrs.spark.commit import read_commit_marker


def names_attempt(marker: dict[str, Any], job_id: str, fence: int) -> bool:
    """Does the commit marker name this job and this attempt's fence (its lease token)?

    :func:`write_commit_marker` records both from the Spark conf the operator
    sets on every submission, so a marker of this attempt always names them. A marker that lacks
    either (written by hand, by an application that does not use the helper, or by one submitted
    outside the operator) is not bound to any attempt and is never published as its output."""
    fence_in_marker = marker.get("fence")
    return marker.get("job_id") == job_id and fence_in_marker is not None and str(fence_in_marker) == str(int(fence))


def committed_marker(staging: str, job_id: str, fence: int) -> dict[str, Any] | None:
    """The commit marker in ``staging`` if it is complete and names this job and fence, else ``None``.

    A marker that names another job or fence, or none, was not written by this attempt's
    application (a reattached or misconfigured driver): its output is not this attempt's to
    publish (:func:`names_attempt`)."""
    try:
        marker = read_commit_marker(staging)
    except CorruptCommitMarkerError:
        return None
    if marker is None or not names_attempt(marker, job_id, fence):
        return None
    return marker
