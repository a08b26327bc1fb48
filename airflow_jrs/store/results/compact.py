"""The shorter spellings of entry format version 4: what its attempt and outputs say about the job id.

Version 4 exists so that a realistic finished job costs at most 500 B of Redis memory at 20,000
jobs (issue 44 item 6, docs/benchmarks.md): its JSON must fit the 256-B allocation class (252 B
of text), version 2's took 320. Most of what it repeats is already in the job's key or elsewhere
in the entry, so version 4 writes it once:

* the attempt's DAG id and task id are, under the default job id rule
  (``<dag_id>.<task_id>.<key>``), the job id's first characters: written as their lengths
  (``[13,13,...]``: ``flights_daily`` and ``ingest.submit`` of ``flights_daily.ingest.submit.2013-01-01``);
* a run id Airflow generated (``scheduled__2016-10-27T00:00:00+00:00``) as ``[type, seconds(,
  microseconds)]``, the type a code of :data:`RUN_TYPES` (or its own text), the logical time as
  seconds since the epoch: 14 characters instead of 38;
* the try number left out when it is 1;
* in the outputs, the attempt's ``fence-<token>`` staging folder as ``fence-{n}`` beside
  :data:`~.serde.JOB_ID_MARK` (the fence is the entry's ``n``).

Version 5 adds one: Spark local mode's application id, ``local-<the SparkContext's start in
ms>``, as ``A``, its milliseconds after the result's start time (``"A":2345``, not
``"a":"local-1763794802345"``: 8 characters instead of 25). The operator takes the start time
just before it launches, so the offset is the driver's few seconds of start-up. Version 4's
reader does not know ``A`` and would read the id as missing, so it is a version of its own.
A realistic entry with its staging folder's owner nonce (``fence-{n}-<16 hex>``) needs it to
fit 252 B.

Every shorter spelling is written only when it reads back to exactly what it stands for (each
``compact_*`` decodes its own output before returning it); anything else stays as version 2 wrote
it, and the reader takes either. Nothing is lost: ``show``, the page, the calendar and the
saved-time figures read the same :class:`~airflow_jrs.domain.model.Attempt` and outputs.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_jrs.domain.model import Attempt

#: Run types by code in a compact run id: Airflow's ``DagRunType`` values (``dataset_triggered``
#: is Airflow 2's name). Append only: a code, once written, names its type forever.
RUN_TYPES = ("scheduled", "manual", "backfill", "asset_triggered", "dataset_triggered")
#: Stands for ``fence-<the entry's fence>`` inside version-4 outputs.
FENCE_MARK = "fence-{n}"
#: What a Spark local-mode application id starts with (milliseconds since the epoch follow).
LOCAL_APP_PREFIX = "local-"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = 1_000_000
_MILLI = timedelta(milliseconds=1)


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# -- run ids ----------------------------------------------------------------------------------
def run_id_of(value: object) -> str:
    """The run id a version-4 ``at`` holds: its text, or ``[type, seconds(, microseconds)]``."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list) or not 2 <= len(value) <= 3 or not all(_int(v) for v in value[1:]):
        raise TypeError(f"a run id is text or [type, seconds(, microseconds)], got {value!r}")
    kind, seconds, micros = value[0], value[1], value[2] if len(value) == 3 else 0
    if _int(kind) and 0 <= kind < len(RUN_TYPES):
        kind = RUN_TYPES[kind]
    if not isinstance(kind, str) or not kind or (len(value) == 3 and not 0 < micros < _SECOND):
        raise ValueError(f"invalid compact run id {value!r}")
    return f"{kind}__{(_EPOCH + timedelta(seconds=seconds, microseconds=micros)).isoformat()}"


