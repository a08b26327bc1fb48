"""A real local Airflow deployment for tests, benchmarks, the demo and users' own trials.

:mod:`.local` supervises the processes, :mod:`.rest` talks to the REST API v2 as the UI does,
:mod:`.backfills` creates and awaits backfills, :mod:`.environment` builds what every process
shares. No Airflow import anywhere here: Airflow only ever runs as a process.
"""

from airflow_jrs.deployment.backfills import BackfillResult, Backfills
from airflow_jrs.deployment.environment import ROOT, SQLITE_CONNECT_ARGS, free_port, jrs_env
from airflow_jrs.deployment.local import COMPONENTS, LocalDeployment
from airflow_jrs.deployment.rest import AirflowClient, ApiError, DeploymentError, iso

__all__ = [
    "COMPONENTS",
    "ROOT",
    "SQLITE_CONNECT_ARGS",
    "AirflowClient",
    "ApiError",
    "BackfillResult",
    "Backfills",
    "DeploymentError",
    "LocalDeployment",
    "free_port",
    "iso",
    "jrs_env",
]
