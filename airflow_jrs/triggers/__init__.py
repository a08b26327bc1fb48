"""Triggers: async waits that run in Airflow's triggerer (importable there, no I/O at import)."""

from airflow_jrs.triggers.job_result import JobResultTrigger

__all__ = ["JobResultTrigger"]
