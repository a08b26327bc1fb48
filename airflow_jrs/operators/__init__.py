"""Operators: JRS-guarded Spark submission and the cleanup that commits results."""

from airflow_jrs.operators.cleanup import JrsCleanupOperator, jrs_spark_job
from airflow_jrs.operators.spark import JrsSparkSubmitOperator

__all__ = ["JrsCleanupOperator", "JrsSparkSubmitOperator", "jrs_spark_job"]