def compact_run_id(run_id: str) -> str | list[Any]:
    """``run_id`` as ``[type, seconds(, microseconds)]`` when it is ``<type>__<UTC ISO time>``
    and reads back identically; else the text itself."""
    kind, sep, rest = run_id.partition("__")
    if not sep or not kind:
        return run_id
    try:
        at = datetime.fromisoformat(rest)
    except ValueError:
        return run_id
    if at.tzinfo is None or at.utcoffset() != timedelta(0):
        return run_id
    seconds, micros = divmod((at - _EPOCH) // timedelta(microseconds=1), _SECOND)
    compact: list[Any] = [RUN_TYPES.index(kind) if kind in RUN_TYPES else kind, seconds]
    if micros:
        compact.append(micros)
    try:
        return compact if run_id_of(compact) == run_id else run_id
    except (OverflowError, ValueError):
        return run_id


# -- the application id ---------------------------------------------------------------------
def application_id_of(offset: object, start: datetime | None) -> str:
    """The application id a version-5 ``A`` holds: ``local-<start in ms + offset>``."""
    if not isinstance(offset, int) or isinstance(offset, bool):
        raise TypeError(f"'A' must be an integer of milliseconds, got {offset!r}")
    if start is None or start.utcoffset() != timedelta(0):
        raise ValueError("'A' is milliseconds after the start time: the entry needs a UTC start")
    return f"{LOCAL_APP_PREFIX}{(start - _EPOCH) // _MILLI + offset}"


def application_id_in(doc: dict[str, Any], start: datetime | None, version: int) -> str | None:
    """The application id of a version-5 entry's ``A``; ``None`` when it has none (its ``a``, if
    any, is the id as written; version 4 never wrote ``A``, there it is an unknown member)."""
    if "A" not in doc or version < 5:
        return None
    if "a" in doc:
        raise ValueError("an entry names its application id as 'a' or as 'A', not both")
    return application_id_of(doc["A"], start)


def compact_application_id(application_id: str | None, start: datetime | None) -> int | None:
    """``A`` of ``application_id`` (a local-mode id, milliseconds after ``start``), or ``None``
    when it is another id, there is no UTC start, or the offset would not read back exactly."""
    if application_id is None or start is None or start.tzinfo is None or start.utcoffset() != timedelta(0):
        return None
    millis = application_id.removeprefix(LOCAL_APP_PREFIX)
    if millis == application_id or not millis.isascii() or not millis.isdigit():
        return None
    offset = int(millis) - (start - _EPOCH) // _MILLI
    return offset if application_id_of(offset, start) == application_id else None


# -- the attempt ------------------------------------------------------------------------------
def attempt_of(at: object, job_id: str, version: int) -> Attempt | None:
    """The attempt of an entry's ``at`` (version 2: ``[dag, task, run, try(, map)]``; version 4
    also ``[dag, task, run]`` for try 1, ids as lengths of the job id's prefix, a compact run)."""
    if at is None:
        return None
    if not isinstance(at, list):
        raise TypeError(f"attempt must be a JSON array, got {type(at).__name__}")
    if version < 4:
        return Attempt(*at) if at else None
    if not 3 <= len(at) <= 5:
        raise ValueError(f"attempt must be [dag, task, run(, try(, map))], got {at!r}")
    dag, task, run = at[0], at[1], at[2]
    if _int(dag):
        if not 0 < dag < len(job_id):
            raise ValueError(f"the attempt's DAG id length {dag} does not fit job id {job_id!r}")
        dag = job_id[:dag]
    if _int(task) and isinstance(dag, str):
        start = len(dag) + 1
        if not 0 < task <= len(job_id) - start:
            raise ValueError(f"the attempt's task id length {task} does not fit job id {job_id!r}")
        task = job_id[start : start + task]
    try_number = at[3] if len(at) > 3 else 1
    return Attempt(dag, task, run_id_of(run), try_number, *at[4:])


def compact_attempt(attempt: Attempt, job_id: str) -> list[Any]:
    """The version-4 ``at`` of ``attempt``; only spellings that read back to ``attempt``."""
    a = attempt
    dag: str | int = a.dag_id
    task: str | int = a.task_id
    if a.dag_id and job_id.startswith(f"{a.dag_id}."):
        dag = len(a.dag_id)
        if a.task_id and job_id[len(a.dag_id) + 1 :].startswith(a.task_id):
            task = len(a.task_id)
    at: list[Any] = [dag, task, compact_run_id(a.run_id) if isinstance(a.run_id, str) else a.run_id]
    if a.try_number != 1 or a.map_index != -1:
        at.append(a.try_number)
    if a.map_index != -1:
        at.append(a.map_index)
    try:
        if attempt_of(at, job_id, 4) == attempt:
            return at
    except (TypeError, ValueError):
        pass
    return [a.dag_id, a.task_id, a.run_id, a.try_number] + ([a.map_index] if a.map_index != -1 else [])


# -- outputs ----------------------------------------------------------------------------------
def untemplated(values: object, job_id: str, fence: int | None, mark: str) -> dict[str, Any]:
    """Outputs with ``mark`` (the job id's) and, given a fence, :data:`FENCE_MARK` undone."""
    if not isinstance(values, dict):
        raise TypeError(f"outputs must be a JSON object, got {type(values).__name__}")
    out = {}
    for k, v in values.items():
        if isinstance(v, str):
            if FENCE_MARK in v:
                if fence is None:
                    raise ValueError(f"output {k!r} names {FENCE_MARK!r} in an entry without a fence")
                v = v.replace(FENCE_MARK, f"fence-{fence}")
            v = v.replace(mark, job_id)
        out[k] = v
    return out


def templated(values: dict[str, Any], job_id: str, fence: int | None, mark: str) -> dict[str, Any] | None:
    """``values`` with the job id as ``mark`` and the attempt's ``fence-<fence>`` as
    :data:`FENCE_MARK`, or ``None`` when neither occurs or the result would not read back."""
    texts = [v for v in values.values() if isinstance(v, str)]
    if any(mark in v or FENCE_MARK in v for v in texts):
        return None
    own = re.compile(rf"fence-{fence}(?![0-9])") if fence is not None else None
    out = {}
    for k, v in values.items():
        if isinstance(v, str):
            v = v.replace(job_id, mark)
            if own is not None:
                v = own.sub(FENCE_MARK, v)
        out[k] = v
    if out == values:
        return None
    try:
        return out if untemplated(out, job_id, fence, mark) == values else None
    except ValueError:
        return None
