"""Mapped guarded tasks in ``plan``, ``backfill --missing-only``, ``recompute`` and ``forget --dag-id``.

A mapped task (``JrsSparkSubmitOperator.partial(...).expand(...)``) runs once per map index, and
each map index is its own job: the default job id ends in ``.map-<index>``
(:func:`airflow_jrs.domain.identity.default_job_id`). When the DAG file says how many map indexes
there are (``expand`` over literal lists, ``expand_kwargs`` over a literal list of dicts), a
plan can name every job of a date before any run: each map index is planned as the task it
becomes at run time (Airflow's own unmapping, so its arguments, fingerprint and job id are the
ones the map index will use). When the expansion comes from another task's output, only a run
knows it: such tasks are named by :func:`run_time_mapped` and each command says what it does with
them (plan names them as left out; missing-only and recompute by dates refuse).

Tasks in a mapped task group are left out the same way (their group's expansion is read at run
time too).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from airflow_jrs.protocol.guarded_task import guarded_kind

#: The attribute a planned map index carries (its copy of the task is made for planning only).
MAP_INDEX_ATTR = "jrs_planned_map_index"


def map_index_of(task: Any) -> int:
    """The map index a planned task stands for; ``-1`` for an unmapped task."""
    return int(getattr(task, MAP_INDEX_ATTR, -1))


def is_mapped(task: Any) -> bool:
    """Mapped itself, or inside a mapped task group: its job ids carry a map index."""
    if getattr(task, "is_mapped", False):
        return True
    group = getattr(task, "get_closest_mapped_task_group", None)
    return group is not None and group() is not None


def is_guarded_mapped(task: Any) -> bool:
    return is_mapped(task) and bool(guarded_kind(getattr(task, "operator_class", None)) or guarded_kind(task))


def _expand_input(task: Any) -> Any:
    """The task's ``expand``/``expand_kwargs`` input (a decorated task keeps it apart, as ``op_kwargs``)."""
    return task._get_specified_expand_input()  # the SDK's one accessor for both kinds (Airflow 3.3)


def parse_time_length(task: Any) -> int | None:
    """How many map indexes a mapped task gets, when its DAG file says it; ``None`` when the
    expansion (or a part of it) is another task's output, or the task sits in a mapped group."""
    if not getattr(task, "is_mapped", False):
        return None
    value = getattr(_expand_input(task), "value", None)
    if isinstance(value, Mapping):  # expand(a=[...], b=[...]): the product of the lengths
        lengths = [
            len(v) if isinstance(v, Sequence | Mapping) and not isinstance(v, str) else None for v in value.values()
        ]
        return None if None in lengths else math.prod(n for n in lengths if n is not None)
    if isinstance(value, Sequence) and not isinstance(value, str):  # expand_kwargs([{...}, {...}])
        return len(value) if all(isinstance(v, Mapping) for v in value) else None
    return None


def planned_map_indexes(task: Any) -> list[Any] | None:
    """The task each map index becomes (Airflow's unmapping with that index's arguments), marked
    with its map index (:func:`map_index_of`); ``None`` when only a run knows the expansion."""
    length = parse_time_length(task)
    if length is None:
        return None
    out = []
    for index in range(length):
        kwargs, _ = task._expand_mapped_kwargs({"ti": SimpleNamespace(map_index=index)})
        one = task.unmap(kwargs)
        setattr(one, MAP_INDEX_ATTR, index)
        out.append(one)
    return out


def run_time_mapped(dag: Any, task_ids: Sequence[str] | None = None) -> list[str]:
    """The guarded mapped tasks of ``dag`` (among ``task_ids`` when given) whose jobs only a run
    can name: expanded over another task's output, or in a mapped task group."""
    return [
        t.task_id
        for t in dag.tasks
        if is_guarded_mapped(t) and parse_time_length(t) is None and (task_ids is None or t.task_id in task_ids)
    ]
