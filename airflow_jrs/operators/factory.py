"""``jrs_spark_job``: the usual pair of tasks, a Spark submission and the cleanup that commits it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator, TaskGroup

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
    **submit_kwargs: Any,
) -> TaskGroup:
    """One call for the usual pair: ``<group_id>.submit`` (JrsSparkSubmitOperator) >> ``<group_id>.cleanup``.

    Use inside a DAG context; returns the TaskGroup so it chains like a task.
    ``start_in_triggerer=True`` starts both tasks in the triggerer (see
    :mod:`airflow_jrs.operators.start_in_triggerer`): committed jobs then need no worker slot.
    """
    submit_cls: type[BaseOperator]
    cleanup_cls: type[BaseOperator]
    if start_in_triggerer:
        submit_cls, cleanup_cls = JrsStartInTriggererSparkSubmitOperator, JrsStartInTriggererCleanupOperator
    else:
        submit_cls, cleanup_cls = JrsSparkSubmitOperator, JrsCleanupOperator
    conn = {k: submit_kwargs[k] for k in ("jrs_conn_id", "jrs_namespace") if k in submit_kwargs}
    with TaskGroup(group_id) as group:
        submit = submit_cls(task_id="submit", **submit_kwargs)
        cleanup_cls(
            task_id="cleanup",
            jobs=[submit],
            cleanup_paths=cleanup_paths,
            cleanup_callables=cleanup_callables,
            **conn,
        )
    return group
