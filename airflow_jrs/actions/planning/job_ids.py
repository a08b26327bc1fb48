"""The job ids of a DAG's date range: its runs as the timetable makes them, each guarded task's
job id by the operators' own rule, before any run exists.

The guarded tasks are found by their marker (:mod:`airflow_jrs.protocol.guarded_task`), not by
importing operator classes. The job ids come from the DAG itself (:mod:`.dags`) and the
operators' own rule (:func:`airflow_jrs.domain.identity.job_id_for`): the default id for tasks
without ``job_id``; a templated ``job_id`` is rendered with the interval's values (``ds``,
``ds_nodash``, ``ts``, ``logical_date``, ``data_interval_start``/``end``, ``dag``, ``task``,
``ti.dag_id``/``ti.task_id``, ``dag_id``, ``task_id``). A template needing anything else (XCom, a
Variable, a macro) is refused by name (:class:`UnrenderableJobId`) rather than guessed. A mapped
task whose DAG file says its expansion (``expand`` over literal lists) is planned per map index,
as the task each map index becomes (:mod:`.mapped`); one expanded over another task's output (or
in a mapped group) is left out, and named: only a run knows its map indexes. The timetable calls
differ between Airflow minors: :mod:`airflow_jrs.compat` holds them.
"""

from __future__ import annotations

from datetime import datetime
from types import SimpleNamespace
from typing import Any

from airflow_jrs.actions import NOT_FOUND, USAGE, ActionError
from airflow_jrs.actions.planning.mapped import is_mapped, map_index_of, planned_map_indexes
from airflow_jrs.actions.planning.runs import ExistingRun, as_run
from airflow_jrs.domain.identity import job_id_for
from airflow_jrs.protocol.guarded_task import guarded_kind, is_templated
from airflow_jrs.views.words import stamp

#: What the error for a DAG without one names (the marker, not this list, decides what counts).
GUARDED_OPERATORS = "JrsSparkSubmitOperator, JrsPySparkOperator, @task.jrs_pyspark, JrsSparkSqlOperator"
RENDERABLE = "ds, ds_nodash, ts, ts_nodash, logical_date, data_interval_start/end, dag, task, ti, dag_id, task_id"


class UnrenderableJobId(ActionError):
    """A task's ``job_id`` template uses something only a run knows (XCom, a Variable, a macro)."""


def intervals(dag: Any, start: datetime, end: datetime) -> list[Any]:
    """The DAG's runs between ``start`` and ``end`` (inclusive), as its timetable makes them."""
    from airflow.timetables.base import TimeRestriction

    from airflow_jrs.compat import AIRFLOW_VERSION_TEXT, core_timetable, next_dagrun_info

    timetable = core_timetable(dag)
    if getattr(timetable, "partitioned", False):
        if not hasattr(timetable, "iter_partition_dagrun_infos"):
            raise ActionError(
                f"DAG {dag.dag_id!r} has a partitioned timetable, and listing its partitions needs Airflow 3.3 "
                f"or later (this is Airflow {AIRFLOW_VERSION_TEXT}); upgrade Airflow to plan it",
                USAGE,
            )
        return list(timetable.iter_partition_dagrun_infos(earliest=start, latest=end))
    import pendulum

    restriction = TimeRestriction(pendulum.instance(start), pendulum.instance(end), catchup=True)
    infos, info = [], None
    while (info := next_dagrun_info(timetable, info, restriction)) is not None:
        infos.append(info)
    return infos


def _render(
    template: str, dag: Any, task: Any, info: Any, compiled: dict[str, Any] | None = None, map_index: int = -1
) -> str:
    """``template`` rendered for one interval. ``compiled`` caches the compiled template across
    intervals: compiling is 5 ms a job, so ten years of ten jobs would spend minutes on it."""
    import jinja2

    logical = info.logical_date
    interval = info.data_interval
    context: dict[str, Any] = {
        "dag": dag,
        "task": task,
        "ti": SimpleNamespace(dag_id=dag.dag_id, task_id=task.task_id, map_index=map_index),
        "dag_id": dag.dag_id,
        "task_id": task.task_id,
        "logical_date": logical,
        "data_interval_start": interval.start if interval else None,
        "data_interval_end": interval.end if interval else None,
    }
    if logical is not None:
        context |= {
            "ds": logical.strftime("%Y-%m-%d"),
            "ds_nodash": logical.strftime("%Y%m%d"),
            "ts": logical.isoformat(),
            "ts_nodash": logical.strftime("%Y%m%dT%H%M%S"),
        }
    if compiled is None:
        compiled = {}
    if template not in compiled:
        env = dag.get_template_env().overlay(undefined=jinja2.StrictUndefined)
        compiled[template] = env.from_string(template)
    try:
        return str(compiled[template].render(**context))
    except jinja2.UndefinedError as exc:
        raise UnrenderableJobId(
            f"task {task.task_id!r}: its job_id template {template!r} uses something a plan cannot render "
            f"({exc.message}); a plan renders {RENDERABLE}",
            USAGE,
        ) from None


