"""``@task.jrs_pyspark``: the provider's ``@task.pyspark``, guarded by the job result store.

Built like the Spark provider's ``pyspark_task`` (a ``DecoratedOperator`` over the operator
class), on :class:`~airflow_jrs.operators.pyspark.JrsPySparkOperator`; registered under
``task-decorators`` in :mod:`airflow_jrs.get_provider_info`, so ``from airflow.sdk import task``
offers it as ``task.jrs_pyspark``::

    @task.jrs_pyspark(conn_id="spark_local", outputs={"ontime": "ontime"})
    def ontime(day: str, spark=None, jrs=None):
        df = spark.read.parquet(...).where(...)
        df.write.parquet(f"{jrs.output}/ontime")
        return {"rows": df.count()}  # the result's metrics

The task returns the job's result payload (``payload["metrics"]`` is what the function
returned), whether it computed the job or reused a stored result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from airflow.providers.common.compat.sdk import DecoratedOperator, TaskDecorator, task_decorator_factory

from airflow_jrs.operators.job_params import JOB_TEMPLATE_FIELDS
from airflow_jrs.operators.pyspark import JrsPySparkOperator, with_session_defaults


class _JrsPySparkDecoratedOperator(DecoratedOperator, JrsPySparkOperator):  # type: ignore[misc]
    custom_operator_name = "@task.jrs_pyspark"
    # DecoratedOperator's ("op_args", "op_kwargs") would win by the MRO: the job's own fields
    # must render at run time (a templated job_id) and be serialized like the operator's.
    template_fields: Sequence[str] = (*DecoratedOperator.template_fields, *JOB_TEMPLATE_FIELDS)

    def __init__(
        self,
        *,
        python_callable: Callable[..., Any],
        conn_id: str | None = None,
        config_kwargs: dict[str, Any] | None = None,
        op_args: Sequence[Any] | None = None,
        op_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        # Before DecoratedOperator checks the call against the signature: the author never passes these.
        with_session_defaults(python_callable)
        super().__init__(
            kwargs_to_upstream={"python_callable": python_callable, "op_args": op_args, "op_kwargs": op_kwargs},
            python_callable=python_callable,
            config_kwargs=config_kwargs,
            conn_id=conn_id,
            op_args=op_args,
            op_kwargs=op_kwargs,
            **kwargs,
        )


def jrs_pyspark_task(
    python_callable: Callable[..., Any] | None = None, multiple_outputs: bool | None = None, **kwargs: Any
) -> TaskDecorator:
    """``@task.jrs_pyspark``: takes ``@task.pyspark``'s arguments plus JrsPySparkOperator's job ones."""
    return task_decorator_factory(
        python_callable=python_callable,
        multiple_outputs=multiple_outputs,
        decorated_operator_class=_JrsPySparkDecoratedOperator,
        **kwargs,
    )
