"""JrsCleanupOperator: remove what jobs left behind, then commit their results (dirty -> clean).

Flink's dispatcher runs a job's global cleanup with a retry strategy and only then marks the
result clean; a crash in between leaves the result dirty, and the next cleanup simply runs
again. Same here: every action is idempotent (deleting what is already gone succeeds), a
dirty result means cleanup only (never Spark), and an already clean result is success.

What a job leaves behind: staging folders of attempts that lost (``fence-N`` beside the
winner's), its spec files in the state backend, and whatever the DAG author lists in
``cleanup_paths`` or does in ``cleanup_callables``. Never a leftover: a folder the result's
outputs lie in (an adopted result names its predecessor's folder, not its own fence's), and
anything of an attempt that is live when the removal happens. The commit is a compare-and-set
on the entry this cleanup read; a result written meanwhile is cleaned up for in turn
(:class:`CleanupView`, docs/recovery.md "Cleanup after a recovery").
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any

from airflow.sdk import BaseOperator, ObjectStoragePath
from airflow.sdk.exceptions import AirflowSkipException

from airflow_jrs.exceptions import CleanupError, JobResultEntryChangedError, JrsConfigError, NoSuchJobResultError
from airflow_jrs.hooks.jrs import JrsHook
from airflow_jrs.hooks.store_failures import airflow_failures
from airflow_jrs.intent import IntentStore
from airflow_jrs.paths import FENCE_PREFIX, fence_token_of, spec_dir, staging_root
from airflow_jrs.payload import result_payload, submitted_job_ids
from airflow_jrs.protocol.steps import reached
from airflow_jrs.store import EntryState, JobResult, JobResultEntry, RedisJobResultStore

CleanupCallable = Callable[[JobResult, Any], None]
#: How many times one cleanup starts over for a result written while it ran, before it gives up.
MAX_ROUNDS = 3


def remove_path(uri: str) -> bool:
    """Delete a file or folder (local path or object store URL); ``False`` when already gone."""
    path = ObjectStoragePath(uri)
    if not path.exists():
        return False
    if path.is_dir():
        path.rmdir(recursive=True)
    else:
        path.unlink()
    return True


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


class JrsCleanupOperator(BaseOperator):
    """Clean up jobs' leftovers and mark their results clean (commit).

    :param jobs: job ids, or tasks (``JrsSparkSubmitOperator``) whose returned result names the job
    :param cleanup_paths: extra paths or URLs to delete (templated)
    :param cleanup_callables: ``fn(result, context)`` called per dirty job before it is marked clean
    :param remove_staging_losers: delete other attempts' staging folders beside the winner's
    :param cleanup_attempts, initial_backoff, max_backoff: retry strategy of each step
    """

    template_fields: Sequence[str] = ("job_ids", "cleanup_paths")
    ui_color = "#c5e8c5"

    def __init__(
        self,
        *,
        jobs: Sequence[str | BaseOperator] = (),
        cleanup_paths: Sequence[str] = (),
        cleanup_callables: Sequence[CleanupCallable] = (),
        remove_staging_losers: bool = True,
        jrs_conn_id: str | None = None,
        jrs_namespace: str | None = None,
        cleanup_attempts: int = 5,
        initial_backoff: float = 1.0,
        max_backoff: float = 60.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not jobs:
            raise JrsConfigError(f"{self.task_id}: `jobs` is empty; name the job ids or submit tasks to commit")
        self.job_ids = [j for j in jobs if isinstance(j, str)]
        self.job_tasks = [j.task_id for j in jobs if isinstance(j, BaseOperator)]
        for task in jobs:
            if isinstance(task, BaseOperator):
                self.set_upstream(task)
        self.cleanup_paths = list(cleanup_paths)
        self.cleanup_callables = list(cleanup_callables)
        self.remove_staging_losers = remove_staging_losers
        self.jrs_conn_id = jrs_conn_id
        self.jrs_namespace = jrs_namespace
        self.cleanup_attempts = cleanup_attempts
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff

    def _job_ids(self, context: Any) -> list[str]:
        if not self.job_tasks:
            return list(self.job_ids)
        return [*self.job_ids, *submitted_job_ids(context["ti"].xcom_pull, self.job_tasks)]

    def _step(self, job_id: str, what: str, action: Callable[[], None]) -> None:
        retry_with_backoff(
            action,
            what=what,
            attempts=self.cleanup_attempts,
            initial_delay=self.initial_backoff,
            max_delay=self.max_backoff,
            log=self.log,
            job_id=job_id,
        )

    def execute(self, context: Any) -> list[dict[str, Any]]:
        hook = JrsHook(self.jrs_conn_id, namespace=self.jrs_namespace)
        committed = []
        with airflow_failures(hook):  # one clear line; no retries for what needs a person
            store = hook.get_store()
            for job_id in self._job_ids(context):
                committed.append(self._commit(context, hook, store, job_id))
        # Asset integration: each Asset outlet's event (emitted by Airflow when this task
        # succeeds) carries what was committed, so a DAG scheduled on it can find the outputs.
        from airflow.sdk import Asset

        # Only SUCCEEDED jobs are announced: a consumer must never start on outputs that do not
        # exist. When nothing succeeded, the task ends skipped, which emits no Asset event.
        assets = [outlet for outlet in self.outlets if isinstance(outlet, Asset)]
        fields = ("job_id", "status", "outputs", "fingerprint", "application_id")
        jobs = [{k: c.get(k) for k in fields} for c in committed if c.get("status") == "SUCCEEDED"]
        unsuccessful = [c["job_id"] for c in committed if c.get("status") != "SUCCEEDED"]
        if assets and committed and not jobs:
            raise AirflowSkipException(
                f"committed {unsuccessful}, but none SUCCEEDED: no Asset event for {[a.uri for a in assets]}"
            )
        extra = {**(jobs[0] if len(jobs) == 1 else {}), "jobs": jobs}  # one job: also flat
        if unsuccessful:
            extra["unsuccessful"] = unsuccessful
        for outlet in assets:
            context["outlet_events"][outlet].extra.update(extra)
        return committed

    def _commit(self, context: Any, hook: JrsHook, store: RedisJobResultStore, job_id: str) -> dict[str, Any]:
        """Clean up after the job's entry and commit it; start over when a new result was
        written while this ran (see :class:`CleanupView`), at most :data:`MAX_ROUNDS` times."""
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
                self.log.info("Job %s is already clean; nothing to do.", job_id)
                return result_payload(entry.result, EntryState.CLEAN)
            try:
                return self._commit_entry(context, hook, store, entry)
            except JobResultEntryChangedError:
                if round_ == MAX_ROUNDS:
                    break
                self.log.warning(
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

    def _commit_entry(
        self, context: Any, hook: JrsHook, store: RedisJobResultStore, entry: JobResultEntry
    ) -> dict[str, Any]:
        job_id, result, s = entry.job_id, entry.result, hook.settings
        # An attempt that holds the job's lease or left an intent (a recompute after a
        # fingerprint change, a recovery in progress) owns its fence-N staging and spec: they
        # are not leftovers, whatever this (possibly late) cleanup thinks. Read again before
        # each removal (CleanupView), since attempts start and end while this runs.
        view = CleanupView(IntentStore(hook.get_conn(), hook.namespace, s.spec_root), store, entry)
        live = view.live()
        if live:
            self.log.info("Job %s: fences %s are in use by a live attempt; their files are kept.", job_id, live)
        reached("cleanup_after_read")
        if self.remove_staging_losers:
            root = staging_root(s.output_root, hook.namespace, job_id)
            # What the result points to is kept, whoever wrote it: an adopted result names the
            # predecessor's folder under the successor's fence. The winner's folder is
            # fence-<token>-<nonce> (fence-<token> before nonces); the entry keeps only the token,
            # so every folder of that token is kept too (keeping both holders of a re-issued
            # token is a leak, never a loss).
            kept = folders_named_by(result, root)
            winner = result.fence if result.status.is_success else None
            job_root = ObjectStoragePath(root)

            def remove_losers() -> None:
                if not job_root.exists():
                    return
                for child in list(job_root.iterdir()):  # listed first, then read again per folder
                    name = child.name
                    if not name.startswith(FENCE_PREFIX) or name in kept:
                        continue
                    if winner is not None and fence_token_of(name) == winner:
                        continue
                    if is_live(name, view.live()):
                        self.log.info("Job %s: staging %s is a live attempt's now; kept.", job_id, child)
                        continue
                    remove_path(str(child))
                    self.log.info("Removed staging %s", child)

            self._step(job_id, f"remove other attempts' staging of {job_id}", remove_losers)
        specs = ObjectStoragePath(spec_dir(s.spec_root, hook.namespace, job_id))

        def remove_specs() -> None:
            if not specs.exists():
                return
            for spec in list(specs.iterdir()):
                if not is_live(spec.name.removesuffix(".json"), view.live()):
                    remove_path(str(spec))
            if not view.live() and not any(specs.iterdir()):
                with contextlib.suppress(OSError):  # a spec written since: its attempt's, kept
                    specs.rmdir(recursive=False)

        self._step(job_id, f"remove specs of {job_id}", remove_specs)
        # The user's paths and callables are for this entry too: each first checks that it is
        # still the job's entry (view.live() raises JobResultEntryChangedError, and the cleanup
        # starts over for the new one), so a result written meanwhile never loses its files to
        # the old result's cleanup, nor gets a callable meant for the old one.
        for path in self.cleanup_paths:

            def remove_user_path(p: str = path) -> None:
                view.live()
                remove_path(p)

            self._step(job_id, f"remove {path}", remove_user_path)
        for fn in self.cleanup_callables:
            name = getattr(fn, "__name__", repr(fn))

            def call(f: CleanupCallable = fn) -> None:
                view.live()
                f(result, context)

            self._step(job_id, f"{name}({job_id})", call)
        reached("cleanup_before_clean")
        changed = store.mark_result_as_clean(job_id, expected=entry)  # only the entry all this was for
        self.log.info("Job %s committed (%s).", job_id, "dirty -> clean" if changed else "already clean")
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
    """``uri`` in one spelling: ``/data/x``, ``file:///data/x`` and ``/data/x/`` compare equal."""
    path = ObjectStoragePath(uri)
    return f"{path.protocol or 'file'}://{str(path.path).rstrip('/')}"


class CleanupView:
    """What a cleanup read about a job, read again before each removal and checked.

    A cleanup may run for minutes (retries with backoff); attempts start and end meanwhile.
    Timeline of what a single read at the start let happen (issue 18, defect 2)::

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

    def __init__(self, intents: IntentStore, store: RedisJobResultStore, entry: JobResultEntry) -> None:
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
