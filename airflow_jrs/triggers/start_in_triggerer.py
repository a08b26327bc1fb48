"""``start_in_triggerer``: triggers that end a committed job's task in the triggerer, without a worker slot.

Airflow 3.3 can *start* a task in the triggerer (``start_from_trigger`` with
``StartTriggerArgs``): the scheduler does not queue the task instance for a worker, it creates
the trigger row at once, and the triggerer builds the task's template context (from the
serialized DAG) and renders the trigger's template fields with it. The trigger then either

* ends the task there: it writes the XCom (``return_value``, as the worker would) through
  the triggerer's Execution API channel, then yields ``TaskSuccessEvent()`` (the triggerer
  writes the state; no worker, no executor slot). See :meth:`StartInTriggererTrigger._push_xcom`
  for why the XCom does not travel in the event in Airflow 3.3.2; or
* yields a plain :class:`TriggerEvent`, which schedules the task for a worker with
  ``next_method`` (our operators' ``execute_on_worker``), where the normal path runs unchanged.

The triggerer only ever ends a task when the job is done: a SUCCEEDED result for the same
fingerprint (:func:`~airflow_jrs.domain.decision.decide` says SKIP) for a submit task, or an already
clean entry for a cleanup task. Everything else goes to the worker: no result, a changed
fingerprint, a failed result, Redis down, a template it could not render, a cluster-mode
connection, and an entry the store refuses to read (corrupt: quarantined now; quarantined;
a newer schema), which the trigger reads through the same async store as every reader and
names, with its key, in the reason it hands the worker. The worker path then applies every rule of the
operators (lease, recovery, quarantine, fail closed), so this option can never do less than
the worker would; at worst it costs one store read.

What the trigger receives (plain, serializable kwargs set at DAG parse time; no secrets):
``jrs_conn_id`` and ``jrs_namespace`` (the connection is resolved in the triggerer through
Airflow's secrets chain and :class:`~airflow_jrs.hooks.jrs.JrsHook`, with the usual
precedence), and the operator's own template fields (``job_id``, ``application``,
``application_args``, ``job_version``; ``job_ids`` for cleanup), which Airflow renders per
task instance in the triggerer because they appear in ``start_trigger_args.trigger_kwargs``
*and* in the operator's ``template_fields`` (``BaseTrigger.task_instance`` setter). The
default job id needs the task instance's context (dag id, task id, data interval, map
index); the trigger keeps the context it was rendered with and calls
:func:`~airflow_jrs.domain.identity.job_id_for`, the worker's own rule.

Fingerprint: computed exactly as the worker does (application file content when
``application`` is a local file readable *by the triggerer*, else its path string). When the
triggerer cannot read the file, its fingerprint differs from the stored one and the task goes
to the worker, which decides with the file's content: a missing file costs a worker slot,
never a wrong skip. The one hazard is version skew: a triggerer with an *older* copy of the
application than the workers would skip a job that the new code would recompute. Deploy
application files to triggerers and workers together (or bump ``job_version``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from airflow.triggers.base import BaseTrigger, TaskSkippedEvent, TaskSuccessEvent, TriggerEvent

from airflow_jrs.domain import recompute, signals
from airflow_jrs.domain.identity import application_fingerprint, job_id_for
from airflow_jrs.domain.payload import DECIDED_IN_TRIGGERER, SKIPPED_RESULT_KEY, entry_payload, tasks_job_ids
from airflow_jrs.exceptions import CleanupError, JobResultEntryError, JrsConfigError
from airflow_jrs.observability.metrics import TRIGGERER_METRICS, task_of
from airflow_jrs.store import AsyncRedisJobResultStore, JobResultEntry, validate_job_id

#: Seconds to wait for one request through the triggerer's Execution API channel.
COMMS_TIMEOUT = 30.0
#: ``status`` of the plain event that hands the task to a worker.
TO_WORKER = "to_worker"


class _GoToWorker(Exception):
    """The triggerer cannot (or must not) decide; the reason goes to the worker's log."""


