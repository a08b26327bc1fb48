"""Commit a job's result after cleanup (dirty -> clean), without Airflow.

Flink's dispatcher runs a job's global cleanup with a retry strategy and only then marks the
result clean; a crash in between leaves the result dirty, and the next cleanup simply runs
again. Same here: every action is idempotent (deleting what is already gone succeeds), a
dirty result means cleanup only (never Spark), and an already clean result is success.

What a job leaves behind: staging folders of attempts that lost (``fence-N`` beside the
winner's), its spec files in the state backend, and whatever the caller lists in
``cleanup_paths`` or does in ``cleanup_callables``. Never a leftover: a folder the result's
outputs lie in (an adopted result names its predecessor's folder, not its own fence's), and
anything of an attempt that is live when the removal happens. The commit is a compare-and-set
on the entry this cleanup read; a result written meanwhile is cleaned up for in turn
(:class:`CleanupView`, docs/recovery.md "Cleanup after a recovery").

This lives in the protocol, not in the Airflow operator, so the fault trials run the very
cleanup the operator runs. Files are reached through :class:`Files`: the default
(:data:`LOCAL_OR_FSSPEC`) handles local paths and fsspec URLs; the operator hands in one built
on Airflow's ``ObjectStoragePath`` so object-store connections behave as they always did.

    payload = commit_job(RedisJobNamespace.from_url(url, settings), "daily.2024-01-01")
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from airflow_jrs.domain.paths import FENCE_PREFIX, fence_token_of, spec_dir, staging_root
from airflow_jrs.domain.payload import result_payload
from airflow_jrs.exceptions import CleanupError, JobResultEntryChangedError, NoSuchJobResultError
from airflow_jrs.protocol.steps import reached
from airflow_jrs.store import EntryState, JobResult, JobResultEntry, JobResultStore
from airflow_jrs.store.intents import IntentStore
from airflow_jrs.store.namespace import JobNamespace

#: ``fn(result, context)``: a caller's own cleanup of one dirty job, run before it is marked clean.
CleanupCallable = Callable[[JobResult, Any], None]
#: How many times one cleanup starts over for a result written while it ran, before it gives up.
MAX_ROUNDS = 3

_logger = logging.getLogger(__name__)


class Files(Protocol):
    """How the cleanup lists and removes files: local, fsspec, or Airflow's object storage."""

    def children(self, uri: str) -> list[tuple[str, str]] | None:
        """``(name, uri)`` of each entry right under folder ``uri``; ``None`` when it does not exist."""

    def remove(self, uri: str) -> bool:
        """Delete a file or folder (recursively); ``False`` when already gone."""

    def remove_empty_folder(self, uri: str) -> None:
        """Remove folder ``uri``; raises :class:`OSError` when it is not empty."""


def _is_local(uri: str) -> bool:
    return "://" not in uri or uri.startswith("file://")


def _local(uri: str) -> Path:
    return Path(uri.removeprefix("file://"))


class LocalOrFsspecFiles:
    """Local paths (and ``file://``) through pathlib and shutil; other URLs through fsspec's
    ``url_to_fs`` (credentials as fsspec finds them: environment, config files)."""

    def children(self, uri: str) -> list[tuple[str, str]] | None:
        if _is_local(uri):
            folder = _local(uri)
            return [(p.name, str(p)) for p in folder.iterdir()] if folder.exists() else None
        fs, path = _fs(uri)
        if not fs.exists(path):
            return None
        found = [p.rstrip("/") for p in fs.ls(path, detail=False)]
        return [(p.rsplit("/", 1)[-1], fs.unstrip_protocol(p)) for p in found if p.rstrip("/") != path.rstrip("/")]

    def remove(self, uri: str) -> bool:
        if _is_local(uri):
            path = _local(uri)
            if not path.exists() and not path.is_symlink():
                return False
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
            return True
        fs, fspath = _fs(uri)
        if not fs.exists(fspath):
            return False
        fs.rm(fspath, recursive=fs.isdir(fspath))
        return True

    def remove_empty_folder(self, uri: str) -> None:
        if _is_local(uri):
            _local(uri).rmdir()
        else:
            fs, path = _fs(uri)
            fs.rmdir(path)


