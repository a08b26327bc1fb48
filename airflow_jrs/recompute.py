"""Recompute on purpose, for one DAG run: ``{"jrs_recompute": ...}`` in the run's conf.

"Done is done" (DESIGN.md invariant 1) holds *until someone forgets a result on purpose*; a
DAG run's conf is the on-purpose switch an Airflow user already has at hand ("Trigger DAG w/
config", ``airflow dags trigger --conf '{"jrs_recompute": true}'``), per run and without
touching the DAG file or the store by hand:

* ``true`` recomputes every job of the run's JrsSparkSubmitOperator tasks;
* a list of task ids and/or job ids (or one such string) recomputes only those.

The old result is forgotten under the job's lease just before Spark is submitted: it goes to
the job's history (``airflow-jrs history JOB_ID``), the new one takes its place. A result
this same run computed is never recomputed again, so a retry or clear of a task of a
recompute run does not redo work that run already did.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.store import JobResultEntry

#: The DAG run conf key.
RECOMPUTE_KEY = "jrs_recompute"
_TRUE = ("true", "1", "yes", "all", "*")
_FALSE = ("", "false", "0", "no", "none")


def _run_conf(context: Mapping[str, Any]) -> Mapping[str, Any]:
    dag_run = context.get("dag_run")
    conf = getattr(dag_run, "conf", None) if dag_run is not None else None
    return conf if isinstance(conf, Mapping) else {}


def requested(context: Mapping[str, Any], *, task_id: str, job_id: str) -> bool:
    """Does this run's conf ask to recompute the job of ``task_id``? Raises
    :class:`JrsConfigError` on a value it cannot read (a typo must not silently reuse)."""
    value = _run_conf(context).get(RECOMPUTE_KEY)
    if value is None or value is False:
        return False
    if value is True:
        return True
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        value = [value]
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return task_id in value or job_id in value
    raise JrsConfigError(
        f"DAG run conf {RECOMPUTE_KEY!r} must be true/false or a list of task ids or job ids, got {value!r}"
    )


def computed_by_this_run(entry: JobResultEntry, context: Mapping[str, Any]) -> bool:
    """The stored result was computed by this very DAG run (a retry or clear of a recompute run)."""
    attempt = entry.result.attempt
    return attempt is not None and attempt.run_id == context.get("run_id")


def describe_reuse(job_id: str, entry: JobResultEntry) -> str:
    """Why Spark is not started, and how to recompute instead: the first lines an on-call
    engineer reads in the task log."""
    result = entry.result
    when = result.end_time or entry.created_at
    attempt = result.attempt
    by = (
        f"run {attempt.run_id} ({attempt.dag_id}.{attempt.task_id}, try {attempt.try_number})"
        if attempt is not None
        else "an unknown run"
    )
    return (
        f"Job {job_id}: reusing its {result.status.value} result ({entry.state.value}), computed "
        f"{when.isoformat() if when else 'at an unknown time'} by {by}"
        f"{f', fence {result.fence}' if result.fence is not None else ''}; Spark is not "
        f"started. To recompute instead, trigger the DAG run with conf "
        f'{{"{RECOMPUTE_KEY}": true}} (or a list of task or job ids), or run: airflow-jrs forget {job_id}'
    )
