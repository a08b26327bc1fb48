"""Imported inside PySpark applications: no Airflow imports here."""

from airflow_jrs.spark.commit import job_context, read_commit_marker, write_commit_marker

__all__ = ["job_context", "read_commit_marker", "write_commit_marker"]
