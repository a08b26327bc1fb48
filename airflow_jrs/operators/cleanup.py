"""JrsCleanupOperator: remove what jobs left behind, then commit their results (dirty -> clean).

Flink's dispatcher runs a job's global cleanup with a retry strategy and only then marks the
result clean; a crash in between leaves the result dirty, and the next cleanup simply runs
again. Same here: every action is idempotent (deleting what is already gone succeeds), a
dirty result means cleanup only (never Spark), and an already clean result is success.

What a job leaves behind: staging folders of attempts that lost (``fence-N`` beside the
winner's), its spec files in the state backend, and whatever the DAG author lists in
``cleanup_paths`` or does in ``cleanup_callables``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from airflow.sdk import BaseOperator, ObjectStoragePath
from airflow.sdk.exceptions import AirflowSkipException

from airflow_jrs.exceptions import CleanupError, JrsConfigError, NoSuchJobResultError
from airflow_jrs.hooks.jrs import JrsHook
from airflow_jrs.hooks.store_failures import airflow_failures
from airflow_jrs.intent import IntentStore
from airflow_jrs.operators.steps import reached
from airflow_jrs.paths import FENCE_PREFIX, fence_token_of, spec_dir, staging_root
from airflow_jrs.payload import result_payload, submitted_job_ids
from airflow_jrs.store import EntryState, JobResult, RedisJobResultStore

CleanupCallable = Callable[[JobResult, Any], None]


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
        entry = store.get_entry(job_id)
        if entry is None:
            raise NoSuchJobResultError(
                f"job {job_id!r} has no result to commit in namespace {store.namespace!r}; did its "
                "submit task run in this namespace?",
                job_id=job_id,
                namespace=store.namespace,
            )
        result = entry.result
        if entry.is_clean:
            self.log.info("Job %s is already clean; nothing to do.", job_id)
            return result_payload(result, EntryState.CLEAN)
        s = hook.settings
        # An attempt that holds the job's lease or left an intent now (a recompute after a
        # fingerprint change, a recovery in progress) owns its fence-N staging and spec:
        # they are not leftovers, whatever this (possibly late) cleanup thinks.
        live = IntentStore(hook.get_conn(), hook.namespace, s.spec_root).live_fences(job_id)
        if live:
            self.log.info("Job %s: fences %s are in use by a live attempt; their files are kept.", job_id, live)
        if self.remove_staging_losers:
            # the winner's folder is fence-<token>-<nonce> (fence-<token> before nonces); the entry
            # keeps only the token, so every folder of that token is kept (the nonce only tells
            # apart two holders of a re-issued token: keeping both is a leak, never a loss)
            winner = result.fence if result.status.is_success else None
            job_root = ObjectStoragePath(staging_root(s.output_root, hook.namespace, job_id))

            def remove_losers() -> None:
                if not job_root.exists():
                    return
                for child in job_root.iterdir():
                    keep = (winner is not None and fence_token_of(child.name) == winner) or child.name in live
                    if child.name.startswith(FENCE_PREFIX) and not keep:
                        remove_path(str(child))
                        self.log.info("Removed staging %s", child)

            self._step(job_id, f"remove other attempts' staging of {job_id}", remove_losers)
        specs = spec_dir(s.spec_root, hook.namespace, job_id)

        def remove_specs() -> None:
            if not live:
                remove_path(specs)
                return
            folder = ObjectStoragePath(specs)
            if folder.exists():
                for spec in folder.iterdir():
                    if spec.name.removesuffix(".json") not in live:
                        remove_path(str(spec))

        self._step(job_id, f"remove specs of {job_id}", remove_specs)
        for path in self.cleanup_paths:
            self._step(job_id, f"remove {path}", lambda p=path: (remove_path(p), None)[1])  # type: ignore[misc]
        for fn in self.cleanup_callables:
            name = getattr(fn, "__name__", repr(fn))
            self._step(job_id, f"{name}({job_id})", lambda f=fn: f(result, context))  # type: ignore[misc]
        reached("cleanup_before_clean")
        changed = store.mark_result_as_clean(job_id)
        self.log.info("Job %s committed (%s).", job_id, "dirty -> clean" if changed else "already clean")
        return result_payload(result, EntryState.CLEAN)
