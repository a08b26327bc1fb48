"""The job ids of a DAG's date range: its runs as the timetable makes them, each guarded task's
job id by the operators' own rule, before any run exists.

The DAG is the serialized one (:mod:`.dags`), its guarded tasks what :mod:`.serialized` reads of
them (the facts the dag-processor serialized), and the job ids come from the operators' own rule
(:func:`airflow_jrs.domain.identity.job_id_for`): the default id for tasks without ``job_id``; a
templated ``job_id`` on the allow-list of :mod:`.templates` (the date's values, ``ti``, Airflow's
filters, ``macros.ds_add``/``ds_format``) is rendered in a sandbox, in UTC as the run renders it.
A template needing anything else (XCom, a Variable, a user-defined macro, a statement) is not
guessed: the task is left out with "needs the DAG file". A date with a run from a versioned
bundle is planned with the DAG version that run used (Airflow runs it again with it); any other
date with the latest. The timetable calls differ between Airflow minors: :mod:`airflow_jrs.compat` holds them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from airflow_jrs.actions import NOT_FOUND, USAGE, ActionError
from airflow_jrs.actions.planning import templates
from airflow_jrs.actions.planning.runs import ExistingRun, as_run
from airflow_jrs.actions.planning.serialized import NEEDS_DAG_FILE, PlanTask, plan_tasks
from airflow_jrs.actions.planning.templates import RENDERABLE
from airflow_jrs.domain.identity import job_id_for
from airflow_jrs.protocol.guarded_task import is_templated
from airflow_jrs.views.words import stamp

#: What the error for a DAG without one names (the marker, not this list, decides what counts).
GUARDED_OPERATORS = (
    "JrsSparkSubmitOperator, JrsPySparkOperator, @task.jrs_pyspark, JrsSparkSqlOperator, JrsSparkJDBCOperator, "
    "JrsSparkPipelinesOperator"
)


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


def _date_values(info: Any) -> dict[str, Any]:
    """What a template may read of one interval, computed once per date (not per job). In UTC, as
    the run's logical date and data interval are stored and handed to its tasks (a timetable may
    answer in the DAG's time zone)."""
    logical = _utc(info.logical_date)
    interval = info.data_interval
    values: dict[str, Any] = {
        "logical_date": logical,
        "data_interval_start": _utc(interval.start) if interval else None,
        "data_interval_end": _utc(interval.end) if interval else None,
    }
    if logical is not None:
        values |= {
            "ds": logical.strftime("%Y-%m-%d"),
            "ds_nodash": logical.strftime("%Y%m%d"),
            "ts": logical.isoformat(),
            "ts_nodash": logical.strftime("%Y%m%dT%H%M%S"),
        }
    return values


def _utc(when: Any) -> Any:
    if when is None or getattr(when, "tzinfo", None) is None:
        return when
    import pendulum

    return pendulum.instance(when).in_timezone("UTC")


def _render(template: str, dag_id: str, task: PlanTask, dated: dict[str, Any], compiled: dict[str, Any]) -> str:
    """``template`` rendered for one interval (``dated``: :func:`_date_values`), when it is on
    the allow-list (:mod:`.templates`); :class:`UnrenderableJobId` otherwise, or when it fails.
    ``compiled`` caches each template's check and compilation across intervals."""
    ti = SimpleNamespace(dag_id=dag_id, task_id=task.task_id, map_index=task.map_index)
    if template not in compiled:
        fast = _plain_names(template)
        if fast is not None:
            compiled[template] = fast
        else:
            if "\0env" not in compiled:
                compiled["\0env"] = templates.sandbox()
            try:
                templates.check(compiled["\0env"], template)
                compiled[template] = compiled["\0env"].from_string(template)
            except Exception as exc:  # NotPlannable, or anything Jinja raises compiling it
                compiled[template] = exc
    found = compiled[template]
    try:
        if isinstance(found, Exception):
            raise found
        if isinstance(found, list):  # text and plain names only: what Jinja would print, without Jinja
            named = {**dated, "ti": ti}
            return "".join(part if i % 2 == 0 else _plain_value(part, named) for i, part in enumerate(found))
        context: dict[str, Any] = {
            **dated,
            "dag": SimpleNamespace(dag_id=dag_id),
            "task": SimpleNamespace(task_id=task.task_id),
            "ti": ti,
            "macros": compiled.setdefault("\0macros", templates.macros()),
        }
        return str(found.render(**context))
    except Exception as exc:  # a plan is a preview: one task's template never fails the others
        why = str(exc) or type(exc).__name__
        raise UnrenderableJobId(
            f"task {task.task_id!r}: its job_id template {template!r} cannot be planned ({why}); a plan renders "
            f"{RENDERABLE}",
            USAGE,
            ui=NEEDS_DAG_FILE,
        ) from None


