"""JobResultSensor: wait until jobs have results, from another task, DAG or deployment.

A downstream task that needs a job's outputs should not guess whether the job ran: the job
result store knows. The sensor reads the job's entry and is done when :func:`evaluate`
accepts it (by default: a SUCCEEDED result, dirty or clean). An unsuccessful result ends the
wait at once instead of at ``timeout`` (``fail_on_unsuccessful``), because no amount of
waiting turns a FAILED result into a success; only a new attempt of the job does.

Three ways to wait, one rule (:func:`~airflow_jrs.domain.wait.evaluate`):

* ``mode="poke"``: read every ``poke_interval`` while holding a worker slot;
* ``mode="reschedule"``: read, give the slot back, come back after ``poke_interval``;
* ``deferrable=True``: read once; if not done, hand the wait to
  :class:`~airflow_jrs.triggers.job_result.JobResultTrigger`, which wakes on the store's
  notifications within milliseconds and holds no worker slot.

Unreadable entries fail the sensor with the store's own error (the entry is quarantined and
the message says how to release it): the sensor never treats what it cannot read as absent.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from datetime import timedelta
from typing import Any

from airflow.providers.common.compat.sdk import (
    AirflowFailException,
    AirflowSensorTimeout,
    AirflowSkipException,
    BaseSensorOperator,
    PokeReturnValue,
    conf,
)

from airflow_jrs.domain.payload import entry_payload
from airflow_jrs.domain.wait import DEFAULT_STATUSES, WaitOutcome, evaluate, validate_wait_args
from airflow_jrs.exceptions import JrsConfigError, JrsError
from airflow_jrs.hooks.jrs import JrsHook
from airflow_jrs.hooks.store_failures import airflow_failures
from airflow_jrs.store import JobResultEntry, validate_job_id
from airflow_jrs.triggers.job_result import JobResultTrigger

#: Error events (the triggerer could not read the store) before the sensor gives up and lets
#: Airflow retry: a triggerer that cannot reach Redis must not bounce the task forever.
MAX_TRIGGER_ERRORS = 3


class JobResultSensor(BaseSensorOperator):
    """Wait until every job in ``job_ids`` has a result in ``target_state``; return the results.

    :param job_ids: one job id or a list (templated)
    :param target_state: ``"any"`` (default: written, dirty or clean), ``"dirty"`` (written,
        cleanup pending; a clean entry does not match) or ``"clean"`` (committed by cleanup)
    :param statuses: result statuses that count; default ``["SUCCEEDED"]``
    :param fail_on_unsuccessful: fail at once on a FAILED/CANCELED/STOPPED result not in
        ``statuses`` (default); ``False`` waits for a later attempt to supersede it
    :param jrs_conn_id: the job result store connection (default ``[jrs] conn_id``)
    :param jrs_namespace: overrides the connection's/config's namespace
    :param deferrable: wait in the triggerer (default ``[operators] default_deferrable``)
    :param trigger_poll_interval: seconds between the trigger's safety re-reads when no
        notification arrives (lost messages); wake-ups on notifications are immediate

    Returns (XCom ``return_value``) a list of result dicts in ``job_ids`` order, each the
    stored result (``job_id``, ``status``, ``outputs``, ``metrics``, ...) plus ``state``.
    With ``soft_fail=True`` a timeout or an unsuccessful result skips the task instead.
    """

    template_fields: Sequence[str] = ("job_ids",)
    ui_color = "#d4e8c5"

    def __init__(
        self,
        *,
        job_ids: str | Sequence[str],
        target_state: str = "any",
        statuses: Collection[str] = DEFAULT_STATUSES,
        fail_on_unsuccessful: bool = True,
        jrs_conn_id: str | None = None,
        jrs_namespace: str | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        trigger_poll_interval: float = 60.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.job_ids = [job_ids] if isinstance(job_ids, str) else list(job_ids)
        if not self.job_ids:
            raise JrsConfigError(f"{self.task_id}: job_ids is empty; name the job(s) to wait for")
        self.statuses = validate_wait_args(target_state, statuses)
        self.target_state = target_state
        self.fail_on_unsuccessful = fail_on_unsuccessful
        self.jrs_conn_id = jrs_conn_id
        self.jrs_namespace = jrs_namespace
        self.deferrable = deferrable
        if trigger_poll_interval <= 0:
            raise JrsConfigError(f"{self.task_id}: trigger_poll_interval must be > 0, got {trigger_poll_interval}")
        self.trigger_poll_interval = trigger_poll_interval
        self._hook: JrsHook | None = None

    @property
    def hook(self) -> JrsHook:
        if self._hook is None:
            self._hook = JrsHook(self.jrs_conn_id, namespace=self.jrs_namespace)
        return self._hook

    def _rendered_job_ids(self) -> list[str]:
        """Job ids after templating (a string is one id), validated before any key is built."""
        ids = [self.job_ids] if isinstance(self.job_ids, str) else list(self.job_ids)
        if not ids:
            raise JrsConfigError(f"{self.task_id}: job_ids rendered to an empty list; nothing to wait for")
        return [validate_job_id(j) for j in ids]

    def _outcome(self) -> WaitOutcome:
        """Read every job's entry through the store (which raises on corrupt/quarantined entries).

        Store failures become one clear line: retryable ones stay task failures Airflow retries,
        the rest fail the task at once (:func:`~airflow_jrs.hooks.store_failures.airflow_failures`)."""
        with airflow_failures(self.hook):
            store = self.hook.get_store()
            job_ids = self._rendered_job_ids()
            # a clean reference's full result (the sensor's return value) is in its result document
            entries: dict[str, JobResultEntry | None] = {j: store.get_full_entry(j) for j in job_ids}
        return evaluate(
            job_ids,
            entries,
            namespace=store.namespace,
            target_state=self.target_state,
            statuses=self.statuses,
            fail_on_unsuccessful=self.fail_on_unsuccessful,
        )

    def _full_results(self, results: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        """The trigger's results, with the full payload of each summary (a clean reference: the
        triggerer does not read result documents, the worker does). A missing document fails
        the task with the error that names it and the fix. ``None`` when a job's entry is no
        longer the one the trigger saw (forgotten, recomputed meanwhile): its document is not
        the result waited for, and another entry's is not either; the caller checks again."""
        if not any(r.get("summary") for r in results):
            return results
        with airflow_failures(self.hook):
            store = self.hook.get_store()
            full = []
            for r in results:
                if not r.get("summary"):
                    full.append(r)
                    continue
                entry = store.get_entry(r["job_id"])
                if entry is None or not entry.summary or entry.result.fence != r.get("fence"):
                    self.log.info("Job %s changed since the trigger saw it; checking again", r["job_id"])
                    return None
                full.append(entry_payload(store.full_entry(entry)))
        return full

    def _fail(self, message: str) -> None:
        """Fail without retries (waiting longer cannot help), or skip under ``soft_fail``/``never_fail``."""
        if self.soft_fail or self.never_fail:
            raise AirflowSkipException(f"{message} (skipped: soft_fail/never_fail is set)")
        raise AirflowFailException(message)

    def poke(self, context: Any) -> PokeReturnValue:
        outcome = self._outcome()
        if outcome.failure is not None:
            self._fail(outcome.failure)
        if outcome.done:
            self.log.info("Job results ready: %s", [r["job_id"] for r in outcome.results])
            return PokeReturnValue(is_done=True, xcom_value=outcome.results)
        self.log.info("Waiting in namespace %r: %s", self.hook.namespace, outcome.describe_wait())
        return PokeReturnValue(is_done=False)

    def execute(self, context: Any) -> Any:
        if not self.deferrable:
            return super().execute(context)
        return self._check_or_defer()

    def _check_or_defer(self, deadline: float | None = None, errors: int = 0) -> Any:
        """Return the results if they are there, else defer until ``deadline`` (epoch seconds).

        The deadline is fixed at the first deferral and carried through every re-deferral, so
        bouncing between triggerer and worker never restarts ``timeout``."""
        outcome = self._outcome()  # a result that is already there needs no triggerer round trip
        if outcome.failure is not None:
            self._fail(outcome.failure)
        if outcome.done:
            return outcome.results
        if deadline is None:
            deadline = time.time() + self.timeout
        remaining = deadline - time.time()
        if remaining <= 0:
            message = f"{self.task_id}: timed out after {self.timeout} s: {outcome.describe_wait()}"
            if self.soft_fail or self.never_fail:
                raise AirflowSkipException(message)
            raise AirflowSensorTimeout(message)
        self.log.info("Deferring in namespace %r: %s", self.hook.namespace, outcome.describe_wait())
        self.defer(
            trigger=JobResultTrigger(
                connection=self.hook.async_connection_kwargs(),
                namespace=self.hook.namespace,
                job_ids=self._rendered_job_ids(),
                target_state=self.target_state,
                statuses=self.statuses,
                fail_on_unsuccessful=self.fail_on_unsuccessful,
                poll_interval=self.trigger_poll_interval,
                client_policy=self.hook.client_policy(),
            ),
            method_name="execute_complete",
            kwargs={"deadline": deadline, "errors": errors},
            timeout=timedelta(seconds=remaining),
        )

    def execute_complete(
        self, context: Any, event: dict[str, Any] | None = None, deadline: float | None = None, errors: int = 0
    ) -> Any:
        """Resume after the trigger's one event (timeouts arrive as AirflowSensorTimeout instead)."""
        status = (event or {}).get("status")
        if status == "success":
            full = self._full_results(event["results"])  # type: ignore[index]
            return full if full is not None else self._check_or_defer(deadline, errors)
        if status == "failed":
            self._fail(event["message"])  # type: ignore[index]
        if status == "error":
            # The trigger does not interpret unreadable entries: read through the store, which
            # quarantines a corrupt entry and raises its own error naming the fix (fail closed).
            self.log.warning("The trigger could not read the store: %s", event["message"])  # type: ignore[index]
            if errors + 1 >= MAX_TRIGGER_ERRORS:
                raise JrsError(
                    f"{self.task_id}: the triggerer failed {errors + 1} times in a row to read the job "
                    f"result store (last: {event['message']}) while this worker reads it fine: check "  # type: ignore[index]
                    "the triggerer's network access and credentials for the jrs connection, or use "
                    "deferrable=False."
                )
            return self._check_or_defer(deadline, errors + 1)
        raise JrsError(
            f"{self.task_id}: unexpected event from JobResultTrigger: {event!r}. This is a bug in "
            "airflow-jrs (or a version mismatch between worker and triggerer): clear the task to retry."
        )
