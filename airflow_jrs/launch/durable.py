"""The Spark provider's ``durable=True`` under the guard: the task state store as one more witness.

Airflow 3.3's ``ResumableJobMixin`` (the parent of ``SparkSubmitOperator``) persists the driver or
application id in the task's state store (``context["task_state_store"]``, scoped to one task
instance of one run) after spark-submit returned, and on a retry reconnects to that id: polls a
running driver, returns at once for a succeeded one, submits anew for a failed one.

Under the guard every try takes the job's lease under a new fence and finds the previous try's
intent, which already records that driver id (:mod:`.submission`) under the fence that owns it.
Recovery (:mod:`airflow_jrs.protocol.recovery`) then does what the parent's reattach does, with the
store as the authority: waits for a running driver (``predecessor="wait"``), adopts its output
when the commit marker in *that fence's* folder says it finished (no resubmission), submits anew
when it failed. Letting the parent reattach as well would poll the previous fence's driver under
the new fence and check the new fence's (empty) folder afterwards, so:

* before each launch the state store's id (and the Kubernetes driver status the parent caches
  beside it) is forgotten (:func:`forget_before_launch`): the parent then submits fresh, and
  persists the new driver id as it always does. An unguarded run (``on_store_unavailable=run``)
  forgets them too: it must never report a driver it did not start as its own;
* an id there at a launch that no intent covered (an unguarded run while the store was down, a
  task that ran as the provider's own operator before) may name a driver that still runs: the
  launch is refused while it does (:class:`UntrackedDriverError`), as the parent would not
  submit beside it either;
* the state store's id is read as one more source of the predecessor's id
  (:func:`predecessor_id`), used when the intent has none (the task died after the parent
  persisted the id and before the intent was amended with it). It is trusted only when the intent
  is this very task instance's: it was forgotten before that intent's launch, so what is there now
  was persisted by that launch.

Across runs (a cleared task, a backfill, another run of the date) the state store is empty or
another task instance's; the intent alone finds the predecessor, as without ``durable``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_jrs.store import Attempt
from airflow_jrs.store.intents import Intent, IntentStore

#: The fields that scope a task state store (Airflow's: dag, run, task, map index).
_SCOPE = ("dag_id", "task_id", "run_id", "map_index")


def state_store(context: Mapping[str, Any], durable: bool) -> Any:
    """The task's state store when the operator is durable and Airflow provides one (3.3+)."""
    return context.get("task_state_store") if durable else None


class UntrackedDriverError(RuntimeError):
    """The task state store names a live driver that no intent of the job covers."""


class StateStoreNotClearedError(RuntimeError):
    """What an earlier try left in the task state store could not be forgotten before a launch."""


def stored_id(store: Any, key: str) -> str | None:
    """The id the parent persisted (``None``: none, no store, or it cannot be read)."""
    if store is None:
        return None
    try:
        value = store.get(key)
    except Exception:
        return None
    return value if isinstance(value, str) and value else None


def untracked_driver_message(job_id: str, driver: str, live: list[str]) -> str:
    """What the task says when the state store's driver runs and no intent covers it."""
    return (
        f"job {job_id}: the task state store names driver {driver}, submitted by an earlier try of this task that "
        f"no intent of the job covers (an unguarded run while the store was down, or the provider's own "
        f"operator), and the cluster lists it as live: {', '.join(live)}. Nothing is submitted beside it. Wait "
        "for it to end (or kill it in the cluster), then retry the task."
    )


def forget_before_launch(store: Any, keys: Sequence[str]) -> None:
    """Drop what a previous try persisted under ``keys`` (its driver id, the status the parent
    cached for it), before this launch (and before its intent): the parent must submit fresh, never
    reattach to, or report as succeeded, a driver of another fence or of no fence at all."""
    if store is None:
        return
    for key in keys:
        try:
            store.delete(key)
        except Exception as exc:  # the intent stays the authority; a stale id only confuses the parent
            raise StateStoreNotClearedError(
                f"could not clear the task state store's {key!r} before submitting ({type(exc).__name__}: {exc}); "
                "with durable=True the Spark provider would reattach to a previous try's driver. Retry the task, "
                "or set durable=False (the job's intent still makes a retry wait for and adopt a running driver)."
            ) from exc


def predecessor_id(store: Any, key: str, stale: Intent, attempt: Attempt) -> str | None:
    """The driver id the state store holds for ``stale``'s launch, ``None`` unless ``stale`` is this
    task instance's (same dag, run, task and map index; any try) and the store holds a string."""
    if store is None:
        return None
    try:
        tried = IntentStore.read_spec(stale.spec_uri).get("attempt") or {}
    except Exception:  # a witness that cannot be read adds nothing; the intent decides
        return None
    if any(str(tried.get(k)) != str(getattr(attempt, k)) for k in _SCOPE):
        return None
    return stored_id(store, key)
