"""JrsCleanupOperator: remove what jobs left behind, then commit their results (dirty -> clean).

The cleanup itself is the protocol's (:func:`airflow_jrs.protocol.cleanup.commit_job`: what is a
leftover, what is kept, the compare-and-set commit, docs/recovery.md "Cleanup after a
recovery"), so the fault trials run the very code this task runs. This operator only adapts it
to Airflow: the submit tasks' job ids (derived from their ``job_id`` rule when it names
run-level values only, else pulled from their XComs; a mapped submit stands for one job per map
index of the run, found through the Task SDK), files reached through Airflow's
``ObjectStoragePath`` (object-store connections), store failures mapped to retryable or final
task failures, and the Asset event (or a skip) for what was committed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from airflow.providers.common.compat.sdk import AirflowSkipException, BaseOperator, MappedOperator, ObjectStoragePath

from airflow_jrs.compat import remove_empty_folder
from airflow_jrs.domain.identity import default_job_id
from airflow_jrs.domain.payload import SKIPPED_RESULT_KEY, derivable_job_id, tasks_job_ids
from airflow_jrs.exceptions import CleanupError, JrsConfigError
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
        remove_empty_folder(ObjectStoragePath(uri))


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


def _template_env_of(task: MappedOperator) -> Any:
    """The Jinja environment of a mapped task's DAG, if it has one."""
    dag = task.get_dag()
    return dag.get_template_env() if dag is not None else None


def _template_env(task: BaseOperator) -> Any:
    """The Jinja environment ``task``'s templates render in (its DAG's filters), if it has a DAG."""
    dag = getattr(task, "dag", None) if task.has_dag() else None
    return dag.get_template_env() if dag is not None else None


def _mapped_job_rule(task: Any, env: Any) -> bool:
    """Can the cleanup name each map index's job of mapped ``task`` itself? ``True`` when the
    task is guarded and keeps the default job id (``<dag>.<task>.<key>.map-N``, computed per map
    index); ``False`` when each map index's XCom must say it (``job_id`` expanded, or a template
    naming task-level values such as ``{{ ti.map_index }}``). Raises :class:`JrsConfigError` for a
    ``job_id`` that is the same for every map index: every map index but the first would find
    the first one's result and skip, and the cleanup would commit one job for all of them."""
    kind = getattr(task.operator_class, "jrs_guarded", None)
    expanded = getattr(task.expand_input, "value", None)
    if not kind or not isinstance(expanded, Mapping):  # not guarded, or expand_kwargs(): ask the XComs
        return False
    if "job_id" in expanded:
        return False
    template = task.partial_kwargs.get("job_id")
    if template is None:
        return True
    stand_in = SimpleNamespace(jrs_guarded=kind, job_id=template, template_ext=task.template_ext)
    if derivable_job_id(stand_in, env)[0]:
        raise JrsConfigError(
            f"task {task.task_id!r} is mapped, and its job_id {template!r} names the same job for every map "
            "index: all but one map index would skip on the first one's result. Leave job_id unset (the "
            "default ends in .map-<index>), name the map index in it ({{ ti.map_index }}), or expand job_id "
            "with one value per map index"
        )
    return False


def _other_mapped_group(task: BaseOperator, cleanup: BaseOperator) -> Any:
    """The mapped task group ``task`` is in when the cleanup is not in it (``task`` then runs once
    per map index of that group, and the cleanup must commit all of them); else ``None``."""
    group = task.get_closest_mapped_task_group()
    return group if group is not None and group is not cleanup.get_closest_mapped_task_group() else None