#: ``{{ name }}`` of a value every plan knows: rendered without Jinja (str() of it, as Jinja prints
#: it). A calendar renders 18,300 job ids for a year of 50 jobs; Jinja's context per render cost
#: most of a second of it (docs/benchmarks.md, the calendar).
_PLAIN = re.compile(r"\{\{\s*(ds|ds_nodash|ts|ts_nodash|ti\.dag_id|ti\.task_id|ti\.map_index)\s*\}\}")


def _plain_names(template: str) -> list[str] | None:
    """``template`` split into text and plain names (odd places), or ``None`` when it holds
    anything else Jinja would interpret (a filter, a call, a statement, a comment)."""
    parts = _PLAIN.split(template)
    if any(("{{" in text or "{%" in text or "{#" in text) for text in parts[0::2]):
        return None
    return parts


def _plain_value(name: str, context: dict[str, Any]) -> str:
    head, _, attr = name.partition(".")
    value = context.get(head)
    if value is None:
        raise UnrenderableJobId(f"{name} is undefined for this date", USAGE, ui=NEEDS_DAG_FILE)
    return str(getattr(value, attr) if attr else value)


def guarded_tasks(dag: Any) -> tuple[list[PlanTask], list[str]]:
    """The DAG's guarded tasks (per map index for a mapped one whose expansion the DAG says) and
    the task ids of the mapped ones only a run can expand. A task the serialized DAG cannot
    plan (:class:`~.serialized.Unplannable`) is refused by name."""
    tasks, mapped, unplannable = plan_tasks(dag)
    if unplannable:
        raise UnrenderableJobId(unplannable[0].note(), USAGE, ui=unplannable[0].note())
    return tasks, mapped


class _Versions:
    """The tasks of each DAG version a run used (:func:`.dags.version_dag`), read once each."""

    def __init__(self, latest: Any, notes: list[str], load: Callable[[str], Any] | None) -> None:
        self._latest = latest
        self._notes = notes
        self._load = load
        self._tasks: dict[str | None, list[PlanTask]] = {}

    def tasks(self, run: ExistingRun | None) -> list[PlanTask]:
        version = run.dag_version_id if run is not None and self._load is not None else None
        if version not in self._tasks:
            dag = self._load(version) if version is not None and self._load is not None else None
            if version is not None and dag is None:
                gone = run.run_id if run else "?"
                self._notes.append(f"run {gone}: its DAG version is gone from the metadata DB; planned with the latest")
            found, _, unplannable = plan_tasks(dag if dag is not None else self._latest)
            self._notes.extend(u.note() for u in unplannable)
            self._tasks[version] = found
        return self._tasks[version]


def job_ids(
    dag: Any,
    start: datetime,
    end: datetime,
    runs: dict[float, ExistingRun] | None = None,
    versions: Callable[[str], Any] | None = None,
) -> tuple[list[tuple[Any, PlanTask, str]], list[str]]:
    """``(interval, task, job id)`` for every guarded task and interval, and notes. An interval
    whose date has a run in ``runs`` (:func:`~.runs.existing_runs`) is seen with that run's data
    interval (:func:`~.runs.as_run`) and, given ``versions`` (a version id's serialized DAG),
    with the DAG version that run used. A task the serialized DAG cannot plan is left out, named
    in a note ("needs the DAG file")."""
    notes: list[str] = []
    latest, mapped, unplannable = plan_tasks(dag)
    notes.extend(u.note() for u in unplannable)
    if mapped:
        notes.append(
            f"left out mapped tasks {mapped}: expanded over another task's output (or in a mapped group), their "
            "job ids depend on the run's expansion"
        )
    if not latest and not unplannable:
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
    by_version = _Versions(dag, notes, versions)
    out = []
    compiled: dict[str, Any] = {}
    left_out: set[str] = set()
    for info in infos:
        logical = info.logical_date
        run = runs.get(logical.timestamp()) if runs and logical is not None else None
        dated = _date_values(info)
        run_id = f"backfill__{info.run_after.isoformat()}"
        for task in by_version.tasks(run) if run is not None else latest:
            template = task.job_id
            try:
                rendered = (
                    _render(template, dag.dag_id, task, dated, compiled)
                    if template is not None and is_templated(template)
                    else template
                )
            except UnrenderableJobId as exc:
                if task.task_id not in left_out:
                    left_out.add(task.task_id)
                    notes.append(f"{exc}; {NEEDS_DAG_FILE}")
                continue
            context = {
                "ti": SimpleNamespace(dag_id=dag.dag_id, task_id=task.task_id, map_index=task.map_index),
                "partition_key": getattr(info, "partition_key", None),
                "data_interval_start": dated["data_interval_start"],
                "logical_date": logical,
                "run_id": run_id,
            }
            out.append((info, task, job_id_for(rendered, context)))
    _one_job_per_map_index(out)
    return out, notes


def _one_job_per_map_index(jobs: list[tuple[Any, Any, str]]) -> None:
    """Refuse a mapped task whose map indexes of one date share a job id (a ``job_id`` without the
    map index): at run time all but one would skip on the first one's result."""
    seen: dict[tuple[int, str, str], int] = {}
    for info, task, job_id in jobs:
        index = task.map_index
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
