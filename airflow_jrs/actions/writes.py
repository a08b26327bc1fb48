"""The writes a person makes on one job: forget, mark clean, release from quarantine, stop or
cancel a stream, and recompute one job (forget, then clear its task instance).

Each is one function with its guards, called by ``airflow-jrs`` (:mod:`airflow_jrs.cli.writes`)
and the Job results page (:mod:`airflow_jrs.plugins.routes.jobs`). Who may call it is the
caller's business (a terminal's operator; the signed-in user's rights on the job's DAG); what
it guards is here: a forget is a compare-and-set on the entry the person saw, a recompute asks
Airflow before it forgets anything, a running job is never recomputed under its attempt.
``where`` names the namespace (and the server, for the CLI) in the words of a refusal.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_jrs.actions import CONFLICT, NOT_FOUND, UNREACHABLE, ActionError
from airflow_jrs.actions.airflow_api import AirflowApi, AirflowApiError
from airflow_jrs.domain.model import HistoryReason
from airflow_jrs.exceptions import JobResultEntryChangedError, NoSuchJobResultError
from airflow_jrs.store import Actor, JobResultEntry, JobResultStore

if TYPE_CHECKING:
    from airflow_jrs.store.namespace import JobNamespace


class _Unread(enum.Enum):
    UNREAD = 0


#: ``entry`` not given: the action reads it. The page passes the entry it authorized the user on,
#: so the entry acted on (a compare-and-set) is the one the rights were checked against.
UNREAD = _Unread.UNREAD


def _stamp(entry: JobResultEntry) -> str | None:
    return entry.created_at.isoformat() if entry.created_at else None


def forget(
    store: JobResultStore,
    job_id: str,
    actor: Actor,
    *,
    shown: str | None = None,
    entry: JobResultEntry | _Unread | None = UNREAD,
) -> JobResultEntry:
    """Forget ``job_id``'s result on purpose (kept in history, naming ``actor``): its next run
    computes it again. ``shown``: the ``created_at`` of the entry the person looked at; a result
    written since is not forgotten. ``entry``: the one read to authorize the person (else read
    here). Returns the entry forgotten."""
    if entry is UNREAD:
        entry = store.get_entry(job_id)
    if entry is None:
        raise NoSuchJobResultError(
            f"job {job_id!r} has no result in namespace {store.namespace!r}; nothing to forget.",
            job_id=job_id,
            namespace=store.namespace,
        )
    if shown is not None and shown != _stamp(entry):
        raise JobResultEntryChangedError(
            f"job {job_id!r} has a newer result than the one shown; nothing was forgotten. Reload and look again.",
            job_id=job_id,
            namespace=store.namespace,
        )
    store.forget_result(job_id, expected=entry, actor=actor)
    return entry


def forget_entries(store: JobResultStore, entries: list[JobResultEntry], actor: Actor) -> tuple[list[str], list[str]]:
    """Forget each of ``entries`` as previewed (a compare-and-set on each: a newer result is never
    forgotten unseen); returns the job ids forgotten and the lines saying why others were not."""
    forgotten: list[str] = []
    skipped: list[str] = []
    for entry in entries:
        try:
            store.forget_result(entry.job_id, expected=entry, actor=actor)
            forgotten.append(entry.job_id)
        except NoSuchJobResultError:
            skipped.append(f"{entry.job_id}: gone meanwhile")
        except JobResultEntryChangedError:
            skipped.append(f"{entry.job_id}: changed since it was shown, not forgotten; run the command again")
    return forgotten, skipped


def mark_clean(
    store: JobResultStore, job_id: str, where: str, *, entry: JobResultEntry | _Unread | None = UNREAD
) -> bool:
    """Mark a dirty result clean without its cleanup (its staging data is gone already);
    ``False`` when it was clean. ``entry``: the one read to authorize the person; given, only
    that entry is marked (a compare-and-set), not one written since."""
    if entry is UNREAD:
        entry, expected = store.get_entry(job_id), None
    else:
        expected = entry
    if entry is None:
        raise ActionError(f"job {job_id!r} has no result in {where}; nothing to mark clean", NOT_FOUND)
    if entry.is_clean:
        return False
    return store.mark_result_as_clean(job_id, expected=expected)


def release_quarantine(store: JobResultStore, job_id: str, actor: Actor, where: str) -> str:
    """Drop a quarantined (corrupt) entry after inspection: its bytes go to its history and are
    returned, as text; the job may run again."""
    if job_id not in store.get_quarantined():
        raise ActionError(f"job {job_id!r} has nothing in quarantine in {where}", NOT_FOUND)
    return store.release_quarantine(job_id, actor=actor).decode("utf-8", errors="replace")


def purge_clean(store: JobResultStore, older_than: timedelta) -> int:
    """Delete the clean results committed more than ``older_than`` ago (no history kept); dirty ones
    stay, since their cleanup has yet to run. Returns how many went."""
    return store.purge_clean_entries(older_than)


def stream(jobs: JobNamespace, job_id: str, kind: str, by: str | None = None) -> dict[str, Any]:
    """Ask a running stream to stop at its next batch boundary (``stop``) or cancel at once
    (``cancel``); :class:`~airflow_jrs.protocol.stream_requests.NoRunningStreamError` when nothing
    could relay it."""
    from airflow_jrs.protocol.stream_requests import request_stream

    return request_stream(jobs, job_id, kind, by=by) if by else request_stream(jobs, job_id, kind)


@dataclass(frozen=True)
class Recomputed:
    """What :func:`recompute_job` did: ``done`` is ``forgotten`` or ``recomputing``."""

    job_id: str
    done: str
    message: str
    dag_id: str | None = None
    run_id: str | None = None
    task_id: str | None = None

    def json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"job_id": self.job_id, "done": self.done, "message": self.message}
        if self.run_id:
            doc |= {"dag_id": self.dag_id, "run_id": self.run_id, "task_id": self.task_id}
        return doc


def recompute_job(
    jobs: JobNamespace,
    api: AirflowApi,
    job_id: str,
    actor: Actor,
    *,
    shown: str | None = None,
    entry: JobResultEntry | _Unread | None = UNREAD,
) -> Recomputed:
    """Forget ``job_id``'s result and clear the task instance that computed it through
    ``api`` (as its user: Airflow authorizes the clear and logs it). Forget first: a clear before
    it would let the task reuse the old result. Asks Airflow before anything is forgotten.
    ``entry``: the one read to authorize the person (else read here). The Job results page's
    action (the CLI's recompute is :mod:`.recompute`): its words are the page's."""
    store = jobs.results
    if entry is UNREAD:
        entry = store.get_entry(job_id)
    if entry is None:
        raise NoSuchJobResultError(
            f"job {job_id!r} has no result in namespace {store.namespace!r}, so no task instance to clear; its "
            "next run computes it (or recompute its dates from its DAG's calendar)",
            job_id=job_id,
            namespace=store.namespace,
        )
    if shown is not None and shown != _stamp(entry):
        raise JobResultEntryChangedError(
            f"job {job_id!r} has a newer result than the one shown; nothing was changed. Reload and look again.",
            job_id=job_id,
            namespace=store.namespace,
        )
    holder = jobs.lease(job_id).peek()
    if holder is not None:
        raise ActionError(f"job {job_id} is running now (lease token {holder.token}): its result will be new", CONFLICT)
    attempt = store.full_entry(entry).result.attempt  # a clean reference: from its document
    if attempt is not None:
        try:  # reachable and allowed: fail before anything is forgotten
            api.check_dag(attempt.dag_id)
        except AirflowApiError as exc:
            raise ActionError(f"nothing was changed: {exc}", UNREACHABLE) from None
    store.forget_result(job_id, expected=entry, reason=HistoryReason.RECOMPUTED, actor=actor)
    if attempt is None:
        return Recomputed(job_id, "forgotten", "forgotten (kept in history); its result named no task instance to "
                          "clear: the next run of the job computes it")  # fmt: skip
    where = f"{attempt.dag_id}.{attempt.task_id} in run {attempt.run_id}"
    task: Any = attempt.task_id if attempt.map_index == -1 else [attempt.task_id, attempt.map_index]
    try:
        api.clear(attempt.dag_id, attempt.run_id, [task])
    except AirflowApiError as exc:
        if exc.status == 404:
            return Recomputed(job_id, "forgotten", f"forgotten (kept in history); run {attempt.run_id} is gone "
                              "from Airflow: the next run of the date computes the job")  # fmt: skip
        raise ActionError(
            f"forgot the result (kept in history), but could not clear {where}: {exc}. Clear it in the UI.",
            UNREACHABLE,
        ) from None
    return Recomputed(job_id, "recomputing", f"forgotten (kept in history) and cleared {where}: it computes the "
                      "job again now", attempt.dag_id, attempt.run_id, attempt.task_id)  # fmt: skip
