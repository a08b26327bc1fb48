"""The runs of a DAG that Airflow's metadata DB already has in a date range.

A backfill with ``--reprocess-behavior completed`` runs such a run again as it is: with its conf
(a ``jrs_recompute`` request in it acts once, :func:`airflow_jrs.domain.recompute.verdict`) and
its data interval (a run triggered by hand has its own, which its tasks' templates render). A plan
reads them so that it says what that run will do, not what a fresh run would.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from airflow_jrs.domain.recompute import RECOMPUTE_KEY


@dataclass(frozen=True)
class ExistingRun:
    """A DAG run a backfill with ``--reprocess-behavior completed`` would run again, conf and all."""

    run_id: str
    conf: Any
    #: ``(start, end)`` as Airflow stored it: a run triggered by hand has one of its own (the
    #: trigger time's, or one ending at its logical date), which a backfill keeps when it re-runs it.
    data_interval: tuple[datetime, datetime] | None = None
    #: The DAG version the run was created with, when its bundle is versioned (a git bundle): its
    #: date is planned with that version's tasks. ``None``: the latest version runs it.
    dag_version_id: str | None = None


def as_run(info: Any, runs: dict[float, ExistingRun] | None) -> Any:
    """``info`` (a timetable's ``DagRunInfo``) with the data interval of the run that exists at
    its logical date, if any: what that run's ``data_interval_start``/``end`` templates render.
    The default job id reads the logical date (:func:`airflow_jrs.domain.identity.run_key`), the
    same either way."""
    run = runs.get(info.logical_date.timestamp()) if runs and info.logical_date is not None else None
    if run is None or run.data_interval is None or info.data_interval is None:
        return info
    import pendulum
    from airflow.timetables.base import DataInterval

    start, end = run.data_interval
    # Not info._replace(): DagRunInfo.logical_date is a property, its data interval's start.
    return SimpleNamespace(
        logical_date=info.logical_date,
        data_interval=DataInterval(pendulum.instance(start), pendulum.instance(end)),
        run_after=info.run_after,
        partition_key=getattr(info, "partition_key", None),
        partition_date=getattr(info, "partition_date", None),
    )


def existing_runs(dag_id: str, start: datetime, end: datetime) -> tuple[dict[float, ExistingRun], str | None]:
    """The DAG's runs in the range from Airflow's metadata DB, by logical date (a timestamp),
    and a note when the DB cannot be read (the plan then shows what a run without conf does)."""
    runs, _, note = runs_by_date(dag_id, start, end)
    return runs, note


def runs_by_date(
    dag_id: str, start: datetime, end: datetime
) -> tuple[dict[float, ExistingRun], dict[float, list[str]], str | None]:
    """:func:`existing_runs` and every run id of each logical date (a timestamp; in run id
    order), from one query: what the calendar shows under a date besides what it plans with.
    Of several runs of one date, the plan sees the last in run id order."""
    try:
        from airflow.configuration import conf
        from airflow.models.dag_version import DagVersion
        from airflow.models.dagrun import DagRun
        from airflow.utils.session import create_session
        from sqlalchemy import select
        from sqlalchemy.engine import make_url

        url = make_url(conf.get("database", "sql_alchemy_conn"))
        if url.get_backend_name() == "sqlite" and url.database and not os.path.exists(url.database):
            raise FileNotFoundError(f"no metadata DB at {url.database}")  # connecting would create an empty one
        with create_session() as session:
            rows = session.execute(
                select(
                    DagRun.logical_date,
                    DagRun.run_id,
                    DagRun.conf,
                    DagRun.data_interval_start,
                    DagRun.data_interval_end,
                    DagRun.created_dag_version_id,
                    DagVersion.bundle_version,
                )
                .outerjoin(DagVersion, DagVersion.id == DagRun.created_dag_version_id)
                .where(DagRun.dag_id == dag_id, DagRun.logical_date >= start, DagRun.logical_date <= end)
                .order_by(DagRun.run_id)
            ).all()
    except Exception as exc:  # a plan is a preview: say what it could not see, and go on
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        return (
            {},
            {},
            (
                f"could not read the DAG's runs from Airflow's metadata DB ({type(exc).__name__}: {first}); "
                f"runs whose conf asks to recompute ({RECOMPUTE_KEY}) are not taken into account"
            ),
        )
    run_ids: dict[float, list[str]] = {}
    for row in rows:
        if row.logical_date:
            run_ids.setdefault(row.logical_date.timestamp(), []).append(row.run_id)
    return (
        {
            row.logical_date.timestamp(): ExistingRun(
                row.run_id,
                row.conf,
                (row.data_interval_start, row.data_interval_end) if row.data_interval_start else None,
                # A versioned bundle (git) runs a run's tasks again with the version it was created with;
                # a local folder has one version, the file on disk: the latest serialized DAG.
                str(row.created_dag_version_id) if row.created_dag_version_id and row.bundle_version else None,
            )
            for row in rows
            if row.logical_date
        },
        run_ids,
        None,
    )
