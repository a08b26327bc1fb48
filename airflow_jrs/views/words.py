"""How a count and a time are written in every answer, the CLI's and the actions' alike.

The actions word their refusals and steps themselves (:mod:`airflow_jrs.actions`), and the CLI
prints its tables: both say ``3 dates`` and ``2013-01-01 00:00:00Z`` the same way, from here.
"""

from __future__ import annotations

from datetime import UTC, datetime


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 job``, ``2 jobs``, ``0 jobs``: a count with its noun in the right number (``many``
    for an irregular plural, e.g. ``plural(n, "entry", "entries")``)."""
    return f"{count} {word if count == 1 else many or word + 's'}"


def stamp(value: datetime | None) -> str:
    """A time in UTC to the second (``2013-01-01 00:00:00Z``), ``-`` for none."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ") if value else "-"
