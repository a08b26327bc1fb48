"""The jobs of a DAG's date range, for the actions and the page: ``airflow-jrs plan``'s reading.

:func:`airflow_jrs.cli.plan.plan_jobs` derives a range's job ids with the operators' own rule and
reads them in one pipelined batch; it takes the CLI's context only for its store and its jobs,
so :func:`plan_range` hands it those two and nothing else. The page's API server finds the DAG
through Airflow's metadata DB (:func:`find_dag`): its DAG file where the DAG processor last
parsed it, which may be in a bundle outside ``[core] dags_folder``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from airflow_jrs.actions import NOT_FOUND, ActionError
from airflow_jrs.cli.plan import PlannedJob, load_dag, plan_jobs

if TYPE_CHECKING:
    from airflow_jrs.cli.common import Ctx
    from airflow_jrs.protocol.jobs import JobNamespace
    from airflow_jrs.store import RedisJobResultStore


@dataclass(frozen=True)
class _Reader:
    """What :func:`~airflow_jrs.cli.plan.plan_jobs` reads of a CLI context: the jobs and their store."""

    jobs: JobNamespace

    @property
    def store(self) -> RedisJobResultStore:
        return self.jobs.results


def plan_range(jobs: JobNamespace, dag: Any, start: datetime, end: datetime) -> tuple[list[PlannedJob], list[str]]:
    """Every guarded job of ``dag`` from ``start`` to ``end`` (inclusive) and where it stands."""
    return plan_jobs(cast("Ctx", _Reader(jobs)), dag, start, end)


def find_dag(dag_id: str) -> Any:
    """``dag_id`` parsed from the file Airflow's DAG processor last parsed it from (its
    ``fileloc`` in the metadata DB): the API server reads the same file the scheduler runs."""
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session

    with create_session() as session:
        model = session.get(DagModel, dag_id)
        fileloc = model.fileloc if model is not None else None
    if fileloc is None:
        raise ActionError(f"Airflow knows no DAG {dag_id!r} (not parsed yet, or deleted); check the DAG id", NOT_FOUND)
    return load_dag(dag_id, fileloc)
