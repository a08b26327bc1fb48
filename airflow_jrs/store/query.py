"""Filtered listings of a store's entries, on top of its paged ``list_entries``.

The store keeps one index (entries by creation time) and a set of dirty ones; filters on
status, dag or job id prefix have no index of their own. Rather than a second index that
every write script must keep in step (one more place to drift), a query pages through the
index newest first and filters in Python: O(entries scanned), which the on-call engineer's
CLI can afford and a task never asks for. ``since`` stops the walk early, because the index
is ordered by the same creation time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from airflow_jrs.store.model import EntryState, JobResultEntry, JobStatus

if TYPE_CHECKING:
    from airflow_jrs.store.base import JobResultStore

#: Entries read per page of the index while filtering.
PAGE = 500


@dataclass(frozen=True)
class EntryQuery:
    """What to keep; ``None`` keeps everything. ``dag_id`` matches the attempt that wrote the
    result, or (for results written without one) the job id's ``<dag_id>.`` prefix."""

    state: EntryState | None = None
    status: JobStatus | None = None
    dag_id: str | None = None
    prefix: str | None = None
    since: datetime | None = None
    #: Created strictly before this instant (what a retention purge would take).
    before: datetime | None = None

    def matches(self, entry: JobResultEntry) -> bool:
        if self.state is not None and entry.state is not self.state:
            return False
        if self.status is not None and entry.result.status is not self.status:
            return False
        if self.prefix is not None and not entry.job_id.startswith(self.prefix):
            return False
        if self.dag_id is not None:
            attempt = entry.result.attempt
            owner = attempt.dag_id if attempt is not None else None
            if owner != self.dag_id and not (owner is None and entry.job_id.startswith(self.dag_id + ".")):
                return False
        created = entry.created_at
        if self.before is not None and (created is None or created >= self.before):
            return False
        return not (self.since is not None and created is not None and created < self.since)


def find_entries(store: JobResultStore, query: EntryQuery, *, limit: int, offset: int = 0) -> list[JobResultEntry]:
    """Entries matching ``query``, newest first, ``offset`` matches skipped, at most ``limit``."""
    # Not the dirty set for state=DIRTY: it holds the jobs whose cleanup is pending, which need
    # not be every entry in the dirty state (an unsuccessful result is tracked apart).
    found: list[JobResultEntry] = []
    skipped, start = 0, 0
    while len(found) < limit:
        page = store.list_entries(limit=PAGE, offset=start)
        for entry in page:
            if query.since is not None and entry.created_at is not None and entry.created_at < query.since:
                return found  # the index is newest first: nothing older can match
            if not query.matches(entry):
                continue
            if skipped < offset:
                skipped += 1
                continue
            found.append(entry)
            if len(found) == limit:
                break
        if len(page) < PAGE:
            break
        start += PAGE
    return found