def _fs(uri: str) -> tuple[Any, str]:
    from fsspec.core import url_to_fs  # only for URLs: local paths need no fsspec

    return url_to_fs(uri)


#: The default :class:`Files`: local paths and fsspec URLs.
LOCAL_OR_FSSPEC = LocalOrFsspecFiles()


def remove_path(uri: str) -> bool:
    """Delete a file or folder (local path or fsspec URL); ``False`` when already gone."""
    return LOCAL_OR_FSSPEC.remove(uri)


@dataclass(frozen=True)
class RetryPolicy:
    """Retry strategy of each cleanup step (Flink's exponential delay): ``attempts`` tries,
    the delay doubling from ``initial_delay`` up to ``max_delay`` seconds."""

    attempts: int = 5
    initial_delay: float = 1.0
    max_delay: float = 60.0


def retry_with_backoff(
    action: Callable[[], None],
    *,
    what: str,
    attempts: int,
    initial_delay: float,
    max_delay: float,
    log: Any,
    job_id: str | None = None,
) -> None:
    """Run ``action`` until it succeeds, doubling the delay (Flink's exponential-delay strategy)."""
    delay = initial_delay
    for attempt in range(1, attempts + 1):
        try:
            action()
            return
        except JobResultEntryChangedError:
            raise  # not a failure to retry: the cleanup starts over for the new entry
        except Exception as exc:
            if attempt == attempts:
                raise CleanupError(
                    f"cleanup step {what!r} failed {attempts} times, last with {exc!r}; the result "
                    "stays dirty and the next cleanup run retries it. Fix the cause (permissions, "
                    "connectivity) and clear this task.",
                    job_id=job_id,
                ) from exc
            log.warning("Cleanup step %r failed (%s); retrying in %.1fs", what, exc, delay)
            time.sleep(delay)
            delay = min(delay * 2, max_delay)


def commit_job(
    jobs: JobNamespace,
    job_id: str,
    *,
    context: Any = None,
    cleanup_paths: Sequence[str] = (),
    cleanup_callables: Sequence[CleanupCallable] = (),
    remove_staging_losers: bool = True,
    files: Files = LOCAL_OR_FSSPEC,
    retry: RetryPolicy = RetryPolicy(),  # frozen: safe to share as a default
    log: Any = _logger,
) -> dict[str, Any]:
    """Clean up after the job's entry and commit it; returns the committed result's payload.

    Starts over when a new result was written while this ran (see :class:`CleanupView`), at
    most :data:`MAX_ROUNDS` times. ``context`` is handed to each of ``cleanup_callables``.
    Raises :class:`NoSuchJobResultError` when the job has no result, :class:`CleanupError`
    when a step keeps failing or the result keeps changing (the result stays dirty)."""
    store = jobs.results
    for round_ in range(1, MAX_ROUNDS + 1):
        entry = store.get_entry(job_id)
        if entry is None:
            raise NoSuchJobResultError(
                f"job {job_id!r} has no result to commit in namespace {store.namespace!r}; did its "
                "submit task run in this namespace (or was the result forgotten meanwhile)?",
                job_id=job_id,
                namespace=store.namespace,
            )
        if entry.is_clean:
            log.info("Job %s is already clean; nothing to do.", job_id)
            return result_payload(store.full_entry(entry).result, EntryState.CLEAN)
        cleanup = _EntryCleanup(jobs, entry, context, files, retry, log)
        try:
            return cleanup.run(cleanup_paths, cleanup_callables, remove_staging_losers)
        except JobResultEntryChangedError:
            if round_ == MAX_ROUNDS:
                break
            log.warning(
                "Job %s: its result changed while this cleanup ran (a recompute or a changed-code run "
                "wrote a new one); cleaning up again for the result there now (round %d of %d).",
                job_id, round_ + 1, MAX_ROUNDS,
            )  # fmt: skip
    raise CleanupError(
        f"job {job_id!r}: its result changed {MAX_ROUNDS} times while this cleanup ran (attempts keep "
        "writing new results); nothing was committed. The newest result stays dirty: its own cleanup "
        "commits it, or clear this task once those attempts are done.",
        job_id=job_id,
    )


