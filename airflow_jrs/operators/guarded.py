"""What every guarded operator does around the protocol: its inputs from the task, its outcome to Airflow.

The spark-submit, PySpark and Spark SQL operators differ only in their launcher, their
fingerprint and what they do when the store is down. Everything else (the job's parameters,
:class:`GuardedJob`; the store's failures around ``execute``, :func:`execute_with_store`; the
attempt itself, :func:`run_job`) a task needs from :class:`airflow_jrs.protocol.JobAttempt` is here,
once: the attempt and policy from the task's context, the protocol's errors mapped to Airflow's
failures (with or without retries), and the task's return value (the same payload shape for a
computed, adopted or reused result, so downstream tasks and the UI read one shape; the cleanup
needs none of it: it derives the job id and reads the store).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from airflow.providers.common.compat.sdk import (
    AirflowException,
    AirflowFailException,
    AirflowSkipException,
    AirflowTaskTimeout,
)

from airflow_jrs.compat import AirflowTaskTerminated
from airflow_jrs.domain import recompute
from airflow_jrs.domain.payload import SKIPPED_RESULT_KEY, entry_payload, result_payload
from airflow_jrs.exceptions import (
    ApplicationFailedError,
    DriverMayStillRunError,
    JobEndedOnRequestError,
    JobNotStartedError,
    JrsConfigError,
    StoreUnavailableError,
)
from airflow_jrs.hooks.jrs import JrsHook
from airflow_jrs.hooks.store_failures import airflow_failures
from airflow_jrs.operators.job_params import JOB_PARAM_NAMES, job_param_docs
from airflow_jrs.protocol import ADOPTED, SKIPPED, AttemptPolicy, JobAttempt, JobNamespace, JobSpec, Launcher, Outcome
from airflow_jrs.protocol.guarded_task import FACTS_ATTR, plan_facts
from airflow_jrs.protocol.recovery import PREDECESSOR_POLICIES
from airflow_jrs.store import Attempt, EntryState
from airflow_jrs.store.redis.durability import NOT_DURABLE


class GuardedJob:
    """The job's parameters on a guarded operator, as :data:`~.job_params.JOB_PARAMS` defines them
    (names, annotations, defaults, docs); the operators still name them in their own signatures,
    since Airflow applies ``default_args`` only to what an ``__init__`` names."""

    job_id: str | None
    job_version: str | None
    outputs: dict[str, str] | None
    skip_when_done: bool
    jrs_conn_id: str | None
    jrs_namespace: str | None
    lease_ttl: float | None
    lease_wait_timeout: float
    accept_changed_fingerprint: bool
    output_root: str | None
    predecessor: str
    _attempt: JobAttempt | None
    _kill_pending: bool

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Each guarded operator class (a user's subclass too) serializes :data:`FACTS_ATTR`: the
        dag-processor computes the plan's facts where DAG code runs, so Airflow's API server can
        plan from the serialized DAG without importing the DAG file (Airflow's own pattern:
        ``BaseSensorOperator.get_serialized_fields``). A mixin's override would sit behind
        ``BaseOperator``'s in the MRO, hence set on each class."""
        super().__init_subclass__(**kwargs)
        inherited = cls.get_serialized_fields  # type: ignore[attr-defined]

        def get_serialized_fields(klass: type) -> frozenset[str]:
            return frozenset(inherited()) | {FACTS_ATTR}

        cls.get_serialized_fields = classmethod(get_serialized_fields)  # type: ignore[attr-defined,assignment]
        own_doc = cls.__dict__.get("__doc__")
        if own_doc and cls.__module__.startswith("airflow_jrs."):  # help() and IDEs show every job parameter
            own = {name for name in JOB_PARAM_NAMES if f":param {name}:" in own_doc}
            cls.__doc__ = f"{own_doc.rstrip()}\n\n{job_param_docs(own)}\n"

    @property
    def jrs_plan_facts(self) -> str:
        """:func:`~airflow_jrs.protocol.guarded_task.plan_facts`, read when Airflow serializes the task."""
        return plan_facts(self)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Airflow's openlineage provider asks after a success and after a skip: the job's outputs,
        computed now or reused, and who computed them (:mod:`airflow_jrs.observability.lineage`)."""
        from airflow_jrs.observability.lineage import operator_lineage

        return operator_lineage(remembered_payload(self, task_instance))

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        """A failed try published nothing: no output datasets (not the last success's)."""
        from airflow_jrs.observability.lineage import operator_lineage

        return operator_lineage(None)

    def _take_job_params(self, params: Mapping[str, Any]) -> None:
        """Check and keep the job's parameters from ``params`` (the ``__init__``'s ``locals()``)."""
        predecessor = params["predecessor"]
        if predecessor not in PREDECESSOR_POLICIES:
            raise JrsConfigError(
                f"{getattr(self, 'task_id', '?')}: predecessor must be one of {list(PREDECESSOR_POLICIES)}, "
                f"got {predecessor!r}"
            )
        for name in JOB_PARAM_NAMES:
            setattr(self, name, params[name])
        self._attempt = None
        self._kill_pending = False


def jrs_hook(op: Any) -> JrsHook:
    """The store's hook from ``op``'s job parameters."""
    return JrsHook(op.jrs_conn_id, namespace=op.jrs_namespace, lease_ttl=op.lease_ttl, output_root=op.output_root)


def execute_with_store(
    op: Any,
    context: Any,
    *,
    run_unguarded: Callable[[JrsHook, StoreUnavailableError], dict[str, Any]] | None = None,
    unsupported_by: str = "",
) -> dict[str, Any]:
    """``execute``: ``op._execute_guarded(context, hook)`` with the store's failures as Airflow's.

    A store that is down before the lease runs the job without it when ``[jrs]
    on_store_unavailable = run`` and ``run_unguarded`` is given; otherwise (from the lease on, the
    attempt always fails closed) it fails, and an operator that cannot run unguarded
    (``unsupported_by``: its name, as logged) says so. A lease ``durability`` could not confirm is
    no store that is down: the store answered and refused, and the task fails closed whatever
    ``on_store_unavailable`` says (a failover could hand the lease to a second attempt)."""
    hook = jrs_hook(op)
    op._attempt = None
    op._kill_pending = False
    # This try runs here: its links read what it returns, or nothing if it fails (never XCom,
    # where a failed try has no payload and Airflow 3.2 warns "No XCom value found").
    remember_payload(op, context, {})
    try:
        with airflow_failures(hook):  # one clear line; no retries for what needs a person
            result: dict[str, Any] = op._execute_guarded(context, hook)
            return result
    except StoreUnavailableError as exc:
        if (op._attempt is not None and op._attempt.guarded) or hook.settings.on_store_unavailable != "run":
            raise
        if exc.kind == NOT_DURABLE:
            op.log.error(
                "[jrs] on_store_unavailable=run does not apply: the store answered, but could not make the "
                "job's lease durable as [jrs] durability asks. Starting nothing (Airflow retries)."
            )
            raise
        if run_unguarded is not None:
            return remember_payload(op, context, run_unguarded(hook, exc))
        op.log.error(
            "[jrs] on_store_unavailable=run is not supported by %s: failing closed (Airflow retries). "
            "Use JrsSparkSubmitOperator for jobs that must run without the store.",
            unsupported_by,
        )
        raise


def run_job(
    op: Any, context: Mapping[str, Any], jobs: JobNamespace, spec: JobSpec, launcher: Launcher
) -> dict[str, Any]:
    """Run ``spec`` as this task's attempt on ``jobs`` (the hook's :meth:`~JrsHook.jobs`, the one
    the launcher was given too: one client per attempt) with ``launcher``; the task's return value."""
    attempt = JobAttempt(
        jobs, spec, attempt_from_context(context), launcher, policy=policy_for(op, context), log=op.log
    )
    attempt.interrupts = (AirflowTaskTimeout, AirflowTaskTerminated)
    return task_payload(op, context, run_attempt(op, attempt))


def attempt_from_context(context: Mapping[str, Any]) -> Attempt:
    """The Airflow task attempt, for the on-call engineer (recorded in the lease and the result)."""
    ti = context["ti"]
    map_index = getattr(ti, "map_index", -1)
    return Attempt(
        dag_id=ti.dag_id,
        task_id=ti.task_id,
        run_id=context["run_id"],
        try_number=int(getattr(ti, "try_number", 0) or 0),
        map_index=int(map_index if map_index is not None else -1),
    )


def last_try(op: Any, context: Mapping[str, Any]) -> bool:
    """Is this the task's last try (a failure is then recorded FAILED, sensors fail fast)?"""
    return int(getattr(context["ti"], "try_number", 1) or 1) > int(op.retries or 0)


def policy_for(op: Any, context: Mapping[str, Any]) -> AttemptPolicy:
    """The attempt's policy from the operator's arguments and the run's conf."""
    return AttemptPolicy(
        accept_changed_fingerprint=op.accept_changed_fingerprint,
        lease_wait_timeout=op.lease_wait_timeout,
        predecessor=op.predecessor,
        last_try=last_try(op, context),
        retries=int(op.retries or 0),
        recompute=recompute.read_request(context),
    )


def run_attempt(op: Any, attempt: JobAttempt) -> Outcome:
    """Run it as ``op``'s attempt; the protocol's outcomes that are not results become Airflow
    failures. A kill that came while the task was still preparing the attempt (its fingerprint,
    its arguments) is applied first: ``execute`` may carry on after ``on_kill`` (apache/airflow#73006),
    and a killed task must not take the lease and launch."""
    op._attempt = attempt
    if getattr(op, "_kill_pending", False):
        attempt.kill()
    try:
        return attempt.run()
    except JobEndedOnRequestError as exc:  # someone asked: a retry would undo it
        raise AirflowFailException(str(exc)) from None
    except (JobNotStartedError, DriverMayStillRunError, ApplicationFailedError) as exc:
        raise AirflowException(str(exc)) from exc.__cause__


def kill_attempt(op: Any) -> bool:
    """``on_kill``: kill ``op``'s attempt; ``True`` when it held the job's lease (what it launched is
    then its launcher's to kill). ``False`` when there is none yet (the kill is kept for
    :func:`run_attempt`) or it never held the lease: an unguarded run may have started Spark
    (``on_store_unavailable=run``), which the operator kills itself. Never raises: it runs in a
    signal handler."""
    op._kill_pending = True
    attempt = getattr(op, "_attempt", None)
    if attempt is None:
        return False
    attempt.kill()
    return bool(attempt.guarded)


def task_payload(op: Any, context: Mapping[str, Any], outcome: Outcome) -> dict[str, Any]:
    """The task's return value; a reused result raises ``AirflowSkipException`` with ``skip_when_done``.

    The reuse line (which run computed it, how to recompute) is logged once, by the attempt
    (:meth:`~airflow_jrs.protocol.attempt.JobAttempt.run`), into the task log it was handed.
    The payload is also kept on the operator for its extra links (:func:`remember_payload`)."""
    if outcome.kind == SKIPPED and outcome.entry is not None:
        entry = outcome.entry
        payload = remember_payload(op, context, entry_payload(entry, skipped=True))
        if op.skip_when_done:
            context["ti"].xcom_push(key=SKIPPED_RESULT_KEY, value=payload)
            raise AirflowSkipException(f"job {outcome.job_id} already has a SUCCEEDED result ({entry.state.value})")
        return payload
    # the fence that wrote it, as the store has it (lineage and the UI name it beside the outputs)
    written = outcome.result if outcome.fence is None else outcome.result.with_fence(outcome.fence)
    if outcome.kind == ADOPTED:
        adopted = result_payload(written, EntryState.DIRTY, skipped=False, adopted_from=outcome.adopted_from)
        return remember_payload(op, context, adopted)
    return remember_payload(op, context, result_payload(written, EntryState.DIRTY, skipped=False))


#: The attribute of an operator that holds its last payload, keyed by the task instance it is for.
PAYLOAD_ATTR = "_jrs_payload"


def ti_identity(ti: Any) -> tuple[Any, ...]:
    """A task instance's identity (try included): a payload kept for one try is never read for another."""
    return tuple(getattr(ti, name, None) for name in ("dag_id", "task_id", "run_id", "map_index", "try_number"))


def remember_payload(op: Any, context: Mapping[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """Keep ``payload`` on ``op`` for this task instance: Airflow computes the extra links in the
    same process right after ``execute`` (``finalize``), and reading the payload back from XCom
    there would cost one Execution API call per link (:mod:`airflow_jrs.operators.links`)."""
    setattr(op, PAYLOAD_ATTR, (ti_identity(context["ti"]), payload))
    return payload


def remembered_payload(op: Any, ti: Any) -> dict[str, Any] | None:
    """What :func:`remember_payload` kept on ``op`` for ``ti`` (``{}``: this try ran here and
    returned nothing); ``None`` when it kept nothing for this task instance."""
    kept = getattr(op, PAYLOAD_ATTR, None)
    if isinstance(kept, tuple) and len(kept) == 2 and kept[0] == ti_identity(ti):
        return dict(kept[1])
    return None