def _open_store(jrs_conn_id: str | None, jrs_namespace: str | None) -> AsyncRedisJobResultStore:
    """The async store for the connection, with the operators' precedence rules.

    Blocking (a connection lookup through Airflow's secrets chain): call it in a thread. The
    Redis provider's hook resolves the connection as it does for workers, so both paths meet
    the same server with the same credentials.
    """
    from airflow_jrs.hooks.jrs import JrsHook

    hook = JrsHook(jrs_conn_id, namespace=jrs_namespace)
    try:
        # the [jrs] client policy comes with the store: the same timeouts and retries as a worker's
        return hook.get_async_store(client_name=f"jrs-start-in-triggerer:{hook.namespace}")
    except JrsConfigError as exc:  # Redis Cluster, a Unix socket: the worker handles those
        raise _GoToWorker(str(exc)) from None
    finally:
        hook.close()


class _TriggererTaskInstance:
    """The task instance as templates see it in the triggerer: XCom pulls name one map index.

    ``ti.xcom_pull(task_ids=...)`` without ``map_indexes`` asks for every map index
    (``GetXComSequenceSlice``), a request Airflow 3.3.2's triggerer does not handle: the call
    never returns and the trigger hangs. Pulling the calling task's map index (``GetXCom``)
    gives the same value for unmapped upstream tasks; for mapped ones it differs, the
    fingerprint then differs from the stored one and the task goes to the worker.
    """

    def __init__(self, ti: Any) -> None:
        self._ti = ti

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ti, name)

    def xcom_pull(self, *args: Any, **kwargs: Any) -> Any:
        if "map_indexes" not in kwargs:
            index = getattr(self._ti, "map_index", -1)
            kwargs["map_indexes"] = -1 if index is None else index
        return self._ti.xcom_pull(*args, **kwargs)


def _triggerer_context(context: Any) -> Any:
    ti = context.get("ti") if hasattr(context, "get") else None
    if ti is None:
        return context
    wrapped = _TriggererTaskInstance(ti)
    return {**context, "ti": wrapped, "task_instance": wrapped}


