"""JrsCleanupOperator: remove what jobs left behind, then commit their results (dirty -> clean).

The cleanup itself is the protocol's (:func:`airflow_jrs.protocol.cleanup.commit_job`: what is a
leftover, what is kept, the compare-and-set commit, docs/recovery.md "Cleanup after a
recovery"), so the fault trials run the very code this task runs. This operator only adapts it
to Airflow: the submit tasks' job ids (derived from their ``job_id`` rule when it names
run-level values only, else pulled from their XComs), files reached through Airflow's
``ObjectStoragePath`` (object-store connections), store failures mapped to retryable or final
task failures, and the Asset event (or a skip) for what was committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator, ObjectStoragePath
from airflow.sdk.exceptions import AirflowSkipException

from airflow_jrs.domain.payload import derivable_job_id, tasks_job_ids
from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.hooks.jrs import JrsHook
from airflow_jrs.hooks.store_failures import airflow_failures
from airflow_jrs.protocol.cleanup import (
    MAX_ROUNDS,
    CleanupCallable,
    CleanupView,
    RetryPolicy,
    commit_job,
    folders_named_by,
    is_live,
    retry_with_backoff,
)

__all__ = [
    "MAX_ROUNDS",
    "CleanupCallable",
    "CleanupView",
    "JrsCleanupOperator",
    "ObjectStorageFiles",
    "folders_named_by",
    "is_live",
    "remove_path",
    "retry_with_backoff",
]


class ObjectStorageFiles:
    """The protocol's :class:`~airflow_jrs.protocol.cleanup.Files` through Airflow's
    ``ObjectStoragePath``: a URL may name an Airflow connection (``s3://conn_id@bucket/...``),
    as the operator has always allowed."""

    def children(self, uri: str) -> list[tuple[str, str]] | None:
        folder = ObjectStoragePath(uri)
        if not folder.exists():
            return None
        return [(child.name, str(child)) for child in list(folder.iterdir())]

    def remove(self, uri: str) -> bool:
        return remove_path(uri)

    def remove_empty_folder(self, uri: str) -> None:
        ObjectStoragePath(uri).rmdir(recursive=False)


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


def _template_env(task: BaseOperator) -> Any:
    """The Jinja environment ``task``'s templates render in (its DAG's filters), if it has a DAG."""
    dag = getattr(task, "dag", None) if task.has_dag() else None
    return dag.get_template_env() if dag is not None else None


class JrsCleanupOperator(BaseOperator):
    """Clean up jobs' leftovers and mark their results clean (commit).

    :param jobs: job ids, or tasks (``JrsSparkSubmitOperator``) whose returned result names the job
    :param cleanup_paths: extra paths or URLs to delete (templated)
    :param cleanup_callables: ``fn(result, context)`` called per dirty job before it is marked clean
    :param remove_staging_losers: delete other attempts' staging folders beside the winner's
    :param cleanup_attempts, initial_backoff, max_backoff: retry strategy of each step
    :param do_xcom_push: push the committed payloads (a list) as the task's XCom. Default
        ``False``: the store and the Asset events say what was committed, and the push cost an
        Execution API call per task that no reader needed (docs/benchmarks.md)
    """

    template_fields: Sequence[str] = ("job_ids", "cleanup_paths", "submit_job_ids")
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
        kwargs.setdefault("do_xcom_push", False)
        super().__init__(**kwargs)
        if not jobs:
            raise JrsConfigError(f"{self.task_id}: `jobs` is empty; name the job ids or submit tasks to commit")
        self.job_ids = [j for j in jobs if isinstance(j, str)]
        self.job_tasks = [j.task_id for j in jobs if isinstance(j, BaseOperator)]
        #: submit task id -> its ``job_id`` template (``None``: the default rule), for the tasks
        #: whose job id this task can compute itself (rendered here: run-level names only). The
        #: others' job ids come from their XComs (an Execution API call each).
        self.submit_job_ids: dict[str, str | None] = {}
        for task in jobs:
            if isinstance(task, BaseOperator):
                self.set_upstream(task)
                derivable, template = derivable_job_id(task, _template_env(task))
                if derivable:
                    self.submit_job_ids[task.task_id] = template
        self.cleanup_paths = list(cleanup_paths)
        self.cleanup_callables = list(cleanup_callables)
        self.remove_staging_losers = remove_staging_losers
        self.jrs_conn_id = jrs_conn_id
        self.jrs_namespace = jrs_namespace
        self.cleanup_attempts = cleanup_attempts
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff

    def _job_ids(self, context: Any) -> list[str]:
        """The job ids named, then the submit tasks' (computed when their rule allows it, else
        pulled): the cleanup reads each job's entry from the store anyway, so the submit's
        payload would only have told it the id."""
        if not self.job_tasks:
            return list(self.job_ids)
        return [*self.job_ids, *tasks_job_ids(context, context["ti"].xcom_pull, self.job_tasks, self.submit_job_ids)]

    def execute(self, context: Any) -> list[dict[str, Any]]:
        hook = JrsHook(self.jrs_conn_id, namespace=self.jrs_namespace)
        committed = []
        with airflow_failures(hook):  # one clear line; no retries for what needs a person
            namespace_jobs = hook.jobs()
            retry = RetryPolicy(self.cleanup_attempts, self.initial_backoff, self.max_backoff)
            for job_id in self._job_ids(context):
                committed.append(
                    commit_job(
                        namespace_jobs,
                        job_id,
                        context=context,
                        cleanup_paths=self.cleanup_paths,
                        cleanup_callables=self.cleanup_callables,
                        remove_staging_losers=self.remove_staging_losers,
                        files=ObjectStorageFiles(),
                        retry=retry,
                        log=self.log,
                    )
                )
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
