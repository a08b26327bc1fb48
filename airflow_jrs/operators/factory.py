"""``jrs_spark_job``: the usual pair of tasks, a Spark submission and the cleanup that commits it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator, TaskGroup

from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.operators.cleanup import CleanupCallable, JrsCleanupOperator
from airflow_jrs.operators.spark import JrsSparkSubmitOperator
from airflow_jrs.operators.start_in_triggerer import (
    JrsStartInTriggererCleanupOperator,
    JrsStartInTriggererSparkSubmitOperator,
)


def jrs_spark_job(
    group_id: str,
    *,
    cleanup_paths: Sequence[str] = (),
    cleanup_callables: Sequence[CleanupCallable] = (),
    start_in_triggerer: bool = False,
    expand: Mapping[str, Any] | None = None,
    **submit_kwargs: Any,
) -> TaskGroup:
    """One call for the usual pair: ``<group_id>.submit`` (JrsSparkSubmitOperator) >> ``<group_id>.cleanup``.

    Use inside a DAG context; returns the TaskGroup so it chains like a task.
    ``start_in_triggerer=True`` starts both tasks in the triggerer (see
    :mod:`airflow_jrs.operators.start_in_triggerer`): committed jobs then need no worker slot.
    ``expand`` maps the submission (``JrsSparkSubmitOperator.partial(**submit_kwargs).expand(**expand)``):
    one job per map index (``<dag>.<group_id>.submit.<key>.map-<index>``), all committed by the
    one cleanup (docs/how-to/mapped-jobs.md).
    """
    if expand is not None and start_in_triggerer:
        raise JrsConfigError(
            f"jrs_spark_job({group_id!r}): start_in_triggerer does not work with expand (a mapped task cannot "
            "start in the triggerer); drop one of them"
        )
    submit_cls: type[BaseOperator]
    cleanup_cls: type[BaseOperator]
    if start_in_triggerer:
        submit_cls, cleanup_cls = JrsStartInTriggererSparkSubmitOperator, JrsStartInTriggererCleanupOperator
    else:
        submit_cls, cleanup_cls = JrsSparkSubmitOperator, JrsCleanupOperator
    conn = {k: submit_kwargs[k] for k in ("jrs_conn_id", "jrs_namespace") if k in submit_kwargs}
    with TaskGroup(group_id) as group:
        submit: Any
        if expand is not None:
            submit = submit_cls.partial(task_id="submit", **submit_kwargs).expand(**expand)
        else:
            submit = submit_cls(task_id="submit", **submit_kwargs)
        cleanup_cls(
            task_id="cleanup",
            jobs=[submit],
            cleanup_paths=cleanup_paths,
            cleanup_callables=cleanup_callables,
            **conn,
        )
    return group
