"""Operators: JRS-guarded Spark submission and the cleanup that commits results.

The operator classes are imported lazily: the deploy-mode helpers
(:mod:`airflow_jrs.launch.deploy_modes`, :mod:`airflow_jrs.launch.cluster_outcome`) import no Airflow, so a
launcher outside Airflow (the fault trials' cluster stand-in) can use them without paying for
Airflow's import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_jrs.operators.cleanup import JrsCleanupOperator
    from airflow_jrs.operators.factory import jrs_spark_job
    from airflow_jrs.operators.pyspark import JrsPySparkOperator
    from airflow_jrs.operators.spark import JrsSparkSubmitOperator
    from airflow_jrs.operators.spark_jdbc import JrsSparkJDBCOperator
    from airflow_jrs.operators.spark_pipelines import JrsSparkPipelinesOperator
    from airflow_jrs.operators.spark_sql import JrsSparkSqlOperator
    from airflow_jrs.operators.start_in_triggerer import (
        JrsStartInTriggererCleanupOperator,
        JrsStartInTriggererSparkSubmitOperator,
    )

_LAZY = {
    "JrsCleanupOperator": "airflow_jrs.operators.cleanup",
    "JrsPySparkOperator": "airflow_jrs.operators.pyspark",
    "JrsSparkJDBCOperator": "airflow_jrs.operators.spark_jdbc",
    "JrsSparkPipelinesOperator": "airflow_jrs.operators.spark_pipelines",
    "JrsSparkSqlOperator": "airflow_jrs.operators.spark_sql",
    "JrsSparkSubmitOperator": "airflow_jrs.operators.spark",
    "JrsStartInTriggererCleanupOperator": "airflow_jrs.operators.start_in_triggerer",
    "JrsStartInTriggererSparkSubmitOperator": "airflow_jrs.operators.start_in_triggerer",
    "jrs_spark_job": "airflow_jrs.operators.factory",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'airflow_jrs.operators' has no attribute {name!r}")


__all__ = [
    "JrsCleanupOperator",
    "JrsPySparkOperator",
    "JrsSparkJDBCOperator",
    "JrsSparkPipelinesOperator",
    "JrsSparkSqlOperator",
    "JrsSparkSubmitOperator",
    "JrsStartInTriggererCleanupOperator",
    "JrsStartInTriggererSparkSubmitOperator",
    "jrs_spark_job",
]
