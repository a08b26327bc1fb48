"""The job result store contract (FLIP-194), independent of any backend.

State machine of one job's entry::

        (none) ──create_dirty_result──▶ DIRTY ──mark_result_as_clean──▶ CLEAN
           ▲                              │                               │
           └──────────── forget_result ───┴───────────────────────────────┘
              (kept in history with who, when, why; only on purpose; a compare-and-set
               on the entry the caller read, and on its fence when it holds the lease)

* ``create_dirty_result`` on a job that has an entry, dirty or clean, raises
  :class:`JobResultEntryAlreadyExistsError`. It is atomic across processes: of any number
  of concurrent creators exactly one succeeds. With ``supersede=True`` an unsuccessful
  entry, or one for another fingerprint, moves to history first (still atomically). With
  ``supersede=UNSUCCESSFUL_ONLY`` (``"unsuccessful"``: what a stop or cancel writes) only an
  unsuccessful entry moves; a SUCCEEDED one stays whatever its fingerprint ("done is done":
  canceling a run of changed code never displaces the good result of the old code), and the
  create raises :class:`JobResultEntryAlreadyExistsError` as without ``supersede``.
* ``mark_result_as_clean`` on a dirty entry turns it clean; on a clean entry it is a no-op;
  on a job without an entry it raises :class:`NoSuchJobResultError`.
* Clean entries are kept (they are what makes backfills skip work) unless the store was
  built with a ``clean_ttl`` or ``delete_on_commit``. With ``delete_on_commit`` the committed
  entry moves to history, and marking it clean again is still a no-op (a retried cleanup).
* An entry that cannot be decoded is moved to quarantine and reading it raises
  :class:`CorruptJobResultError`; from then on the job reads as
  :class:`JobResultQuarantinedError` (fail closed) until :meth:`release_quarantine`.
* Writes may carry a fencing token (see :mod:`airflow_jrs.store.leases.lease`); a stale token raises
  :class:`LeaseLostError` and writes nothing.
* The two listings say different things (docs/store-lifecycle.md). :meth:`get_dirty_results`
  is "done, cleanup pending": dirty SUCCEEDED results, the work of a cleanup task.
  :meth:`get_unsuccessful_results` is "the last word was a failure": FAILED, CANCELED and
  STOPPED results, dirty or clean, which a later run supersedes. An unsuccessful result is
  still written dirty, and a cleanup that runs for it marks it clean as usual; it is just
  never reported as pending cleanup, because usually no cleanup follows a failed submit.

Public methods validate arguments and raise; the ``_*`` methods do the I/O.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Final, Literal, Protocol

from airflow_jrs.domain.model import Actor, EntryQuery, HistoryReason, JobResult, JobResultEntry, validate_job_id
from airflow_jrs.exceptions import JobResultEntryError
from airflow_jrs.store.results.documents import ResultDocuments

#: ``supersede=`` mode of :meth:`JobResultStore.create_dirty_result`: replace only an
#: unsuccessful entry (FAILED, CANCELED, STOPPED), never a SUCCEEDED one of any fingerprint.
UNSUCCESSFUL_ONLY: Final = "unsuccessful"
#: Entries read per page of the index while a query filters them.
QUERY_PAGE = 500
#: What ``supersede=`` accepts: ``False`` never replaces, ``True`` replaces an unsuccessful entry
#: or one of another fingerprint, :data:`UNSUCCESSFUL_ONLY` replaces an unsuccessful one only.
Supersede = bool | Literal["unsuccessful"]
#: One job's answer in a batch read (:meth:`JobResultStore.read_many`): its entry, ``None`` (no
#: result) or why it cannot be read (quarantined, corrupt: now quarantined, newer schema).
Answer = JobResultEntry | None | JobResultEntryError


class EntryChanges(Protocol):
    """Which jobs' entries changed since a moment, as this process heard the store announce them
    (:meth:`JobResultStore.changes`): what lets a reader that keeps entries (the Job calendar's
    rows) skip reading them again. ``epoch`` counts what was heard; while not :attr:`active` (not
    yet listening, or a lost connection) nothing may be kept."""

    @property
    def active(self) -> bool: ...
    @property
    def epoch(self) -> int: ...
    def unchanged_since(self, job_ids: Iterable[str], epoch: int) -> bool: ...


def _checked(job_id: str, expected: JobResultEntry | None) -> str:
    """``job_id``, validated; a compare-and-set's ``expected`` must be an entry read from the store
    for that job, since its stored bytes are what the script compares."""
    job_id = validate_job_id(job_id)
    if expected is not None:
        if expected.job_id != job_id:
            raise ValueError(f"expected is an entry of job {expected.job_id!r}, not of {job_id!r}")
        if expected.stored is None:
            raise ValueError("expected must be an entry read from the store (it carries the bytes read)")
    return job_id


class JobResultStore(abc.ABC):
    """Stores job results so that finished jobs are never run again."""

    namespace: str
    #: Where a clean entry's full result lives when the store keeps only its reference
    #: (``[jrs] result_documents``); ``None``: entries are whole
    result_documents: ResultDocuments | None = None

    # -- writes ---------------------------------------------------------------------------
    def create_dirty_result(
        self, result: JobResult, *, fence: int | None = None, supersede: Supersede = False
    ) -> JobResultEntry:
        """Store ``result`` as the job's dirty entry; see the module docstring for the rules."""
        if not isinstance(result, JobResult):
            raise TypeError(f"expected a JobResult, got {type(result).__name__}")
        if supersede not in (True, False, UNSUCCESSFUL_ONLY):
            raise ValueError(f"supersede must be True, False or {UNSUCCESSFUL_ONLY!r}, got {supersede!r}")
        # the entry keeps the integer token (what users see); the script also checks the nonce
        return self._create_dirty_result(result.with_fence(None if fence is None else int(fence)), fence, supersede)

    def mark_result_as_clean(self, job_id: str, *, expected: JobResultEntry | None = None) -> bool:
        """Mark the job's entry clean; returns ``False`` when it already was (a no-op).

        A compare-and-set on ``expected``, the dirty entry the caller read (its stored bytes):
        a cleanup commits the result its work was for, never one written while it ran (a
        recompute, a changed-code run). When the job's entry is another one now, dirty or clean,
        nothing changes and :class:`JobResultEntryChangedError` is raised; ``expected`` already
        clean is a no-op as usual. Without ``expected`` whatever entry is there is marked: for
        a person who decided on nothing they read (``airflow-jrs clean``)."""
        return self._mark_result_as_clean(_checked(job_id, expected), expected)

    def forget_result(
        self,
        job_id: str,
        *,
        expected: JobResultEntry | None = None,
        fence: int | None = None,
        reason: str = HistoryReason.FORGOTTEN,
        actor: Actor | None = None,
    ) -> JobResultEntry | None:
        """Remove the job's entry on purpose so the job runs again; the entry goes to history,
        with ``reason``, ``actor`` and the time (:attr:`JobResultEntry.moved` when read back).

        A compare-and-set on ``expected``, the entry the caller read (its stored bytes): when
        the job's entry is another one now (a newer result, a clean for a dirty), nothing is
        forgotten and :class:`JobResultEntryChangedError` is raised. Without ``expected`` the
        entry there now is forgotten, whatever it is: for scripts that decided on nothing
        they read. An attempt passes its lease's ``fence`` too: a holder whose lease was taken
        over meanwhile gets :class:`LeaseLostError` and forgets nothing. A person (the CLI,
        the UI) holds no lease and passes none.

        Returns the forgotten entry (``None`` when it could not be decoded); raises
        :class:`NoSuchJobResultError` when there was none.
        """
        return self._forget_result(_checked(job_id, expected), expected, fence, str(reason), actor)

    def release_quarantine(self, job_id: str, *, actor: Actor | None = None) -> bytes:
        """Drop a quarantined entry (after inspection) so the job may run again; returns its bytes.
        They go to the job's history (with a note naming ``actor`` when they are a JSON object)."""
        return self._release_quarantine(validate_job_id(job_id), actor)

    def purge_clean_entries(self, older_than: timedelta) -> int:
        """Delete clean entries created more than ``older_than`` ago; returns how many.

        Retention for stores without ``clean_ttl``. Dirty entries are never purged (their
        cleanup is pending). A purged job runs again if asked to: purge only what no backfill
        will ask for. Nothing of a purged job stays behind (its history goes too), and its
        next fencing token is still above every token it had."""
        if older_than.total_seconds() < 0:
            raise ValueError(f"older_than must not be negative, got {older_than}")
        return self._purge_clean_entries(older_than)

    # -- reads ----------------------------------------------------------------------------
    def get_entry(self, job_id: str) -> JobResultEntry | None:
        """The job's entry, or ``None``. Raises on corrupt or quarantined entries (fail closed).

        A clean entry committed as a reference (``[jrs] result_documents``) reads as a *summary*:
        what the skip decision needs, in the same one read. :meth:`full_entry` adds the rest."""
        return self._get_entry(validate_job_id(job_id))

    @abc.abstractmethod
    def read_many(self, job_ids: Sequence[str], *, expiries: dict[str, float] | None = None) -> dict[str, Answer]:
        """Each job's :data:`Answer`, in few round trips (a backfill's or a calendar's thousands of
        jobs); one bad entry is that job's answer and hides no other. Decoded by the same rules as
        :meth:`get_entry`, so a job reads the same here as in its task.

        :param expiries: filled with the seconds left of each entry that expires (a clean entry
            under ``[jrs] retention``): what a reader that keeps the answers needs to know when
            one goes without an announcement
        :raises StoreUnavailableError: the store cannot be read (a partial answer would call
            unread jobs missing: fail closed)"""

    @abc.abstractmethod
    def ping(self) -> float:
        """One round trip to the store; returns the seconds it took. Raises
        :class:`~airflow_jrs.exceptions.StoreUnavailableError`."""

    @abc.abstractmethod
    def changes(self) -> EntryChanges:
        """The namespace's entry changes, watched from this process (one watcher per namespace)."""

    def full_entry(self, entry: JobResultEntry) -> JobResultEntry:
        """``entry`` with its full result: itself, or for a summary the entry its result document
        holds (one read). Raises :class:`~airflow_jrs.exceptions.ResultDocumentError` when the
        document is missing or not the entry's, naming where it should be and what to do."""
        return self._read_document(entry) if entry.summary else entry

    def get_full_entry(self, job_id: str) -> JobResultEntry | None:
        """:meth:`get_entry`, then :meth:`full_entry`: what a person or a downstream task sees."""
        entry = self.get_entry(job_id)
        return self.full_entry(entry) if entry is not None else None

    def has_job_result_entry(self, job_id: str) -> bool:
        return self.get_entry(job_id) is not None

    def has_dirty_job_result_entry(self, job_id: str) -> bool:
        entry = self.get_entry(job_id)
        return entry is not None and entry.is_dirty

    def has_clean_job_result_entry(self, job_id: str) -> bool:
        entry = self.get_entry(job_id)
        return entry is not None and entry.is_clean

    def get_dirty_results(self) -> list[JobResult]:
        """SUCCEEDED results whose cleanup is pending; costs O(number of dirty entries)."""
        return [e.result for e in self._get_dirty_entries()]

    def get_dirty_entries(self) -> list[JobResultEntry]:
        return self._get_dirty_entries()

    def get_unsuccessful_results(self) -> list[JobResult]:
        """Jobs whose current result is FAILED, CANCELED or STOPPED (they run again when asked);
        costs O(number of such entries)."""
        return [e.result for e in self._get_unsuccessful_entries()]

    def get_unsuccessful_entries(self) -> list[JobResultEntry]:
        return self._get_unsuccessful_entries()

    def list_entries(self, *, limit: int = 100, offset: int = 0) -> list[JobResultEntry]:
        """Entries, newest first; unreadable ones are quarantined and left out (and logged)."""
        if limit < 1 or offset < 0:
            raise ValueError(f"limit must be >= 1 and offset >= 0, got limit={limit}, offset={offset}")
        return self._list_entries(limit, offset)

    def find_entries(self, query: EntryQuery, *, limit: int = 100, offset: int = 0) -> list[JobResultEntry]:
        """Entries matching ``query`` (state, status, dag, job id prefix, since), newest first,
        ``offset`` matches skipped, at most ``limit``.

        The store keeps one index (entries by creation time); filters on status, dag or job id
        prefix have none of their own. Rather than a second index that every write script must
        keep in step (one more place to drift), a query pages through :meth:`list_entries`
        newest first and filters in Python: O(entries scanned), which the on-call engineer's CLI
        can afford and a task never asks for. ``since`` stops the walk early, because the index
        is ordered by the same creation time. (Not the dirty set for ``state=DIRTY``: it holds
        the jobs whose cleanup is pending, not every entry in the dirty state.)"""
        if limit < 1 or offset < 0:
            raise ValueError(f"limit must be >= 1 and offset >= 0, got limit={limit}, offset={offset}")
        found: list[JobResultEntry] = []
        skipped, start = 0, 0
        while len(found) < limit:
            page = self.list_entries(limit=QUERY_PAGE, offset=start)
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
            if len(page) < QUERY_PAGE:
                break
            start += QUERY_PAGE
        return found

    def get_history(self, job_id: str) -> list[JobResultEntry]:
        """Earlier entries of the job, newest first: superseded, forgotten, or (with
        ``delete_on_commit``) committed and deleted. Each says why, when and by whom it moved
        (:attr:`JobResultEntry.moved`; ``None`` for items an older airflow-jrs moved)."""
        return self._get_history(validate_job_id(job_id))

    def get_quarantined(self) -> list[str]:
        """Job ids whose entries sit in quarantine."""
        return self._get_quarantined()

    # -- backend I/O ----------------------------------------------------------------------
    @abc.abstractmethod
    def _create_dirty_result(self, result: JobResult, fence: int | None, supersede: Supersede) -> JobResultEntry: ...

    @abc.abstractmethod
    def _mark_result_as_clean(self, job_id: str, expected: JobResultEntry | None) -> bool: ...

    @abc.abstractmethod
    def _forget_result(
        self, job_id: str, expected: JobResultEntry | None, fence: int | None, reason: str, actor: Actor | None
    ) -> JobResultEntry | None: ...

    @abc.abstractmethod
    def _release_quarantine(self, job_id: str, actor: Actor | None) -> bytes: ...

    @abc.abstractmethod
    def _purge_clean_entries(self, older_than: timedelta) -> int: ...

    @abc.abstractmethod
    def _get_entry(self, job_id: str) -> JobResultEntry | None: ...

    @abc.abstractmethod
    def _read_document(self, summary: JobResultEntry) -> JobResultEntry: ...

    @abc.abstractmethod
    def _get_dirty_entries(self) -> list[JobResultEntry]: ...

    @abc.abstractmethod
    def _get_unsuccessful_entries(self) -> list[JobResultEntry]: ...

    @abc.abstractmethod
    def _list_entries(self, limit: int, offset: int) -> list[JobResultEntry]: ...

    @abc.abstractmethod
    def _get_history(self, job_id: str) -> list[JobResultEntry]: ...

    @abc.abstractmethod
    def _get_quarantined(self) -> list[str]: ...


__all__: Sequence[str] = ["JobResultStore"]
