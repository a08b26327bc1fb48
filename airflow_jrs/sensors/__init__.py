"""Sensors: wait for job results in the job result store."""

from airflow_jrs.sensors.job_result import JobResultSensor

__all__ = ["JobResultSensor"]
