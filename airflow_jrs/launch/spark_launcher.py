"""spark-submit as the protocol's launcher: the Spark provider's operator does the launching.

:class:`SparkSubmitLauncher` is what :class:`~airflow_jrs.operators.spark.JrsSparkSubmitOperator`
hands to the Airflow-free protocol (:class:`airflow_jrs.protocol.JobAttempt`); what it needs of
the task is :class:`SubmitTask`. Each launch is a value, :class:`~.submission.SubmitPlan` (this
fence's conf, arguments, application name, deploy mode, supervisor, output tail), which the
provider adapter runs through the provider's own ``SparkSubmitOperator.execute`` on a copy of
the task's operator (:func:`.provider_adapter.run_submit`): nothing of a launch is written onto
the task's operator. It answers from the deploy
mode (:mod:`.deploy_modes`, resolved from the connection and the operator's arguments by
:mod:`.deploy_modes.registry`): where a predecessor's application may live, what spark-submit reported,
whether a cluster driver outlived its client (:mod:`.cluster_outcome`). A stream is this launch
wrapped in :class:`~.streaming.StreamingLauncher` (its folders' conf reaches it as
:attr:`SparkSubmitLauncher.stream_conf`).
"""

from __future__ import annotations

import dataclasses
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from airflow_jrs.domain.paths import job_tag
from airflow_jrs.launch import cluster_outcome as cluster
from airflow_jrs.launch import durable
from airflow_jrs.launch import provider_adapter as provider
from airflow_jrs.launch.deploy_modes.base import DeployMode, SparkTarget
from airflow_jrs.launch.spark_stopping import end_on_request, stop_cluster_driver_on_kill
from airflow_jrs.launch.submission import OutputTail, SubmitPlan, Supervision
from airflow_jrs.protocol.launcher import Ended, Failure, Launch, Launcher, Predecessor
from airflow_jrs.protocol.run import JobRun
from airflow_jrs.protocol.stopping import asked_to_end, cancel_on_kill
from airflow_jrs.spark.conf import fill_placeholders, job_conf
from airflow_jrs.store import Attempt
from airflow_jrs.store.intents import Intent

if TYPE_CHECKING:
    from airflow_jrs.store.namespace import JobNamespace


class SubmitTask(Protocol):
    """What the launcher needs of its task: the provider's ``SparkSubmitOperator`` under the guard
    (:class:`~airflow_jrs.operators.spark.JrsSparkSubmitOperator` and its subclasses), typed here
    so that this layer names no operator module."""

    log: Any
    task_id: str
    job_id: str | None
    application: Any
    application_args: Any
    conf: Any
    name: Any
    spark_conn_id: str
    external_id_key: str

    def _spark_target(self) -> tuple[SparkTarget, DeployMode]:
        """Where the attempt's Spark goes; refuses what cannot be made safe."""

    def _checked_spark_hook(self) -> Any:
        """A provider hook for the Spark connection, to ask the cluster about predecessors."""


