"""Job identity and fingerprint: what a job is, whoever asks (worker, triggerer, CLI).

Airflow-free on purpose: the worker and the triggerer both call these rules, and a rule
that exists twice drifts into a wrong skip. ``default_job_id`` reads only plain attributes
of the task context it is given.

The job id names *what* is computed for *which* data, never which run computes it: a
scheduled run, a backfill run, a cleared run and a run triggered by hand with a logical date
(CLI, UI, REST, ``TriggerDagRunOperator``) of one date are the same job. The format is
``{dag_id}.{task_id}.{key}[.map-N]``; :func:`run_key` says which key, and why it reads the
logical date rather than the data interval. Midnight UTC renders as ``2013-01-01``, other whole
seconds as ``2013-01-01T060000Z``, an instant with a fraction of a second as
``2013-01-01T060000.250000Z`` (:func:`format_instant`). A key with characters a job id may not
hold gets them replaced by ``_`` plus ``-h`` and a digest of the key as given, so two keys never
become one job id.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow_jrs.domain.model import JOB_ID_MAX_LENGTH, sanitize_job_id_part, validate_job_id


def format_instant(value: datetime) -> str:
    """An instant as the date part of a job id, in UTC: ``2013-01-01`` at midnight,
    ``2013-01-01T060000Z`` at any other whole second, ``2013-01-01T060000.250000Z`` (always six
    digits) when it has a fraction of a second.

    The fraction is kept because two runs less than a second apart are two runs:
    ``TriggerDagRunOperator`` and a trigger without an explicit date stamp a run with the trigger
    time, so a fan-out (or two people) triggering within one second would otherwise name one job,
    and the second run would skip with the first one's output. The first two forms are the ones
    whole-second dates always had: results already stored keep their job ids."""
    value = value.astimezone(UTC)
    if value.microsecond:
        return value.strftime("%Y-%m-%dT%H%M%S.%fZ")
    if (value.hour, value.minute, value.second) == (0, 0, 0):
        return value.strftime("%Y-%m-%d")
    return value.strftime("%Y-%m-%dT%H%M%SZ")


def run_key(context: Mapping[str, Any]) -> str:
    """The part of a default job id that names the run's data, first that applies:

    1. the run's ``partition_key`` (a partitioned timetable, an asset partition, a manual run
       given one);
    2. its ``logical_date``: what ``{{ ds }}`` and every date template compute. Scheduled and
       backfill runs (and their clears) have ``logical_date == data_interval_start`` in Airflow
       3.3 (``DagRunInfo.logical_date`` *is* the interval's start), so their job ids are the
       ones the data-interval rule gave them. A manual run's data interval is not its date's:
       ``airflow dags trigger --logical-date`` (and ``TriggerDagRunOperator``) infer it from
       the trigger time, the REST API and the UI from the logical date as a run *ending* there
       (``[L - 1 day, L]`` for a cron data-interval ``@daily``: the previous date's job); and a
       backfill that reprocesses such a run relabels its run type ``backfill`` and keeps that
       interval. So neither the interval nor the run type names the date: the logical date does;
    3. the data interval's start, for a caller that gives an interval and no logical date;
    4. ``run-<run_id>``: a run without a logical date (a manual run triggered without one, an
       asset-triggered run) is its own job; clearing it reuses its run id, so its job too.

    Plain attributes only (no Airflow import): the worker, the triggerer and ``plan`` call it
    with the task's template context or one built from Airflow's DB or the timetable.
    """
    if context.get("partition_key"):
        return str(context["partition_key"])
    if context.get("logical_date") is not None:
        return format_instant(context["logical_date"])
    if context.get("data_interval_start") is not None:
        return format_instant(context["data_interval_start"])
    return f"run-{context['run_id']}"


def default_job_id(context: Mapping[str, Any]) -> str:
    """``{dag_id}.{task_id}.{key}[.map-N]`` with the key of :func:`run_key`, made a valid job id."""
    ti = context["ti"]
    dag_id, task_id = ti.dag_id, ti.task_id
    key = run_key(context)
    safe_key = sanitize_job_id_part(key)
    if safe_key != key:
        # Replacing characters maps several keys to one ("a;b" and "a<b" both become "a_b"): the
        # second partition would find the first one's result and be skipped. A digest of the
        # key as given keeps them apart.
        safe_key += "-h" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    job_id = sanitize_job_id_part(f"{dag_id}.{task_id}.{safe_key}")
    map_index = getattr(ti, "map_index", -1)
    if map_index is not None and map_index >= 0:
        job_id += f".map-{map_index}"
    if len(job_id) > JOB_ID_MAX_LENGTH:
        digest = hashlib.sha256(job_id.encode()).hexdigest()[:16]
        job_id = f"{job_id[: JOB_ID_MAX_LENGTH - 18]}~{digest}".replace("~", "-h")[:JOB_ID_MAX_LENGTH]
    return validate_job_id(job_id)


def job_id_for(job_id: str | None, context: Mapping[str, Any]) -> str:
    """The job id of a task instance: its rendered ``job_id`` when it has one, else
    :func:`default_job_id` of ``context``. The one rule the operators, the start-in-triggerer
    trigger and ``airflow-jrs plan`` apply, so they can never name one job differently (an empty
    rendering counts as none, as Airflow's ``or`` in the operators always had it)."""
    return validate_job_id(job_id) if job_id else default_job_id(context)


def fingerprint(
    *,
    application_bytes: bytes | None,
    application: str,
    application_args: Sequence[Any] | None,
    job_version: str | None,
) -> str:
    """sha256 over what is computed: code, arguments, version. Resources are left out on purpose."""
    h = hashlib.sha256()
    h.update(b"jrs-fp-v1\0")
    h.update(application_bytes if application_bytes is not None else application.encode())
    h.update(b"\0")
    h.update(json.dumps([str(a) for a in application_args or []]).encode())
    h.update(b"\0")
    h.update((job_version or "").encode())
    return h.hexdigest()


def application_fingerprint(application: str, application_args: Sequence[Any] | None, job_version: str | None) -> str:
    """The fingerprint of a submission: the application file's content when ``application`` is
    a local file readable here, else its path string (a remote URL, a file this host lacks).

    The worker and the triggerer both call this, so they can only disagree when they see
    different files (the triggerer then sends the task to the worker, which decides)."""
    data: bytes | None = None
    if application and "://" not in application and os.path.isfile(application):
        data = Path(application).read_bytes()
    return fingerprint(
        application_bytes=data, application=application, application_args=application_args, job_version=job_version
    )


def function_source(fn: Any) -> str:
    """The canonical source of a Python function: its definition without decorators or docstring,
    re-printed from its syntax tree (so comments, blank lines and indentation do not count).

    Raises :class:`~airflow_jrs.exceptions.JrsConfigError` when Python cannot find the source
    (a function built with ``exec`` or typed into a REPL): without it nothing says what the
    function computes."""
    import ast
    import inspect
    import textwrap

    from airflow_jrs.exceptions import JrsConfigError

    target = inspect.unwrap(fn)
    try:
        source = textwrap.dedent(inspect.getsource(target))
    except (OSError, TypeError) as exc:
        raise JrsConfigError(
            f"cannot read the source of {getattr(target, '__qualname__', target)!r} ({exc}): the job's fingerprint "
            "is made from it. Define the function in a .py file (a DAG file or a module the DAG imports)."
        ) from None
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a lambda inside an expression: its lines as written
        return source
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return source
    node.decorator_list = []
    first = node.body[0] if node.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        if len(node.body) > 1:  # a docstring says why, not what is computed
            node.body = node.body[1:]
    return ast.unparse(node)


def _plain(value: Any) -> Any:
    """A JSON form of an argument that is not JSON itself; raises when it has no stable one."""
    import dataclasses
    import datetime as dt
    import decimal
    import enum

    from airflow_jrs.exceptions import JrsConfigError

    if isinstance(value, dt.date | dt.time | dt.datetime):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return {"timedelta_seconds": value.total_seconds()}
    if isinstance(value, set | frozenset):
        return sorted(json.dumps(v, sort_keys=True, default=_plain) for v in value)
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, enum.Enum):
        return _plain(value.value) if not isinstance(value.value, str | int | float) else value.value
    if isinstance(value, decimal.Decimal | Path):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {type(value).__qualname__: dataclasses.asdict(value)}
    text = repr(value)
    if " at 0x" in text or text.startswith("<"):
        raise JrsConfigError(
            f"argument {text[:80]} has no stable form to fingerprint (its repr changes from run to run). Pass "
            "plain values (strings, numbers, dates, lists, dicts) to the function, and set job_version when "
            "what it computes changes in a way its source and arguments do not show."
        )
    return f"{type(value).__qualname__}:{text}"


def function_fingerprint(
    fn: Any, args: Sequence[Any] | None, kwargs: Mapping[str, Any] | None, job_version: str | None
) -> str:
    """sha256 over what a Python job function computes: its source (:func:`function_source`),
    its rendered arguments and ``job_version``.

    What it cannot see: the functions, modules and constants the function uses from elsewhere
    (a helper in another module, a library's version, a global it reads), and the data it
    reads. Bump ``job_version`` when those change what it computes."""
    h = hashlib.sha256()
    h.update(b"jrs-fp-pyfunc-v1\0")
    h.update(function_source(fn).encode())
    h.update(b"\0")
    h.update(json.dumps([list(args or []), dict(kwargs or {})], sort_keys=True, default=_plain).encode())
    h.update(b"\0")
    h.update((job_version or "").encode())
    return h.hexdigest()


def sql_fingerprint(statements: Sequence[str], job_version: str | None) -> str:
    """sha256 over what a Spark SQL job computes: its statements as they run (after Airflow's
    templating, a file's content for a file, before the ``{jrs_...}`` placeholders are filled)
    and ``job_version``. Splitting first means blank lines and comments *between* statements do
    not count; everything inside one does. Conf and master are left out (where, not what); the
    tables and files the SQL reads are not seen: bump ``job_version`` when a change there must
    recompute."""
    h = hashlib.sha256()
    h.update(b"jrs-fp-sql-v1\0")
    h.update(json.dumps(list(statements)).encode())
    h.update(b"\0")
    h.update((job_version or "").encode())
    return h.hexdigest()
