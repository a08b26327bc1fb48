"""Operators: JRS-guarded Spark submission and the cleanup that commits results."""

from airflow_jrs.operators.cleanup import JrsCleanupOperator
from airflow_jrs.operators.factory import jrs_spark_job
from airflow_jrs.operators.spark import JrsSparkSubmitOperator
from airflow_jrs.operators.start_in_triggerer import (
    JrsStartInTriggererCleanupOperator,
    JrsStartInTriggererSparkSubmitOperator,
)

__all__ = [
    "JrsCleanupOperator",
    "JrsSparkSubmitOperator",
    "JrsStartInTriggererCleanupOperator",
    "JrsStartInTriggererSparkSubmitOperator",
    "jrs_spark_job",
]