class SparkSubmitLauncher(Launcher):
    """One attempt's spark-submit, run by the operator it belongs to; ``jobs`` is the attempt's
    namespace (its supervisor connects with the namespace's connection and settings)."""

    def __init__(self, op: SubmitTask, context: Any, jobs: JobNamespace) -> None:
        self.op, self.context, self.jobs = op, context, jobs
        #: a stream's folders (:class:`~.streaming.StreamingLauncher` sets it before :meth:`prepare`)
        self.stream_conf: dict[str, str] = {}
        #: durable=True: the task state store the parent persists the driver id in (:mod:`.durable`)
        self.state_store = durable.state_store(context, bool(getattr(op, "durable", False)))
        #: this launch, once prepared: what the provider runs, and its operator (a copy of ``op``)
        self.plan: SubmitPlan | None = None
        self.runner: Any = None

    @cached_property
    def mode(self) -> DeployMode:
        """The deploy mode; resolved when first needed, so a job that is done never looks at Spark."""
        return self.op._spark_target()[1]

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.mode.name

    @property
    def cluster(self) -> bool:  # type: ignore[override]
        return self.mode.cluster

    # -- the launch ----------------------------------------------------------------------------
    # What spark-submit runs: the task's own application, arguments and conf. A launcher of another
    # operator (the JDBC copy runs the provider's script) answers these instead of writing onto it.
    def application(self) -> str:
        return self.op.application

    def user_args(self, launch: Launch) -> list[Any] | None:
        return self.op.application_args

    def user_conf(self, launch: Launch) -> dict[str, Any]:
        return dict(self.op.conf or {})

    def prepare(self, launch: Launch) -> dict[str, Any]:
        op, job_id, token = self.op, launch.job_id, launch.fence
        self._refuse_untracked_driver(launch)
        durable.forget_before_launch(self.state_store, provider.state_store_keys(op))  # before the intent
        mode = self.mode
        args = fill_placeholders(self.user_args(launch), output=launch.staging, job_id=job_id, fence=token)
        user_conf = self.user_conf(launch)
        conf = {
            **user_conf,
            **job_conf(job_id=job_id, namespace=launch.namespace, fence=token, output_dir=launch.staging),
            **mode.submission_conf(job_tag(launch.namespace, job_id), token, user_conf),
            **self.stream_conf,
        }
        supervision = Supervision.for_attempt(self.jobs, job_id, token, op.log)
        self.plan = SubmitPlan(conf, args, launch.app_name, mode, supervision, OutputTail())
        application = self.application()
        self.runner = provider.submit_runner(
            op, conf=conf, application_args=args, name=launch.app_name, application=application
        )
        return {
            "application": application,
            "application_args": args,
            "conf": conf,
            "spark_conn_id": op.spark_conn_id,
        }

    def run(self, launch: Launch) -> None:
        assert self.plan is not None, "prepare() comes first"
        provider.run_submit(self.runner, self.context, self.plan.prepare)

    def _spark_hook(self) -> Any:
        """The hook the provider built for this launch (``None`` before it did)."""
        return provider.submit_hook_of(self.runner) if self.runner is not None else None

    def submission(self) -> tuple[int | None, str | None]:
        spark_hook = self._spark_hook()
        return self.mode.submission(spark_hook) if spark_hook is not None else (None, None)

    # -- ending it -----------------------------------------------------------------------------
    def alive(self) -> bool:
        spark_hook = self._spark_hook()
        process = provider.submit_process(spark_hook) if spark_hook is not None else None
        return process is not None and process.poll() is None

    def stop(self) -> None:
        if self._spark_hook() is None:
            return
        try:
            SparkSubmitOperator.on_kill(self.runner)
        except Exception as exc:
            self.op.log.warning("Could not stop spark-submit: %s", exc)

    def kill(self, run: JobRun | None, fence: int | None, *, by: str = "on_kill") -> None:
        # its driver in the cluster first, then its supervisor ends spark-submit (both only from on_kill)
        mode = self.plan.mode if self.plan is not None else None  # never resolved in a signal handler
        stop_cluster_driver_on_kill(mode, self._spark_hook(), run, self.op.log)
        cancel_on_kill(run, fence, self.alive, self.op.log)
        self.stop()

    def check_ended_on_request(self, launch: Launch, recorder: Any) -> None:
        asked = asked_to_end(launch.run, launch.fence)
        if asked is not None:
            spark_hook = self._spark_hook()
            app_id = cluster.recorded_app_id(self.mode, spark_hook, recorder)  # its supervisor ended spark-submit
            end_on_request(launch.run, launch.fence, asked, mode=self.mode, spark_hook=spark_hook,
                           staging=launch.staging, app_id=app_id, log=self.op.log)  # fmt: skip

    # -- what it says --------------------------------------------------------------------------
    def predecessors_of(self, namespace: str, stale: Intent) -> list[Predecessor]:
        known = [i for i in (stale.application_id, self._durable_id(stale)) if i]
        spark_hook, job_id = self.op._checked_spark_hook(), stale.job_id
        return self.mode.find_predecessors(spark_hook, namespace, job_id, job_tag(namespace, job_id), known)

    def before_resubmit(self, stale: Intent) -> None:
        if stale.application_id is None and (found := self._durable_id(stale)) is not None:
            stale = dataclasses.replace(stale, application_id=found)  # the parent persisted it: not unrecorded
        self.mode.before_resubmit(stale)

    def _refuse_untracked_driver(self, launch: Launch) -> None:
        """Recovery found no intent to wait for, yet the state store may name a driver that runs."""
        found = durable.stored_id(self.state_store, self.op.external_id_key)
        driver = self.mode.application_id(found.rsplit(":", 1)[-1]) if found else None
        if driver is None or not self.mode.cluster:
            return
        live = self.mode.cluster_predecessors(self.op._checked_spark_hook(), launch.namespace, launch.job_id,
                                              job_tag(launch.namespace, launch.job_id), [driver])  # fmt: skip
        if live:
            message = durable.untracked_driver_message(launch.job_id, driver, [p.description for p in live])
            raise durable.UntrackedDriverError(message)

    def _durable_id(self, stale: Intent) -> str | None:
        """The driver id the parent persisted for ``stale``'s launch (durable=True), in this mode's shape."""
        if self.state_store is None:
            return None
        ti = self.context["ti"]
        attempt = Attempt(ti.dag_id, ti.task_id, self.context["run_id"], 0, getattr(ti, "map_index", -1))
        found = durable.predecessor_id(self.state_store, self.op.external_id_key, stale, attempt)
        # the provider's Kubernetes id is "<namespace>:<pod>"
        return self.mode.application_id(found.rsplit(":", 1)[-1]) if found else None

    def outcome(self, launch: Launch, recorder: Any, *, failed: bool) -> Ended:
        spark_hook = self._spark_hook()
        return Ended(*cluster.outcome_after_submit(self.mode, spark_hook, recorder, namespace=launch.namespace,
                                            job_id=launch.job_id, fence=launch.fence, staging=launch.staging,
                                            log=self.op.log))  # fmt: skip

    def failure(self, error: BaseException) -> Failure:
        process = provider.submit_process(self._spark_hook())
        exit_code = process.returncode if process is not None else None
        tail = self.plan.tail if self.plan is not None else OutputTail()
        application_id = self.submission()[1] or tail.application_id
        return Failure(error, "spark-submit", exit_code, application_id, output=tail.text())
