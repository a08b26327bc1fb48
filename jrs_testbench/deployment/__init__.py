"""A real local Airflow deployment for tests, benchmarks, the demo and users' own trials.

:mod:`.local` supervises the processes, :mod:`.rest` talks to the REST API v2 as the UI does,
:mod:`.backfills` creates and awaits backfills, :mod:`.environment` builds what every process
shares; the project's connections and paths come from :func:`jrs_testbench.helpers.jrs_env`.
No Airflow import anywhere here: Airflow only ever runs as a process.
"""

from jrs_testbench.deployment.backfills import BackfillResult, Backfills
from jrs_testbench.deployment.environment import SQLITE_CONNECT_ARGS
from jrs_testbench.deployment.local import COMPONENTS, LocalDeployment
from jrs_testbench.deployment.rest import AirflowClient, ApiError, DeploymentError, iso

__all__ = [
    "COMPONENTS",
    "SQLITE_CONNECT_ARGS",
    "AirflowClient",
    "ApiError",
    "BackfillResult",
    "Backfills",
    "DeploymentError",
    "LocalDeployment",
    "iso",
]