def guarded_tasks(dag: Any) -> tuple[list[Any], list[str]]:
    """The DAG's guarded tasks (:mod:`airflow_jrs.protocol.guarded_task`: whatever runs Spark
    through the job result store, operators and ``@task.jrs_pyspark`` alike; a mapped one as one
    task per map index when its DAG file says its expansion), and the task ids of the mapped ones
    only a run can expand, which are left out. Asks the marker, not the operator classes."""
    tasks, mapped = [], []
    for task in dag.tasks:
        if not is_mapped(task):
            if guarded_kind(task):
                tasks.append(task)
        elif guarded_kind(getattr(task, "operator_class", None)) or guarded_kind(task):
            per_index = planned_map_indexes(task)
            if per_index is None:
                mapped.append(task.task_id)
            else:
                tasks.extend(per_index)
    return tasks, mapped


def job_ids(
    dag: Any, start: datetime, end: datetime, runs: dict[float, ExistingRun] | None = None
) -> tuple[list[tuple[Any, Any, str]], list[str]]:
    """``(interval, task, job id)`` for every guarded task and interval, and notes. An interval
    whose date has a run in ``runs`` (:func:`~.runs.existing_runs`) is seen with that run's data
    interval (:func:`~.runs.as_run`): a backfill runs it again as it is, so its tasks render with it."""
    notes: list[str] = []
    tasks, mapped = guarded_tasks(dag)
    if mapped:
        notes.append(
            f"left out mapped tasks {mapped}: expanded over another task's output (or in a mapped group), their "
            "job ids depend on the run's expansion"
        )
    if not tasks:
        raise ActionError(
            f"DAG {dag.dag_id!r} has no guarded task ({GUARDED_OPERATORS}){' besides mapped ones' if mapped else ''}; "
            "nothing to plan",
            NOT_FOUND,
        )
    infos = [as_run(info, runs) for info in intervals(dag, start, end)]
    if not infos:
        raise ActionError(
            f"DAG {dag.dag_id!r} has no scheduled run between {stamp(start)} and {stamp(end)} "
            "(no schedule, or outside its start/end date); check the dates",
            NOT_FOUND,
        )
    out = []
    compiled: dict[str, Any] = {}
    for info in infos:
        for task in tasks:
            template, index = task.job_id, map_index_of(task)
            rendered = _render(template, dag, task, info, compiled, index) if is_templated(template) else template
            interval = info.data_interval
            context = {
                "ti": SimpleNamespace(dag_id=dag.dag_id, task_id=task.task_id, map_index=index),
                "partition_key": getattr(info, "partition_key", None),
                "data_interval_start": interval.start if interval else None,
                "logical_date": info.logical_date,
                "run_id": f"backfill__{info.run_after.isoformat()}",
            }
            out.append((info, task, job_id_for(rendered, context)))
    _one_job_per_map_index(out)
    return out, notes


def _one_job_per_map_index(jobs: list[tuple[Any, Any, str]]) -> None:
    """Refuse a mapped task whose map indexes of one date share a job id (a ``job_id`` without the
    map index): at run time all but one would skip on the first one's result."""
    seen: dict[tuple[int, str, str], int] = {}
    for info, task, job_id in jobs:
        index = map_index_of(task)
        if index < 0:
            continue
        first = seen.setdefault((id(info), task.task_id, job_id), index)
        if first != index:
            raise ActionError(
                f"task {task.task_id!r} is mapped, and its map indexes {first} and {index} both have job id "
                f"{job_id!r}: all but one would skip on the first one's result. Leave job_id unset (the "
                "default ends in .map-<index>) or name the map index in it ({{ ti.map_index }})",
                USAGE,
            )
