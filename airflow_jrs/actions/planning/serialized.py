"""A DAG's guarded tasks as Airflow's serialized DAG keeps them: what a plan reads, with no DAG code.

Airflow 3's API server never runs a DAG file: it holds the metadata DB's credentials, the JWT
secret and the Fernet key, and only the dag-processor and the workers run DAG-author code. So
the page plans from what Airflow keeps for it (the serialized DAG, its timetable, the runs), and
the CLI plans from the serialized form of the DAG it parsed through this same module, so the two
cannot drift (docs/threat-model.md, "The API server runs no DAG code").

What Airflow does not serialize (the guarded marker, the flags, the job id template untruncated,
a fingerprint planned from the application file or the function's source) the dag-processor
serializes for each guarded task: :func:`airflow_jrs.protocol.guarded_task.plan_facts`, read
here as :class:`PlanTask`. A mapped task has no such facts (its operator is built per map
index at run time): its job id template and flags come from its ``partial_kwargs``, its kind
from its operator class when that class is airflow-jrs' own (imported from this package, never
from a DAG folder), and its fingerprint is unknown before a run. What still cannot be known here
is an :class:`Unplannable` with the reason, shown as "needs the DAG file", never guessed.
"""

from __future__ import annotations

import importlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from airflow_jrs.operators.job_params import job_param_default
from airflow_jrs.protocol.guarded_task import FACTS_ATTR, FACTS_VERSION, guarded_kind

#: What the page says for a task it cannot plan from the serialized DAG.
NEEDS_DAG_FILE = "needs the DAG file: run `airflow-jrs plan` where the DAG files are"
_OUR_PACKAGE = "airflow_jrs."


@dataclass(frozen=True)
class PlanTask:
    """One guarded task (one map index of a mapped one) as a plan sees it."""

    task_id: str
    kind: str
    job_id: str | None  # the template, untruncated; None: the default job id
    accept_changed_fingerprint: bool
    fingerprint: str | None  # None: known only once the task renders its arguments
    fingerprint_why: str | None = None
    map_index: int = -1


@dataclass(frozen=True)
class Unplannable:
    """A guarded task whose jobs the serialized DAG cannot name, and why."""

    task_id: str
    why: str

    def note(self) -> str:
        return f"task {self.task_id!r}: {self.why}; {NEEDS_DAG_FILE}"


def plan_tasks(dag: Any) -> tuple[list[PlanTask], list[str], list[Unplannable]]:
    """The guarded tasks of serialized ``dag`` (per map index for a mapped task whose expansion
    the DAG says), the mapped task ids only a run can expand, and the tasks it cannot plan."""
    tasks: list[PlanTask] = []
    run_time: list[str] = []
    unplannable: list[Unplannable] = []
    for task in dag.tasks:
        if getattr(task, "is_mapped", False):
            _mapped(task, tasks, run_time, unplannable)
            continue
        raw = getattr(task, FACTS_ATTR, None)
        if raw is None:
            if _our_guarded_kind(task) is not None:  # serialized by an airflow-jrs without the facts
                unplannable.append(Unplannable(task.task_id, "serialized before airflow-jrs kept plan facts"))
            continue
        found = _from_facts(task.task_id, raw)
        if isinstance(found, Unplannable):
            unplannable.append(found)
        elif _in_mapped_group(task):
            run_time.append(task.task_id)
        else:
            tasks.append(found)
    return tasks, run_time, unplannable


def _from_facts(task_id: str, raw: Any) -> PlanTask | Unplannable:
    try:
        facts = json.loads(raw) if isinstance(raw, str) else raw
        version = facts["v"]
    except (TypeError, ValueError, KeyError):
        return Unplannable(task_id, f"its plan facts are unreadable ({str(raw)[:80]!r})")
    if not isinstance(version, int) or not isinstance(facts, dict):
        return Unplannable(task_id, f"its plan facts are unreadable (version {version!r})")
    if version > FACTS_VERSION:
        return Unplannable(task_id, f"its plan facts are version {version}, written by a newer airflow-jrs")
    if not facts.get("job_id_literal", True):
        return Unplannable(task_id, "its job_id is not a string (an XCom or another task's output)")
    return PlanTask(
        task_id,
        str(facts["kind"]),
        facts.get("job_id"),
        bool(facts.get("accept_changed_fingerprint")),
        facts.get("fingerprint"),
        facts.get("fingerprint_why"),
    )