class _EntryCleanup:
    """One round of :func:`commit_job`: the cleanup for one dirty entry, then its commit."""

    def __init__(
        self, jobs: JobNamespace, entry: JobResultEntry, context: Any, files: Files, retry: RetryPolicy, log: Any
    ) -> None:
        self.jobs, self.entry, self.context = jobs, entry, context
        self.files, self.retry, self.log = files, retry, log

    def _step(self, what: str, action: Callable[[], None]) -> None:
        r = self.retry
        retry_with_backoff(
            action,
            what=what,
            attempts=r.attempts,
            initial_delay=r.initial_delay,
            max_delay=r.max_delay,
            log=self.log,
            job_id=self.entry.job_id,
        )

    def run(
        self, cleanup_paths: Sequence[str], cleanup_callables: Sequence[CleanupCallable], remove_staging_losers: bool
    ) -> dict[str, Any]:
        jobs, entry, files, log = self.jobs, self.entry, self.files, self.log
        job_id, result, s, store = entry.job_id, entry.result, jobs.settings, jobs.results
        # An attempt that holds the job's lease or left an intent (a recompute after a
        # fingerprint change, a recovery in progress) owns its fence-N staging and spec: they
        # are not leftovers, whatever this (possibly late) cleanup thinks. Read again before
        # each removal (CleanupView), since attempts start and end while this runs.
        view = CleanupView(jobs.intents, store, entry)
        live = view.live()
        if live:
            log.info("Job %s: fences %s are in use by a live attempt; their files are kept.", job_id, live)
        reached("cleanup_after_read")
        if remove_staging_losers:
            root = staging_root(s.output_root, jobs.namespace, job_id)
            # What the result points to is kept, whoever wrote it: an adopted result names the
            # predecessor's folder under the successor's fence. The winner's folder is
            # fence-<token>-<nonce> (fence-<token> before nonces); the entry keeps only the token,
            # so every folder of that token is kept too (keeping both holders of a re-issued
            # token is a leak, never a loss).
            kept = folders_named_by(result, root)
            winner = result.fence if result.status.is_success else None

            def remove_losers() -> None:
                for name, child in files.children(root) or ():  # listed first, then read again per folder
                    if not name.startswith(FENCE_PREFIX) or name in kept:
                        continue
                    if winner is not None and fence_token_of(name) == winner:
                        continue
                    if is_live(name, view.live()):
                        log.info("Job %s: staging %s is a live attempt's now; kept.", job_id, child)
                        continue
                    files.remove(child)
                    log.info("Removed staging %s", child)

            self._step(f"remove other attempts' staging of {job_id}", remove_losers)
        specs = spec_dir(s.spec_root, jobs.namespace, job_id)

        def remove_specs() -> None:
            listed = files.children(specs)
            if listed is None:
                return
            for name, spec in listed:
                if not is_live(name.removesuffix(".json"), view.live()):
                    files.remove(spec)
            if not view.live() and not files.children(specs):
                with contextlib.suppress(OSError):  # a spec written since: its attempt's, kept
                    files.remove_empty_folder(specs)

        self._step(f"remove specs of {job_id}", remove_specs)
        # The caller's paths and callables are for this entry too: each first checks that it is
        # still the job's entry (view.live() raises JobResultEntryChangedError, and the cleanup
        # starts over for the new one), so a result written meanwhile never loses its files to
        # the old result's cleanup, nor gets a callable meant for the old one.
        for path in cleanup_paths:

            def remove_user_path(p: str = path) -> None:
                view.live()
                files.remove(p)

            self._step(f"remove {path}", remove_user_path)
        for fn in cleanup_callables:
            name = getattr(fn, "__name__", repr(fn))

            def call(f: CleanupCallable = fn) -> None:
                view.live()
                f(result, self.context)

            self._step(f"{name}({job_id})", call)
        reached("cleanup_before_clean")
        changed = store.mark_result_as_clean(job_id, expected=entry)  # only the entry all this was for
        log.info("Job %s committed (%s).", job_id, "dirty -> clean" if changed else "already clean")
        return result_payload(result, EntryState.CLEAN)