class StartInTriggererTrigger(BaseTrigger):
    """Shared mechanics: keep the render context, resolve the store, one event, close the client."""

    def __init__(self, *, jrs_conn_id: str | None = None, jrs_namespace: str | None = None) -> None:
        super().__init__()
        self.jrs_conn_id = jrs_conn_id
        self.jrs_namespace = jrs_namespace
        self._context: Any = None
        self._render_error: str | None = None
        self._store: AsyncRedisJobResultStore | None = None

    def _kwargs(self) -> dict[str, Any]:
        return {"jrs_conn_id": self.jrs_conn_id, "jrs_namespace": self.jrs_namespace}

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__qualname__}", self._kwargs()

    def render_template_fields(self, context: Any, jinja_env: Any = None) -> None:
        """Render like the worker would (the DAG's Jinja environment); a failure goes to the worker.

        Airflow calls this in the triggerer before :meth:`run`, with the task instance's
        context; an exception here would fail the task, where the worker might have succeeded.
        """
        context = _triggerer_context(context)
        self._context = context
        try:
            if jinja_env is None and self.task is not None:
                try:
                    jinja_env = self.task.dag.get_template_env()  # type: ignore[union-attr]
                except Exception:
                    jinja_env = None
            super().render_template_fields(context, jinja_env)
        except Exception as exc:
            self._render_error = f"rendering the templates in the triggerer failed ({exc!r})"

    def _task_context(self) -> Any:
        if self._context is None and self.task_instance is not None:
            self._context = self.task_instance.get_template_context()  # type: ignore[attr-defined]
        if self._context is None:
            raise _GoToWorker("no task instance context in the triggerer")
        return self._context

    async def _open(self) -> AsyncRedisJobResultStore:
        self._store = await asyncio.wait_for(
            asyncio.to_thread(_open_store, self.jrs_conn_id, self.jrs_namespace), COMMS_TIMEOUT
        )
        return self._store

    async def _read(self, store: AsyncRedisJobResultStore, job_ids: list[str]) -> dict[str, JobResultEntry | None]:
        """Entries through the store's rules; an entry it refuses goes to the worker, named."""
        try:
            return await store.get_entries(job_ids)
        except JobResultEntryError as exc:
            self._count(exc)  # a read that met quarantine
            raise _GoToWorker(f"{type(exc).__name__}: {exc}") from None

    def _count(self, exc: BaseException) -> None:
        """A store error (by kind) or a read that met quarantine, in the triggerer's Airflow metrics."""
        dag_id, task_id = task_of(self.task_instance)
        TRIGGERER_METRICS.failed(exc, dag_id=dag_id, task_id=task_id)

    async def _close(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            try:
                await store.aclose()
            except Exception as exc:
                self.log.debug("Closing the Redis client failed: %s", exc)

    async def cleanup(self) -> None:
        await self._close()

    async def _push_xcom(self, key: str, value: Any) -> None:
        """Write the task's XCom through the triggerer's Execution API channel, like a worker does.

        Not through ``TaskSuccessEvent(xcoms=...)``: Airflow 3.3.2 stores those with
        ``XComModel.set(serialize=True)`` into a JSON column, i.e. encoded twice, and every
        reader (``xcom_pull``, templates) then gets a JSON *string* instead of the dict. The
        Execution API route stores it once (``serialize=False``), as for worker XComs.
        """
        from airflow.sdk.execution_time.xcom import XCom

        ti = self.task_instance
        if ti is None:
            raise _GoToWorker("no task instance in the triggerer to write the XCom for")
        map_index = getattr(ti, "map_index", -1)
        pushed = XCom.aset(
            key,
            value,
            dag_id=ti.dag_id,
            task_id=ti.task_id,
            run_id=ti.run_id,
            map_index=-1 if map_index is None else map_index,
        )
        await asyncio.wait_for(pushed, COMMS_TIMEOUT)

    async def _decide(self) -> TriggerEvent:
        raise NotImplementedError

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            if self._render_error:
                raise _GoToWorker(self._render_error)
            event = await self._decide()
        except Exception as exc:  # anything unexpected: the worker path decides, with all its rules
            self._count(exc)  # counted when the store failed
            reason = str(exc) if isinstance(exc, _GoToWorker) else f"the triggerer could not decide ({exc!r})"
            self.log.info("Started in the triggerer, handing the task to a worker: %s", reason)
            event = TriggerEvent({"status": TO_WORKER, "reason": reason})
        finally:
            await self._close()
        yield event


class StartInTriggererSubmitTrigger(StartInTriggererTrigger):
    """Start a JRS Spark submit task in the triggerer; end it there when its job is done.

    Attribute names match :class:`~airflow_jrs.operators.spark.JrsSparkSubmitOperator`'s
    template fields (``job_id``, ``application``, ``application_args``, ``job_version``) so
    that Airflow renders them per task instance in the triggerer.
    """

    def __init__(
        self,
        *,
        jrs_conn_id: str | None = None,
        jrs_namespace: str | None = None,
        job_id: str | None = None,
        application: str = "",
        application_args: Sequence[Any] | None = None,
        job_version: str | None = None,
        accept_changed_fingerprint: bool = False,
        skip_when_done: bool = False,
    ) -> None:
        super().__init__(jrs_conn_id=jrs_conn_id, jrs_namespace=jrs_namespace)
        self.job_id = job_id
        self.application = application
        self.application_args = list(application_args) if application_args is not None else None
        self.job_version = job_version
        self.accept_changed_fingerprint = accept_changed_fingerprint
        self.skip_when_done = skip_when_done

    def _kwargs(self) -> dict[str, Any]:
        return {
            **super()._kwargs(),
            "job_id": self.job_id,
            "application": self.application,
            "application_args": self.application_args,
            "job_version": self.job_version,
            "accept_changed_fingerprint": self.accept_changed_fingerprint,
            "skip_when_done": self.skip_when_done,
        }

    def _job_id(self) -> str:
        return job_id_for(self.job_id, self._task_context())

    async def _decide(self) -> TriggerEvent:
        job_id = self._job_id()  # the worker's own rules, for identity and fingerprint
        fp = await asyncio.to_thread(application_fingerprint, self.application, self.application_args, self.job_version)
        store = await self._open()
        entry = (await self._read(store, [job_id]))[job_id]
        try:  # the worker reads the run's conf the same way, and says what is wrong with it
            context = self._task_context()
            request = recompute.read_request(context)
        except JrsConfigError as exc:
            raise _GoToWorker(str(exc)) from None
        task_id = context["ti"].task_id
        first_seen = None
        if request is not None and request.names_job(task_id, job_id) and request.at is None:
            # Only read: a request not met yet goes to the worker, which records when it met it.
            first_seen = await store.recompute_seen(job_id, context["run_id"])
        choice = recompute.choose(
            entry, fp, accept_changed_fingerprint=self.accept_changed_fingerprint, request=request,
            task_id=task_id, first_seen=first_seen,
        )  # fmt: skip
        decision = choice.decision
        if not choice.reuse or decision.entry is None:
            raise _GoToWorker(f"job {job_id}: {choice.reason}")
        if decision.entry.summary:  # the return value is in its result document: the worker reads it
            raise _GoToWorker(f"job {job_id}: committed as a reference; its result document is read on the worker")
        payload = entry_payload(decision.entry, skipped=True, decided_in=DECIDED_IN_TRIGGERER)
        self.log.info(
            "%s (%s; decided in the triggerer, where the task ends)", recompute.describe_reuse(job_id, decision.entry),
            decision.reason,
        )  # fmt: skip
        await self._push_xcom(SKIPPED_RESULT_KEY if self.skip_when_done else "return_value", payload)
        # Counted once the task ends here; had the XCom failed, the worker would decide (and count).
        TRIGGERER_METRICS.decided(
            signals.SKIPPED, dag_id=context["ti"].dag_id, task_id=task_id, reused=decision.entry.result
        )
        return TaskSkippedEvent() if self.skip_when_done else TaskSuccessEvent()


class StartInTriggererCleanupTrigger(StartInTriggererTrigger):
    """Start a JRS cleanup task in the triggerer; end it there when every job is already clean.

    ``job_ids`` and ``submit_job_ids`` (template fields of
    :class:`~airflow_jrs.operators.cleanup.JrsCleanupOperator`) are rendered by Airflow; the job
    ids of ``job_tasks`` are derived from ``submit_job_ids`` when it names them (the operator's
    rule), else read from their XComs through the triggerer's Execution API channel.
    """

    def __init__(
        self,
        *,
        jrs_conn_id: str | None = None,
        jrs_namespace: str | None = None,
        job_ids: Sequence[str] = (),
        job_tasks: Sequence[str] = (),
        submit_job_ids: dict[str, str | None] | None = None,
        do_xcom_push: bool = True,
    ) -> None:
        super().__init__(jrs_conn_id=jrs_conn_id, jrs_namespace=jrs_namespace)
        self.job_ids = list(job_ids)
        self.job_tasks = list(job_tasks)
        # The defaults are what a trigger serialized by an earlier version did: pull, and push.
        self.submit_job_ids = dict(submit_job_ids or {})
        self.do_xcom_push = do_xcom_push

    def _kwargs(self) -> dict[str, Any]:
        return {
            **super()._kwargs(),
            "job_ids": list(self.job_ids),
            "job_tasks": list(self.job_tasks),
            "submit_job_ids": dict(self.submit_job_ids),
            "do_xcom_push": self.do_xcom_push,
        }

    async def _all_job_ids(self) -> list[str]:
        ids = [validate_job_id(j) for j in self.job_ids]
        if not self.job_tasks:
            return ids
        ti = self.task_instance
        if ti is None:
            raise _GoToWorker("no task instance in the triggerer to read the submit tasks' XComs")
        pull = _TriggererTaskInstance(ti).xcom_pull  # tasks_job_ids: the worker's own rule
        context = self._task_context()
        pulled = asyncio.to_thread(tasks_job_ids, context, pull, self.job_tasks, self.submit_job_ids)
        # Up to two XCom reads per task not derived, each through the triggerer's Execution API channel.
        try:
            submitted = await asyncio.wait_for(pulled, 2 * COMMS_TIMEOUT * len(self.job_tasks))
        except CleanupError as exc:
            raise _GoToWorker(str(exc)) from None
        return ids + [validate_job_id(j) for j in submitted]

    async def _decide(self) -> TriggerEvent:
        job_ids = await self._all_job_ids()
        store = await self._open()
        entries = await self._read(store, job_ids)
        committed: list[Any] = []
        for job_id in job_ids:
            entry = entries[job_id]
            if entry is None or not entry.is_clean:
                state = "no result" if entry is None else entry.state.value
                raise _GoToWorker(f"job {job_id} needs cleanup ({state})")
            if entry.summary and self.do_xcom_push:
                raise _GoToWorker(f"job {job_id}: committed as a reference; its result document is read on the worker")
            committed.append(entry_payload(entry))
        self.log.info("Jobs %s are already clean; started in the triggerer, the task ends there.", job_ids)
        if self.do_xcom_push:  # the operator's own setting (off by default: the store says it)
            await self._push_xcom("return_value", committed)
        return TaskSuccessEvent()
