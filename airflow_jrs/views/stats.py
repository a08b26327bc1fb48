"""Spark time spent and avoided: the figures of ``airflow-jrs stats``, the dashboard and the calendar.

One rule, computed here from what each guarded submit task handed downstream (its XCom payload,
:mod:`airflow_jrs.domain.payload`), never from a store write: the skip path only reads the store,
and the payload already says what the task did. The plugin reads the rows from Airflow's
metadata DB (:mod:`airflow_jrs.plugins.stats`); the CLI prints the plugin's answer, so the page
and the CLI cannot disagree. Airflow-free: the caller hands in the rows.

Per task instance (one map index of a mapped task), its payload under ``return_value``, else
under ``jrs_result`` (``skip_when_done`` pushes it there before the task skips):

* ``reused`` true: the task found the job done and did not start Spark. It **avoided** the
  result's run time, ``end_time - start_time`` of the run that computed it (the payload carries it).
* ``reused`` false: the task computed the job; Spark time **spent** is the result's own
  ``end_time - start_time``. With ``adopted_from`` a predecessor try's finished application was
  adopted: Spark ran once (counted as spent) and the task is counted as computed and adopted.
* A payload without both times, or with an end before its start (clock skew between hosts),
  is counted but its time is not (``untimed``).

What it leaves out, and why, is written for people in docs/ui.md ("Spark time saved").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_jrs.domain.payload import SKIPPED_RESULT_KEY

#: The XCom keys a guarded submit task's payload is under, the preferred one first.
PAYLOAD_KEYS = ("return_value", SKIPPED_RESULT_KEY)
#: The window when none is asked for: the last 30 days, from midnight UTC, so that the dashboard
#: and ``airflow-jrs stats`` asked the same day count the same tasks.
DEFAULT_DAYS = 30


@dataclass(frozen=True)
class PayloadRow:
    """One XCom row of a guarded task: where it is, and its deserialized value."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    key: str
    value: Any
    logical_date: datetime | None = None


@dataclass(frozen=True)
class Outcome:
    """What one task instance did: computed (``adopted`` too, maybe) or reused, and for how long
    the result's Spark application ran (``None``: not known)."""

    reused: bool
    adopted: bool
    seconds: float | None


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def outcome(value: Any) -> Outcome | None:
    """The outcome a payload says; ``None`` when ``value`` is no submit task's payload (a
    cleanup's list, another task's value, a value a custom XCom backend keeps elsewhere, an
    unguarded run's ``"guarded": false``)."""
    if not isinstance(value, Mapping) or not value.get("job_id") or not isinstance(value.get("reused"), bool):
        return None
    if value.get("guarded") is False:  # Spark ran without the store (on_store_unavailable = run): no result
        return None
    start, end = _time(value.get("start_time")), _time(value.get("end_time"))
    seconds = (end - start).total_seconds() if start and end and end >= start else None
    reused = value["reused"]
    return Outcome(reused, not reused and value.get("adopted_from") is not None, seconds)


@dataclass
class Figures:
    """Counts and Spark seconds of a set of task instances."""

    computed: int = 0
    reused: int = 0
    adopted: int = 0
    spent_seconds: float = 0.0
    avoided_seconds: float = 0.0
    untimed: int = 0

    def add(self, one: Outcome) -> None:
        if one.reused:
            self.reused += 1
        else:
            self.computed += 1
            self.adopted += one.adopted
        if one.seconds is None:
            self.untimed += 1
        elif one.reused:
            self.avoided_seconds += one.seconds
        else:
            self.spent_seconds += one.seconds

    def json(self) -> dict[str, Any]:
        return {
            "computed": self.computed,
            "reused": self.reused,
            "adopted": self.adopted,
            "untimed": self.untimed,
            "spent_seconds": round(self.spent_seconds, 1),
            "avoided_seconds": round(self.avoided_seconds, 1),
            "spent": duration(self.spent_seconds),
            "avoided": duration(self.avoided_seconds),
        }


def duration(seconds: float) -> str:
    """``2 d 3 h``, ``1 h 02 min``, ``4 min 07 s``, ``12 s``: the words the page and the CLI both
    print (two units at most: it is a sum, not a stopwatch)."""
    whole = round(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    return f"{secs} s"


def default_since(now: datetime) -> datetime:
    """Midnight UTC :data:`DEFAULT_DAYS` days before ``now``."""
    day = now.astimezone(UTC).date() - timedelta(days=DEFAULT_DAYS)
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def task_outcomes(rows: Iterable[PayloadRow]) -> list[tuple[PayloadRow, Outcome]]:
    """One outcome per task instance: its ``return_value`` payload, else its ``jrs_result`` one;
    rows that are no submit task's payload are dropped."""
    best: dict[tuple[str, str, str, int], tuple[int, PayloadRow, Outcome]] = {}
    for row in rows:
        found = outcome(row.value)
        if found is None:
            continue
        rank = PAYLOAD_KEYS.index(row.key) if row.key in PAYLOAD_KEYS else len(PAYLOAD_KEYS)
        ti = (row.dag_id, row.run_id, row.task_id, row.map_index)
        if ti not in best or rank < best[ti][0]:
            best[ti] = (rank, row, found)
    return [(row, found) for _, row, found in best.values()]


@dataclass
class Stats:
    """The figures by DAG and in total, and by logical date (the calendar's rows)."""

    total: Figures = field(default_factory=Figures)
    by_dag: dict[str, Figures] = field(default_factory=dict)
    by_date: dict[str, Figures] = field(default_factory=dict)

    @classmethod
    def of(cls, rows: Iterable[PayloadRow]) -> Stats:
        stats = cls()
        for row, found in task_outcomes(rows):
            stats.total.add(found)
            stats.by_dag.setdefault(row.dag_id, Figures()).add(found)
            if row.logical_date is not None:
                stats.by_date.setdefault(row.logical_date.astimezone(UTC).isoformat(), Figures()).add(found)
        return stats


def stats_json(
    rows: Iterable[PayloadRow], *, since: datetime | None, dag_id: str | None = None, notes: Iterable[str] = ()
) -> dict[str, Any]:
    """``GET /jrs/api/stats``, which ``airflow-jrs stats`` prints: the total and each DAG's
    figures, the DAG that avoided the most Spark time first."""
    stats = Stats.of(rows)
    dags = sorted(stats.by_dag.items(), key=lambda kv: (-kv[1].avoided_seconds, -kv[1].reused, kv[0]))
    return {
        "since": since.isoformat() if since else None,
        "dag_id": dag_id,
        "total": stats.total.json(),
        "dags": [{"dag_id": d, **f.json()} for d, f in dags],
        "notes": list(notes),
    }


def dates_json(rows: Iterable[PayloadRow], *, dag_id: str, start: datetime, end: datetime) -> dict[str, Any]:
    """``GET /jrs/api/dags/{dag_id}/stats``, beside the calendar: the figures of the runs whose
    logical date is in ``[start, end]``, in total and by logical date (the calendar's
    ``logical_date``, ISO 8601 UTC), oldest first."""
    stats = Stats.of(rows)
    return {
        "dag_id": dag_id,
        "start": start.date().isoformat(),
        "end": end.date().isoformat(),
        "total": stats.total.json(),
        "dates": {when: stats.by_date[when].json() for when in sorted(stats.by_date)},
    }
