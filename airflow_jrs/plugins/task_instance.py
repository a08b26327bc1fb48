"""Which job a task instance computed or reused: what it handed downstream (its XCom), else
the lease it holds while it runs. Backs the task instance's "Job result" tab.
"""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException

from airflow_jrs.store.namespace import JobNamespace

#: What the UI leaves in a task instance view's link when the task is not mapped: Airflow 3.3
#: fills ``{MAP_INDEX}`` only for mapped tasks and sends the placeholder itself otherwise.
UNFILLED_MAP_INDEX = "{MAP_INDEX}"


def map_index(raw: str | None) -> int:
    """The task instance's map index from the tab's link: -1 when missing or left unfilled."""
    if raw is None or raw.strip() in ("", UNFILLED_MAP_INDEX):
        return -1
    try:
        return int(raw)
    except ValueError:
        raise HTTPException(
            400, f"map_index={raw!r} is not an integer: give the task instance's map index (-1 or none if unmapped)"
        ) from None


def same_map_index(job_id: str, owner: dict[str, Any], index: int) -> bool:
    """Is the lease of ``job_id`` held by map index ``index`` of the task? Every map index of a
    mapped task holds a lease under the same DAG, run and task: the owner's ``map_index`` when it
    names one, else the default job id's ``.map-<i>`` suffix (see :mod:`airflow_jrs.domain.identity`)."""
    if "map_index" in owner:
        return owner["map_index"] == index
    if index < 0:
        return True
    return job_id.endswith(f".map-{index}")


def xcom_payload(dag_id: str, run_id: str, task_id: str, index: int) -> dict[str, Any]:
    """What the task instance handed downstream (its job result payload), from Airflow's XCom table."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    from airflow_jrs.domain.payload import SKIPPED_RESULT_KEY

    with create_session() as session:
        for key in ("return_value", SKIPPED_RESULT_KEY):
            stmt = XComModel.get_many(
                run_id=run_id, key=key, task_ids=task_id, dag_ids=dag_id, map_indexes=index, limit=1
            )
            row = session.scalars(stmt).first()
            value = XComModel.deserialize_value(row) if row is not None else None
            if isinstance(value, dict) and value.get("job_id"):
                return value
    return {}


def running_job(jobs: JobNamespace, dag_id: str, run_id: str, task_id: str, index: int) -> str | None:
    """The job whose lease the task instance holds now (it has not returned yet), if any."""
    for job_id, holder in jobs.held_leases().items():
        o = holder.owner
        if (o.get("dag_id"), o.get("run_id"), o.get("task_id")) == (dag_id, run_id, task_id) and (
            same_map_index(job_id, o, index)
        ):
            return job_id
    return None