def _our_guarded_kind(task: Any) -> str | None:
    """The marker of ``task``'s operator class when the class is airflow-jrs' own: importing
    this package's module runs no DAG-author code; a class from anywhere else is not imported."""
    module = getattr(task, "_task_module", None) or ""
    name = getattr(task, "task_type", None) or getattr(task, "_task_type", None)
    if not module.startswith(_OUR_PACKAGE) or not name:
        return None
    try:
        return guarded_kind(getattr(importlib.import_module(module), name, None))
    except Exception:  # not ours any more (renamed, removed): not plannable as ours
        return None


def _in_mapped_group(task: Any) -> bool:
    group = getattr(task, "get_closest_mapped_task_group", None)
    return group is not None and group() is not None


def _mapped(task: Any, tasks: list[PlanTask], run_time: list[str], unplannable: list[Unplannable]) -> None:
    kind = _our_guarded_kind(task)
    if kind is None:
        if str(getattr(task, "task_type", "")).startswith("Jrs"):  # a subclass of ours in a DAG module
            unplannable.append(Unplannable(task.task_id, "a mapped task of an operator class defined in a DAG file"))
        return
    length = literal_length(task)
    if length is None or _in_mapped_group(task):
        run_time.append(task.task_id)
        return
    expanded = _expanded(task)
    if isinstance(expanded, Mapping) and "job_id" in expanded:
        unplannable.append(Unplannable(task.task_id, "job_id is expanded per map index"))
        return
    partial = getattr(task, "partial_kwargs", None) or {}
    job_id = partial.get("job_id")
    one = PlanTask(
        task.task_id,
        kind,
        job_id if isinstance(job_id, str) else None,
        bool(partial.get("accept_changed_fingerprint", job_param_default("accept_changed_fingerprint"))),
        None,
        "a mapped task's arguments are known per map index only at run time",
    )
    tasks.extend(replace(one, map_index=index) for index in range(length))


def _expanded(task: Any) -> Any:
    """The literal value a mapped task expands over (``expand`` or, for a decorated task,
    ``op_kwargs`` expansion), as the serialized DAG keeps it."""
    attr = getattr(task, "_expand_input_attr", None) or "expand_input"
    found = getattr(task, attr, None) or getattr(task, "expand_input", None)
    return getattr(found, "value", None)


def literal_length(task: Any) -> int | None:
    """How many map indexes a mapped task gets when the DAG says it (``expand`` over literal
    lists, ``expand_kwargs`` over a literal list of dicts); ``None`` when a run must tell."""
    value = _expanded(task)
    if isinstance(value, Mapping):  # expand(a=[...], b=[...]): the product of the lengths
        lengths = [
            len(v) if isinstance(v, Sequence | Mapping) and not isinstance(v, str) else None for v in value.values()
        ]
        return None if None in lengths else math.prod(n for n in lengths if n is not None)
    if isinstance(value, Sequence) and not isinstance(value, str):  # expand_kwargs([{...}, {...}])
        return len(value) if all(isinstance(v, Mapping) for v in value) else None
    return None


def run_time_mapped(dag: Any, task_ids: Sequence[str] | None = None) -> list[str]:
    """The guarded mapped tasks of ``dag`` (among ``task_ids`` when given) whose jobs only a run
    can name: expanded over another task's output, or in a mapped task group."""
    _, run_time, _ = plan_tasks(dag)
    return [t for t in run_time if task_ids is None or t in task_ids]


def is_guarded(task: Any) -> bool:
    """Does serialized ``task`` run Spark through the store (facts serialized, or one of our classes)?"""
    return getattr(task, FACTS_ATTR, None) is not None or _our_guarded_kind(task) is not None
