"""The XCom payload of a job result: what tasks hand downstream, built in one place.

Submit tasks return it (computed, adopted or skipped), cleanup tasks return a list of them,
sensors return a list of them, and the start-in-triggerer triggers write the same payload
through the Execution API. Downstream tasks (and the cleanup, which reads the job ids of its
submit tasks from it) therefore see one shape::

    {"job_id", "status", "outputs", "metrics", "fingerprint", ..., "state": "dirty"|"clean",
     "skipped": bool, "reused": bool (submit tasks: the stored result was reused, Spark did not
     run; its ``attempt`` and ``end_time`` say which run computed it, and when),
     "decided_in": "triggerer" (when the triggerer ended the task),
     "adopted_from": <fence> (when a predecessor's finished output was adopted)}
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

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
    """The payload of a stored entry."""
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
