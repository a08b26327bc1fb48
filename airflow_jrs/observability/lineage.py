"""OpenLineage for every guarded job: the datasets it wrote, computed now or reused.

Airflow's openlineage provider asks each operator for its lineage after the task ends
(``get_openlineage_facets_on_complete``, after a success and after a skip alike). A guarded
operator answers from the payload its try kept (:func:`~airflow_jrs.operators.guarded.remembered_payload`):
the job's ``outputs`` as output datasets and a ``jrs_job`` run facet naming the job, its fence and
application, and the run and try that computed the data. A reused (skipped) job answers the same
way, so a date whose data an earlier run wrote still shows where its data came from; a plain
operator that skipped would leave a hole in the graph.

Spark's side (the OpenLineage listener inside each application) learns its parent task and the
transport from ``spark.openlineage.*`` conf, as the Spark provider injects it for spark-submit:
:func:`spark_lineage_conf` gives the same keys for the launches the provider does not make
(sessions, Spark Connect, Pipelines). The keys are added at launch, after the fingerprint is
computed from the job's code and arguments (never its conf), so turning lineage on or off never
makes a finished job run again.

Nothing here imports the provider at module level: without ``airflow-jrs[openlineage]`` the
listener never calls in, and :func:`spark_lineage_conf` adds nothing (the compat layer logs why).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlparse

log = logging.getLogger(__name__)

#: The run facet's name in an event's ``run.facets``. Its schema is the spec's generic run facet
#: (``RunFacet``, which allows any field); ``docs/how-to/lineage.md`` lists its fields.
FACET_NAME = "jrs_job"
#: ``_producer`` of the facet: who wrote it (the event's own producer is the openlineage provider).
PRODUCER = "https://pypi.org/project/airflow-jrs/"
#: Schemes whose dataset name is the object key: no leading slash (OpenLineage's naming spec).
OBJECT_STORES = ("s3", "s3a", "s3n", "gs", "gcs", "wasbs", "abfss", "oss")
#: The prefix of every Spark conf key the OpenLineage Spark listener reads.
SPARK_CONF_PREFIX = "spark.openlineage."


def dataset_identity(location: str) -> tuple[str, str]:
    """``(namespace, name)`` of an output location as OpenLineage names datasets: ``file`` and the
    absolute path for a local path or ``file:`` URL, ``scheme://authority`` and the path otherwise
    (the object key, without its leading slash, on object stores)."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file") or len(parsed.scheme) == 1:  # a Windows drive is no scheme
        path = parsed.path if parsed.scheme == "file" else location
        return "file", path
    name = parsed.path.lstrip("/") if parsed.scheme in OBJECT_STORES else (parsed.path or "/")
    return f"{parsed.scheme}://{parsed.netloc}", name


def facet_fields(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The ``jrs_job`` facet's fields from a guarded task's payload (:mod:`airflow_jrs.domain.payload`)."""
    attempt = payload.get("attempt") or {}
    computed_by = {
        "dagId": attempt.get("dag_id"),
        "taskId": attempt.get("task_id"),
        "runId": attempt.get("run_id"),
        "tryNumber": attempt.get("try_number"),
        "mapIndex": attempt.get("map_index"),
    }
    fields: dict[str, Any] = {
        "jobId": payload.get("job_id"),
        "fingerprint": payload.get("fingerprint"),
        "fence": payload.get("fence"),
        "applicationId": payload.get("application_id"),
        "state": payload.get("state"),
        "reused": bool(payload.get("reused", payload.get("skipped", False))),
        "computedBy": {k: v for k, v in computed_by.items() if v is not None},
        "startTime": payload.get("start_time"),
        "endTime": payload.get("end_time"),
        "outputs": dict(payload.get("outputs") or {}),
    }
    if payload.get("adopted_from") is not None:
        fields["adoptedFrom"] = payload["adopted_from"]
    return {k: v for k, v in fields.items() if v is not None}


def operator_lineage(payload: Mapping[str, Any] | None) -> Any:
    """The ``OperatorLineage`` of a guarded try from its payload; empty when it kept none (it
    failed, or it ran in another process): a failed try published nothing."""
    from airflow.providers.common.compat.openlineage.facet import OutputDataset, RunFacet
    from airflow.providers.openlineage.extractors import OperatorLineage

    if not payload or not payload.get("job_id"):
        return OperatorLineage()

    facet = RunFacet(producer=PRODUCER).with_additional_properties(**facet_fields(payload))
    outputs = [OutputDataset(namespace=ns, name=name) for ns, name in _identities(payload.get("outputs") or {})]
    return OperatorLineage(outputs=outputs, run_facets={FACET_NAME: facet})


def _identities(outputs: Mapping[str, str]) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    for location in outputs.values():
        identity = dataset_identity(str(location))
        if identity not in seen:  # two names for one folder are one dataset
            seen.append(identity)
    return seen


def spark_lineage_conf(
    conf: Mapping[str, Any], context: Mapping[str, Any], *, parent: bool | None = None, transport: bool | None = None
) -> dict[str, Any]:
    """``conf`` with the ``spark.openlineage.*`` keys the Spark provider would inject: the parent
    task (``parent``) and the transport (``transport``), each ``None`` meaning ``[openlineage]
    spark_inject_parent_job_info`` / ``spark_inject_transport_info`` (both off by default). Keys
    the user set win (the provider's own rule). Returns ``conf`` unchanged when both are off."""
    from airflow.providers.common.compat.sdk import conf as airflow_conf

    if parent is None:
        parent = airflow_conf.getboolean("openlineage", "spark_inject_parent_job_info", fallback=False)
    if transport is None:
        transport = airflow_conf.getboolean("openlineage", "spark_inject_transport_info", fallback=False)
    result = dict(conf)
    if not (parent or transport):
        return result
    from airflow.providers.common.compat.openlineage.utils.spark import (
        inject_parent_job_information_into_spark_properties,
        inject_transport_information_into_spark_properties,
    )

    try:
        if parent:
            result = inject_parent_job_information_into_spark_properties(result, context)  # type: ignore[arg-type]
        if transport:
            result = inject_transport_information_into_spark_properties(result, context)  # type: ignore[arg-type]
    except Exception as exc:  # lineage never fails a job: it runs without the keys, saying why
        log.warning("OpenLineage: could not add the spark.openlineage.* conf (%s); Spark runs without it.", exc)
        return dict(conf)
    return result


def with_spark_lineage(
    settings: Callable[[], tuple[str, dict[str, str]]], context: Mapping[str, Any]
) -> Callable[[], tuple[str, dict[str, str]]]:
    """A session launcher's settings (``(master or sc:// URL, conf)``, resolved at launch) with the
    ``spark.openlineage.*`` keys of :func:`spark_lineage_conf`. A Spark Connect session takes the
    parent task only: its server's listener was configured (transport included) when the server
    started, and a session's conf cannot change it."""

    def resolved() -> tuple[str, dict[str, str]]:
        master, conf = settings()
        remote = master.startswith("sc://")
        lineage = spark_lineage_conf(conf, context, transport=False if remote else None)
        return master, {str(k): str(v) for k, v in lineage.items()}

    return resolved
