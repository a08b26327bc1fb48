"""What a guarded task is, for whoever plans its jobs without running it (the CLI, a UI).

Every operator class that runs Spark through :class:`~airflow_jrs.protocol.JobAttempt` carries
one class attribute, :data:`MARKER` (``jrs_guarded``), naming what its fingerprint covers:
:data:`APPLICATION` (spark-submit: the application and its arguments), :data:`FUNCTION` (a
PySpark function: its source and arguments), :data:`SQL` (the statements) or :data:`PIPELINE`
(a Spark Declarative Pipelines spec and its definition files). Subclasses inherit
it: the start-in-triggerer variant and ``@task.jrs_pyspark`` are guarded because the operator
they extend is. A reader asks the task (or, for a mapped task, its operator class) for the
marker instead of importing operator classes: ``airflow-jrs plan`` then sees every guarded
task, including ones added later, and the CLI does not depend on the Airflow operator modules.

Airflow-free: the task is read through plain attributes (:class:`GuardedTask`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import date, datetime, time, timedelta
from typing import Any, ClassVar, Protocol

from airflow_jrs.domain.identity import application_fingerprint, function_fingerprint, sql_fingerprint
from airflow_jrs.domain.pipeline_spec import pipeline_fingerprint
from airflow_jrs.exceptions import JrsConfigError

#: The class attribute a guarded operator sets to one of :data:`KINDS`.
MARKER = "jrs_guarded"
APPLICATION, FUNCTION, SQL, PIPELINE = "application", "function", "sql", "pipeline"
KINDS = (APPLICATION, FUNCTION, SQL, PIPELINE)
#: What a SQL operator runs as a file; its content is known only once Airflow has templated it.
_SQL_FILES = (".sql", ".hql")


class GuardedTask(Protocol):
    """The attributes of a guarded task that planning reads (every guarded operator has them).

    By kind, also: ``application``/``application_args`` (:data:`APPLICATION`),
    ``python_callable``/``op_args``/``op_kwargs`` (:data:`FUNCTION`), ``sql`` and
    ``statements()`` (:data:`SQL`), ``pipeline_spec`` (:data:`PIPELINE`)."""

    jrs_guarded: ClassVar[str]
    task_id: str
    job_id: str | None  # a template until the task runs
    job_version: str | None
    accept_changed_fingerprint: bool
    outputs: dict[str, str] | None


def guarded_kind(task_or_class: Any) -> str | None:
    """The marker's value of a task or operator class; ``None`` for a task that is not guarded.

    A marker with another value is a programming error in the operator: raised, not ignored
    (ignoring it would plan a DAG without its jobs)."""
    kind = getattr(task_or_class, MARKER, None)
    if kind is None:
        return None
    if kind not in KINDS:
        name = getattr(task_or_class, "__name__", type(task_or_class).__name__)
        raise JrsConfigError(f"{name}.{MARKER} is {kind!r}; it must be one of {list(KINDS)}")
    return str(kind)


def is_templated(value: Any) -> bool:
    """Does ``value`` hold a Jinja expression or statement (rendered only when the task runs)?"""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, Mapping):
        return any(is_templated(k) or is_templated(v) for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return any(is_templated(v) for v in value)
    return False


def _literal(value: Any) -> bool:
    """Is ``value`` as written what the task will see after rendering (no template, no XCom)?"""
    if value is None or isinstance(value, str | int | float | bool | date | datetime | time | timedelta):
        return not is_templated(value)
    if isinstance(value, Mapping):
        return all(_literal(k) and _literal(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(_literal(v) for v in value)
    return False


def planned_fingerprint(task: Any) -> str | None:
    """The fingerprint the task will record, when it can be known before the task renders its
    templates; ``None`` otherwise, which the decision table counts as the same job (a plan then
    cannot tell a changed job from a done one, and says "skip" as the task would for a result
    without fingerprint). Each kind's rule is the operator's own (:mod:`airflow_jrs.domain.identity`)."""
    kind = guarded_kind(task)
    version = task.job_version
    if not _literal(version):
        return None
    if kind == APPLICATION:
        args: Sequence[Any] | None = task.application_args
        if not _literal(task.application) or not _literal(list(args or [])):
            return None
        return application_fingerprint(task.application, args, version)
    if kind == FUNCTION:
        if not _literal(list(task.op_args or [])) or not _literal(dict(task.op_kwargs or {})):
            return None  # an XCom, a template: known when the task runs
        try:
            return function_fingerprint(task.python_callable, task.op_args, task.op_kwargs, version)
        except JrsConfigError:  # no source to read: the task fails the same way, with this message
            return None
    if kind == SQL:
        sql = task.sql
        if not isinstance(sql, str) or is_templated(sql) or sql.strip().endswith(_SQL_FILES):
            return None
        try:
            return sql_fingerprint(task.statements(), version)
        except JrsConfigError:  # no statement: the task fails, saying so
            return None
    if kind == PIPELINE:
        spec = task.pipeline_spec
        if not isinstance(spec, str) or not _literal(spec):
            return None
        try:
            return pipeline_fingerprint(spec, version)
        except JrsConfigError:  # no spec on this host: the task fails, saying so
            return None
    return None


#: The attribute each guarded task carries into Airflow's serialized DAG (:func:`plan_facts`).
FACTS_ATTR = "jrs_plan_facts"
#: The version of :func:`plan_facts`' document; a reader refuses a newer one by name.
FACTS_VERSION = 1


def plan_facts(task: Any) -> str:
    """What a planner needs of a guarded task that Airflow's serialized DAG does not keep, as JSON.

    Computed where DAG code already runs: the dag-processor reads it while it serializes the DAG
    (the operators list :data:`FACTS_ATTR` among their serialized fields), so Airflow's API server
    plans a calendar from the serialized DAG without importing the DAG file
    (:mod:`airflow_jrs.actions.planning.serialized`). Airflow truncates template fields past
    ``[core] max_templated_field_length`` and reshapes values, and keeps neither the marker, the
    flags nor a function's source: hence the job id template untruncated, the kind and the
    fingerprint planned from the file or source the dag-processor can read (``None`` with the
    reason when only a run can know it)."""
    facts: dict[str, Any] = {
        "v": FACTS_VERSION,
        "kind": guarded_kind(task),
        "job_id": task.job_id if isinstance(task.job_id, str) else None,
        "job_id_literal": task.job_id is None or isinstance(task.job_id, str),
        "accept_changed_fingerprint": bool(task.accept_changed_fingerprint),
    }
    try:
        facts["fingerprint"] = planned_fingerprint(task)
        facts["fingerprint_why"] = None if facts["fingerprint"] else "its arguments are rendered only at run time"
    except Exception as exc:  # a parse must never fail on a plan's fact: the run says it again
        facts["fingerprint"] = None
        facts["fingerprint_why"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return json.dumps(facts, sort_keys=True)