def is_live(name: str, live: set[str]) -> bool:
    """Is ``name`` (a staging folder or spec stem) a live attempt's? Compared by token too: a
    ``fence-<token>`` folder of a version before nonces, or a re-issued token's second holder,
    is kept while that token is live (a leak at worst, never a loss)."""
    token = fence_token_of(name)
    return name in live or (token is not None and token in {fence_token_of(f) for f in live})


def folders_named_by(result: JobResult, root: str) -> set[str]:
    """Names of the folders right under ``root`` (a job's staging root) that ``result``'s
    outputs or checkpoint lie in: what a cleanup must never remove."""
    base = _comparable(root)
    names = set()
    for location in [*result.outputs.values(), result.checkpoint_location]:
        if location:
            path = _comparable(location)
            if path.startswith(base + "/"):
                names.add(path[len(base) + 1 :].split("/", 1)[0])
    return names


def _comparable(uri: str) -> str:
    """``uri`` in one spelling: ``/data/x``, ``file:///data/x`` and ``/data/x/`` compare equal,
    and so do ``s3://conn@bucket/x`` and ``s3://bucket/x`` (Airflow's connection id in a URL)."""
    if "://" in uri:
        protocol, rest = uri.split("://", 1)
    elif uri.startswith("file:"):
        protocol, rest = "file", uri.removeprefix("file:")
    else:
        protocol, rest = "", uri
    if protocol not in ("", "file"):
        host, sep, tail = rest.partition("/")
        rest = host.rsplit("@", 1)[-1] + sep + tail
    return f"{protocol or 'file'}://{rest.rstrip('/')}"


class CleanupView:
    """What a cleanup read about a job, read again before each removal and checked.

    A cleanup may run for minutes (retries with backoff); attempts start and end meanwhile.
    Timeline of what a single read at the start let happen (a result written meanwhile)::

        cleanup: read entry E1 (fence 3) and live fences {}
        recompute: takes the lease (fence 5), writes fence-5/, writes E2, releases the lease
        cleanup: removes fence-5/ as a loser (E2's output!), runs its callables for E1,
                 marks "the job" clean: E2 committed with its output gone

    So every removal first lists the folder, then reads the lease and intent, *then* the entry
    (:meth:`live`): a folder that exists was started before the read; its attempt either holds
    the lease or left an intent (it is live: kept), or it ended, and if it ended with a result
    that result is already stored, so the entry differs from the one read and
    :class:`JobResultEntryChangedError` stops the cleanup before anything of it is removed. The
    final clean is a compare-and-set on the entry's bytes (``mark_result_as_clean(expected=)``).
    """

    def __init__(self, intents: IntentStore, store: JobResultStore, entry: JobResultEntry) -> None:
        self.intents, self.store, self.entry = intents, store, entry

    def live(self) -> set[str]:
        """The live attempts' ``fence-...`` names; raises :class:`JobResultEntryChangedError`
        when the job's entry is no longer the one this cleanup read."""
        job_id = self.entry.job_id
        live = self.intents.live_fences(job_id)  # the lease and intent first, then the entry
        current = self.store.get_entry(job_id)
        if current != self.entry:
            raise JobResultEntryChangedError(
                f"job {job_id!r}: its result changed while its cleanup ran (a new result was written, "
                "or it was committed or forgotten meanwhile); nothing more is removed for the old one.",
                job_id=job_id,
                namespace=self.store.namespace,
            )
        return live
