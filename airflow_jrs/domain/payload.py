"""The XCom payload of a job result: what tasks hand downstream, built in one place.

Submit tasks return it (computed, adopted or skipped), cleanup tasks return a list of them,
sensors return a list of them, and the start-in-triggerer triggers write the same payload
through the Execution API. Downstream tasks therefore see one shape::

    {"job_id", "status", "outputs", "metrics", "fingerprint", ..., "state": "dirty"|"clean",
     "skipped": bool, "reused": bool (submit tasks: the stored result was reused, Spark did not
     run; its ``attempt`` and ``end_time`` say which run computed it, and when),
     "decided_in": "triggerer" (when the triggerer ended the task),
     "adopted_from": <fence> (when a predecessor's finished output was adopted),
     "summary": true (only where a clean reference was read without its result document: the
     sensor's trigger; the sensor reads the document on the worker and returns the full payload)}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from airflow_jrs.domain.identity import job_id_for
from airflow_jrs.domain.model import EntryState, JobResult, JobResultEntry
from airflow_jrs.domain.result_json import result_to_dict
from airflow_jrs.exceptions import CleanupError

#: ``decided_in`` of a task that the triggerer ended (start_in_triggerer).
DECIDED_IN_TRIGGERER = "triggerer"
#: The XCom key a submit task with ``skip_when_done`` pushes its payload under before it skips.
SKIPPED_RESULT_KEY = "jrs_result"


def result_payload(result: JobResult, state: EntryState | str, **extra: Any) -> dict[str, Any]:
    """The payload of ``result`` stored in ``state``; ``extra`` adds ``skipped``, ``decided_in``, ...

    A submit task's payload (one with ``skipped``) also says ``reused``: the words a UI shows for
    "computed now" vs "reused", without changing what success means."""
    reused = {"reused": bool(extra["skipped"])} if "skipped" in extra else {}
    return {**result_to_dict(result), "state": EntryState(state).value, **reused, **extra}


def entry_payload(entry: JobResultEntry, **extra: Any) -> dict[str, Any]:
    """The payload of a stored entry; a summary (a clean reference) says so: its outputs, metrics
    and attempt are in its result document (:meth:`~airflow_jrs.store.JobResultStore.full_entry`)."""
    if entry.summary:
        extra = {**extra, "summary": True}
    return result_payload(entry.result, entry.state, **extra)


def submitted_job_ids(pull: Callable[..., Any], task_ids: Sequence[str]) -> list[str]:
    """The job ids that submit tasks handled in this run, from their XComs (``pull`` is
    ``ti.xcom_pull``): ``return_value``, or ``jrs_result`` when they skipped with
    ``skip_when_done``. The cleanup operator and its start-in-triggerer trigger share this rule."""
    ids = []
    for task_id in task_ids:
        value = pull(task_ids=task_id)
        if value is None:
            value = pull(task_ids=task_id, key=SKIPPED_RESULT_KEY)
        if not isinstance(value, dict) or "job_id" not in value:
            raise CleanupError(
                f"task {task_id!r} returned no job result ({value!r}); is it a JrsSparkSubmitOperator "
                "that succeeded in this run?",
                job_id=None,
            )
        ids.append(value["job_id"])
    return ids


#: What a job id template may name to render the same in every task of a run (a cleanup renders
#: its submit's): run-level values only. ``ti``, ``task``, ``params`` (task params merge in),
#: ``var``, user macros and the like are task-level or read at render time, so the cleanup
#: pulls the submit's XCom for those instead.
RUN_LEVEL_NAMES = frozenset(
    {
        "ds", "ds_nodash", "ts", "ts_nodash", "ts_nodash_with_tz", "logical_date", "data_interval_start",
        "data_interval_end", "run_id", "dag_run", "dag", "macros", "partition_key",
    }
)  # fmt: skip


def derivable_job_id(task: Any, env: Any = None) -> tuple[bool, str | None]:
    """Can a downstream task (the cleanup) name ``task``'s job without its XCom? ``(True, job_id)``
    when ``task`` is a guarded operator whose ``job_id`` is unset (the default rule) or a template
    naming run-level values only (:data:`RUN_LEVEL_NAMES`), rendered the same in any task of
    the run; ``(False, None)`` otherwise. Decided at DAG parse time, from the operator; ``env``
    is the DAG's Jinja environment (its filters), a plain one by default."""
    if not getattr(task, "jrs_guarded", None) or not hasattr(task, "job_id"):
        return False, None
    template = task.job_id
    if template is None:
        return True, None
    if not isinstance(template, str) or template.endswith(tuple(getattr(task, "template_ext", ()) or ())):
        return False, None
    import jinja2
    from jinja2 import meta

    try:
        names = meta.find_undeclared_variables((env or jinja2.Environment()).parse(template))
    except jinja2.TemplateError:  # not parsed, or a filter unknown here: the XCom says it
        return False, None
    return (True, template) if names <= RUN_LEVEL_NAMES else (False, None)


def derived_job_id(job_id: str | None, context: Mapping[str, Any], task_id: str) -> str:
    """The job id task ``task_id`` of this run handles, computed in another task's ``context``:
    its rendered ``job_id``, else the default rule with its task id (unmapped)
    (:func:`~airflow_jrs.domain.identity.job_id_for`, the submit's own rule)."""
    ti = context["ti"]
    as_submit = SimpleNamespace(dag_id=ti.dag_id, task_id=task_id, map_index=-1)
    return job_id_for(job_id, {**context, "ti": as_submit, "task_instance": as_submit})


def tasks_job_ids(
    context: Mapping[str, Any],
    pull: Callable[..., Any],
    job_tasks: Sequence[str],
    submit_job_ids: Mapping[str, str | None],
) -> list[str]:
    """The job ids of ``job_tasks`` in this run, in their order: derived for those in
    ``submit_job_ids`` (their rendered ``job_id`` rules), pulled (:func:`submitted_job_ids`) for
    the others. A mapped task pulls (its submit's default rule would differ by map index). The
    cleanup operator and its start-in-triggerer trigger share this rule."""
    map_index = getattr(context["ti"], "map_index", -1)
    mapped = map_index is not None and map_index >= 0
    pulled = [t for t in job_tasks if mapped or t not in submit_job_ids]
    from_xcom = dict(zip(pulled, submitted_job_ids(pull, pulled), strict=True)) if pulled else {}
    return [from_xcom[t] if t in from_xcom else derived_job_id(submit_job_ids[t], context, t) for t in job_tasks]
