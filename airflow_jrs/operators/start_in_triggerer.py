"""``start_in_triggerer``: a committed job ends its task in the triggerer, with no worker slot.

With ``start_in_triggerer=True`` the task starts in the triggerer (Airflow 3.3's
``start_from_trigger``): :class:`~airflow_jrs.triggers.start_in_triggerer.StartInTriggererSubmitTrigger`
reads the job's entry and, when the job is done (same rule as the worker:
:func:`~airflow_jrs.domain.decision.decide`), ends the task there with the stored result as its XCom
(``return_value``; ``jrs_result`` and a skip with ``skip_when_done``), written through the
Execution API before the trigger yields ``TaskSuccessEvent`` (see the trigger module). Otherwise the task goes
to a worker (``next_method="execute_on_worker"``) and runs exactly as without the option.
The cleanup operator gets the same option: an already clean job ends in the triggerer.

When to use it: backfills, clears and re-runs over mostly committed dates when worker slots
are the bottleneck: busy with long Spark jobs, or slow to start (Celery queues, a Kubernetes
pod per task). On free, cheap slots (an idle LocalExecutor) it is slower per task: Airflow
3.3.2's triggerer paces each task with two one-second loops, about 2.5 s from deferral to
success (``docs/benchmarks.md``, "Backfills on a real scheduler"). It needs a
running triggerer (``airflow triggerer``; ``airflow standalone`` starts one): without one,
the tasks stay *deferred*. Templates are rendered in the triggerer (its Jinja context is the
task's; a template that fails there sends the task to the worker, which renders it again).
The application file should be readable by the triggerer too (see
:mod:`airflow_jrs.triggers.start_in_triggerer` on fingerprints); if it is not, committed jobs still
skip Spark, on a worker. Mapped tasks (``expand``) are not supported: use the plain operators.

Folding into the operators (what :class:`StartInTriggererSubmitMixin` does, in three steps):

1. ``__init__`` takes ``start_in_triggerer: bool = False``; when true it sets
   ``self.start_from_trigger = True`` and ``self.start_trigger_args`` from
   :meth:`StartInTriggererSubmitMixin._trigger_kwargs` (raw template strings; Airflow renders them in
   the triggerer);
2. add ``execute_on_worker(self, context, event=None)``: log the trigger's reason, then
   ``return self.execute(context)``;
3. nothing else changes: ``execute`` is the worker path.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import StartTriggerArgs

from airflow_jrs.compat import needs_airflow_3_3
from airflow_jrs.operators.cleanup import JrsCleanupOperator
from airflow_jrs.operators.spark import JrsSparkSubmitOperator
from airflow_jrs.triggers.start_in_triggerer import StartInTriggererCleanupTrigger, StartInTriggererSubmitTrigger

NEXT_METHOD = "execute_on_worker"
_SUBMIT_TRIGGER = f"{StartInTriggererSubmitTrigger.__module__}.{StartInTriggererSubmitTrigger.__qualname__}"
_CLEANUP_TRIGGER = f"{StartInTriggererCleanupTrigger.__module__}.{StartInTriggererCleanupTrigger.__qualname__}"

if TYPE_CHECKING:  # the mixins are plain classes at run time, operators for the type checker
    from airflow.sdk import BaseOperator as _OperatorBase

    _SubmitBase = JrsSparkSubmitOperator
    _CleanupBase = JrsCleanupOperator
else:
    _OperatorBase = _SubmitBase = _CleanupBase = object


class StartInTriggererMixin(_OperatorBase):
    """Common part: set ``start_from_trigger``/``start_trigger_args``, resume on a worker."""

    _trigger_classpath: str = ""

    def __init__(self, *, start_in_triggerer: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._setup_start_in_triggerer(start_in_triggerer)

    def _trigger_kwargs(self) -> dict[str, Any]:
        raise NotImplementedError

    def _setup_start_in_triggerer(self, start_in_triggerer: bool) -> None:
        self.start_in_triggerer = start_in_triggerer
        self._triggerer_refused: str | None = None
        if not start_in_triggerer:
            return
        # Airflow 3.1 and 3.2 ignore start_from_trigger: the task would silently take a worker
        # slot. It still runs correctly there (the worker path is the full one), so warn, naming
        # the version, rather than fail the DAG: the same file works again after the upgrade.
        refused = needs_airflow_3_3("start_in_triggerer=True")
        if refused is not None:
            self._triggerer_refused = f"{refused}; task {self.task_id!r} runs on a worker instead"
            warnings.warn(self._triggerer_refused, UserWarning, stacklevel=4)
            return
        self.start_from_trigger = True
        self.start_trigger_args = StartTriggerArgs(
            trigger_cls=self._trigger_classpath,
            trigger_kwargs=self._trigger_kwargs(),
            next_method=NEXT_METHOD,
            next_kwargs=None,
            timeout=None,
        )

    def execute(self, context: Any, **kwargs: Any) -> Any:
        # **kwargs: Airflow's ExecutorSafeguard may pass its sentinel to the outermost execute.
        if getattr(self, "_triggerer_refused", None):
            self.log.warning("%s", self._triggerer_refused)
        return super().execute(context, **kwargs)

    def execute_on_worker(self, context: Any, event: Any = None) -> Any:
        """The trigger could not end the task: run the normal path (``execute``) on this worker."""
        reason = event.get("reason") if isinstance(event, dict) else event
        self.log.info("Started in the triggerer, continuing on a worker: %s", reason)
        return self.execute(context)


class StartInTriggererSubmitMixin(StartInTriggererMixin, _SubmitBase):
    """Adds ``start_in_triggerer`` to :class:`~airflow_jrs.operators.spark.JrsSparkSubmitOperator`."""

    _trigger_classpath = _SUBMIT_TRIGGER

    def _trigger_kwargs(self) -> dict[str, Any]:
        # Template fields are passed unrendered; the triggerer renders the ones that are also
        # operator template fields (job_id, application, application_args, job_version).
        return {
            "jrs_conn_id": self.jrs_conn_id,
            "jrs_namespace": self.jrs_namespace,
            "job_id": self.job_id,
            "application": self.application,
            "application_args": list(self.application_args) if self.application_args is not None else None,
            "job_version": self.job_version,
            "accept_changed_fingerprint": self.accept_changed_fingerprint,
            "skip_when_done": self.skip_when_done,
        }


class JrsStartInTriggererSparkSubmitOperator(StartInTriggererSubmitMixin, JrsSparkSubmitOperator):
    """:class:`JrsSparkSubmitOperator` that starts in the triggerer (``start_in_triggerer=True``).

    :param start_in_triggerer: start in the triggerer and end the task there when its job is
        done (no worker slot); ``False`` behaves exactly as :class:`JrsSparkSubmitOperator`
    """

    # Airflow's operator metaclass wraps a class's own ``__init__`` only (defaults, XComArg
    # dependencies): a class that merely inherits the mixin's ``__init__`` would skip that.
    def __init__(self, *, start_in_triggerer: bool = True, **kwargs: Any) -> None:
        super().__init__(start_in_triggerer=start_in_triggerer, **kwargs)


class StartInTriggererCleanupMixin(StartInTriggererMixin, _CleanupBase):
    """Adds ``start_in_triggerer`` to :class:`~airflow_jrs.operators.cleanup.JrsCleanupOperator`."""

    _trigger_classpath = _CLEANUP_TRIGGER

    def _trigger_kwargs(self) -> dict[str, Any]:
        return {
            "jrs_conn_id": self.jrs_conn_id,
            "jrs_namespace": self.jrs_namespace,
            "job_ids": list(self.job_ids),
            "job_tasks": list(self.job_tasks),
            "submit_job_ids": dict(self.submit_job_ids),
            "do_xcom_push": bool(self.do_xcom_push),
        }


class JrsStartInTriggererCleanupOperator(StartInTriggererCleanupMixin, JrsCleanupOperator):
    """:class:`JrsCleanupOperator` that starts in the triggerer (``start_in_triggerer=True``).

    :param start_in_triggerer: start in the triggerer and end the task there when every job is
        already clean (no worker slot); ``False`` behaves exactly as :class:`JrsCleanupOperator`
    """

    def __init__(self, *, start_in_triggerer: bool = True, **kwargs: Any) -> None:
        super().__init__(start_in_triggerer=start_in_triggerer, **kwargs)