class JrsCleanupOperator(BaseOperator):
    """Clean up jobs' leftovers and mark their results clean (commit).

    :param jobs: job ids, or tasks (``JrsSparkSubmitOperator``) whose returned result names the job.
        A mapped task (``JrsSparkSubmitOperator.partial(...).expand(...)``, or a task in a mapped
        task group this cleanup is not in) stands for every map index it has in the run: each
        map index's job is committed (docs/how-to/mapped-jobs.md)
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
        jobs: Sequence[str | BaseOperator | MappedOperator] = (),
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
        wrong = [j for j in jobs if not isinstance(j, str | BaseOperator | MappedOperator)]
        if wrong:  # an entry left out would leave its jobs dirty, with the task a success
            hint = " (a @task.jrs_pyspark call: pass its .operator)" if hasattr(wrong[0], "operator") else ""
            raise JrsConfigError(
                f"{self.task_id}: `jobs` holds {wrong[0]!r} ({type(wrong[0]).__name__}){hint}; give job ids (str) or "
                "the submit tasks themselves (a JrsSparkSubmitOperator, or its .partial(...).expand(...)), not "
                "their output or their task group"
            )
        self.job_ids = [j for j in jobs if isinstance(j, str)]
        self.job_tasks = [j.task_id for j in jobs if not isinstance(j, str)]
        #: submit task id -> its ``job_id`` template (``None``: the default rule), for the unmapped
        #: tasks whose job id this task can compute itself (rendered here: run-level names only).
        #: The others' job ids come from their XComs (an Execution API call each).
        self.submit_job_ids: dict[str, str | None] = {}
        #: mapped submit task id -> ``True`` when each map index keeps the default job id (computed
        #: here per map index), ``False`` when each map index's XCom names it. Kept out of
        #: ``submit_job_ids``, so the start-in-triggerer trigger (which sees only one map index)
        #: finds no XCom for them and hands the task to a worker.
        self.mapped_submits: dict[str, bool] = {}
        for task in jobs:
            if isinstance(task, str):
                continue
            self.set_upstream(task)
            if isinstance(task, MappedOperator):
                self.mapped_submits[task.task_id] = _mapped_job_rule(task, _template_env_of(task))
                continue
            derivable, template = derivable_job_id(task, _template_env(task))
            group = _other_mapped_group(task, self)
            if group is not None:
                if derivable and template is not None:
                    raise JrsConfigError(
                        f"task {task.task_id!r} is in mapped task group {group.group_id!r}, and its job_id "
                        f"{template!r} names the "
                        "same job for every map index; leave job_id unset (the default ends in .map-<index>) "
                        "or name the map index in it ({{ ti.map_index }})"
                    )
                self.mapped_submits[task.task_id] = derivable
            elif derivable:
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
        pull = context["ti"].xcom_pull
        unmapped = [t for t in self.job_tasks if t not in self.mapped_submits]
        found = iter(tasks_job_ids(context, pull, unmapped, self.submit_job_ids) if unmapped else ())
        ids = list(self.job_ids)
        for task_id in self.job_tasks:
            ids += self._mapped_job_ids(context, task_id) if task_id in self.mapped_submits else [next(found)]
        return ids

    def _mapped_job_ids(self, context: Any, task_id: str) -> list[str]:
        """The jobs of every map index mapped task ``task_id`` has in this run: computed by the
        default rule (its ``.map-N`` job ids) or pulled from each map index's XCom. The map indexes
        come from the run's task instances (``RuntimeTaskInstance.get_task_states``, one Execution
        API call): the expansion is made by the scheduler, and only the run knows it."""
        ti = context["ti"]
        states = ti.get_task_states(dag_id=ti.dag_id, task_ids=[task_id], run_ids=[ti.run_id]).get(ti.run_id, {})
        indexes = sorted(
            int(name[len(task_id) + 1 :])
            for name, state in states.items()
            if name.startswith(f"{task_id}_") and name[len(task_id) + 1 :].isdigit() and state != "removed"
        )
        if not indexes:
            self.log.info(
                "Task %s is mapped and has no map index in run %s (%s): no job of it to commit.",
                task_id, ti.run_id, states.get(task_id, "not expanded"),
            )  # fmt: skip
            return []
        self.log.info("Task %s is mapped: committing the jobs of its map indexes %s.", task_id, indexes)
        if self.mapped_submits[task_id]:
            as_submit = [SimpleNamespace(dag_id=ti.dag_id, task_id=task_id, map_index=i) for i in indexes]
            return [default_job_id({**context, "ti": one, "task_instance": one}) for one in as_submit]
        ids = []
        for index in indexes:
            value = ti.xcom_pull(task_ids=task_id, map_indexes=index)
            if value is None:
                value = ti.xcom_pull(task_ids=task_id, map_indexes=index, key=SKIPPED_RESULT_KEY)
            if not isinstance(value, dict) or "job_id" not in value:
                raise CleanupError(
                    f"task {task_id!r} map index {index} returned no job result ({value!r}) in run {ti.run_id}; is "
                    "it a JrsSparkSubmitOperator that succeeded? Clear it, or this cleanup once it has run.",
                    job_id=None,
                )
            ids.append(value["job_id"])
        return ids

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
        # exist. When nothing succeeded, or there was nothing to commit (a mapped submit with no
        # map index in this run), the task ends skipped, which emits no Asset event.
        assets = [outlet for outlet in self.outlets if isinstance(outlet, Asset)]
        fields = ("job_id", "status", "outputs", "fingerprint", "application_id")
        jobs = [{k: c.get(k) for k in fields} for c in committed if c.get("status") == "SUCCEEDED"]
        unsuccessful = [c["job_id"] for c in committed if c.get("status") != "SUCCEEDED"]
        if assets and not jobs:
            what = f"committed {unsuccessful}, but none SUCCEEDED" if committed else "no job to commit in this run"
            raise AirflowSkipException(f"{what}: no Asset event for {[a.uri for a in assets]}")
        extra = {**(jobs[0] if len(jobs) == 1 else {}), "jobs": jobs}  # one job: also flat
        if unsuccessful:
            extra["unsuccessful"] = unsuccessful
        for outlet in assets:
            context["outlet_events"][outlet].extra.update(extra)
        return committed
