"""JrsSparkSubmitOperator: the Spark provider's operator, guarded by the job result store.

The attempt itself (decide, lease, recover or adopt, intent, launch, fenced dirty result,
release) is the Airflow-free protocol, :class:`airflow_jrs.protocol.JobAttempt`; this operator
turns the task's context into its inputs, hands it spark-submit as the launcher
(:class:`~.spark_launcher.SparkSubmitLauncher`), and turns its outcome into what Airflow
understands (a return value, a skip, a failure with or without retries).

Killed attempts (SIGTERM, mark-failed, execution_timeout) never succeed: ``on_kill`` kills
spark-submit and revokes the lease on its own connection, so the fenced result write fails
even if ``execute`` carries on afterwards (apache/airflow#73006); ``execute`` then raises.

``durable`` (the parent's ResumableJobMixin, on by default from Airflow 3.3) is the parent's: its
default, its persisted driver id in the task state store. Its reattach is the guard's recovery:
every try takes the lease under a new fence and finds the previous try's intent, which records
the driver id under the fence that owns it; it waits for a running driver, adopts what the
commit marker in that fence's folder says finished, submits anew after a failure. The state
store's id is one more source of that id, and is forgotten before each launch so that the
parent never reattaches to another fence's driver (:mod:`airflow_jrs.launch.durable`). Across
runs (a cleared task, a backfill) the store alone finds the intent and adopts, as it always did.

Cluster deploy modes (the driver runs in the cluster; see docs/recovery.md, "Deploy modes"):
whatever the parent's ``execute`` raises (a lost status poll, a master or ResourceManager
failover), the driver may still run, so the intent is kept unless the cluster says the driver
ended without a commit marker; and SUCCEEDED is recorded only for output whose commit marker
(:mod:`airflow_jrs.spark.commit`) names this job and fence. The master and deploy mode come
from the Spark connection and the operator's arguments (:mod:`airflow_jrs.launch.deploy_modes`), which
also refuses configurations that cannot be made safe.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection, Sequence
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseOperatorLink

from airflow_jrs.compat import AIRFLOW_VERSION_TEXT
from airflow_jrs.domain.identity import application_fingerprint, job_id_for
from airflow_jrs.hooks.jrs import JrsHook
from airflow_jrs.launch import provider_adapter as provider
from airflow_jrs.launch.deploy_modes import DeployMode, SparkTarget, deploy_mode_for, refuse_unsafe, resolve_target
from airflow_jrs.launch.provider_adapter import PreparesSubmitHook
from airflow_jrs.launch.spark_launcher import SparkSubmitLauncher
from airflow_jrs.launch.streaming import StreamingLauncher
from airflow_jrs.operators.guarded import GuardedJob, execute_with_store, kill_attempt, run_job
from airflow_jrs.operators.job_params import JOB_TEMPLATE_FIELDS
from airflow_jrs.operators.links import JobResultLink, SparkApplicationLink, submit_links
from airflow_jrs.operators.unguarded import kill_unguarded, run_unguarded
from airflow_jrs.protocol import JobSpec, Launcher
from airflow_jrs.spark.conf import PLACEHOLDERS
from airflow_jrs.store.stop_requests import DEFAULT_STOP_TIMEOUT

__all__ = ["PLACEHOLDERS", "JrsSparkSubmitOperator"]


class JrsSparkSubmitOperator(PreparesSubmitHook, SparkSubmitOperator, GuardedJob):
    """Submit a Spark application once per job; later attempts reuse the stored result.

    :param job_version: bump it to recompute although code and arguments are unchanged
    :param streaming: a Structured Streaming application (:func:`airflow_jrs.spark.streaming_job`):
        its checkpoint and output are stable across attempts and runs of the job (resume, no
        rewind), ``on_kill`` stops it at a batch boundary before it cancels, and a stop or cancel
        records STOPPED or CANCELED (see :mod:`airflow_jrs.launch.streaming`, docs/streaming.md)
    :param stop_timeout: streaming only: seconds ``on_kill`` waits for the stop before it cancels;
        keep it below Airflow's ``[core] killed_task_cleanup_time``
    :param durable: the parent's (default ``True`` from Airflow 3.3; no effect below, where an explicit
        ``True`` warns): the driver id is also kept in the task state store; a retry's reattach goes
        through the job's intent and its commit marker (module docstring). YARN cluster mode needs
        ``yarn_track_via_rm_api=True`` with it, as in the parent, or ``durable=False``

    ``application_args`` may use ``{jrs_output}``, ``{jrs_job_id}`` and ``{jrs_fence}``; the
    same values reach the application as Spark conf ``spark.jrs.output_dir``, ``spark.jrs.job_id``
    and ``spark.jrs.fence`` (see :mod:`airflow_jrs.spark`).
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, *JOB_TEMPLATE_FIELDS)
    ui_color = "#fdd9b5"
    #: both links for the docs and the provider's registry; each instance declares only the
    #: ones that can open (``links.submit_links``)
    operator_extra_links: Collection[BaseOperatorLink] = (JobResultLink(), SparkApplicationLink())
    jrs_guarded = "application"  # what the fingerprint covers; the CLI plans by it (protocol/guarded_task.py)

    def __init__(
        self,
        *,
        job_id: str | None = None,
        jrs_conn_id: str | None = None,
        jrs_namespace: str | None = None,
        job_version: str | None = None,
        accept_changed_fingerprint: bool = False,
        skip_when_done: bool = False,
        outputs: dict[str, str] | None = None,
        output_root: str | None = None,
        lease_ttl: float | None = None,
        lease_wait_timeout: float = 0.0,
        predecessor: str = "wait",
        streaming: bool = False,
        stop_timeout: float = DEFAULT_STOP_TIMEOUT,
        durable: bool | None = None,
        **kwargs: Any,
    ) -> None:
        durable_kwargs = _durable_kwargs(durable, kwargs, task_id=kwargs.get("task_id"))
        super().__init__(**durable_kwargs, **kwargs)
        self.operator_extra_links = submit_links()
        #: the Spark connection and deploy mode as the user gave them (not the hook's private copies)
        self.spark_conn_id: str = kwargs.get("conn_id", "spark_default")
        self.spark_deploy_mode: str | None = kwargs.get("deploy_mode")
        self._jrs_tracking = {
            "yarn_track_via_rm_api": bool(kwargs.get("yarn_track_via_rm_api", False)),
            "track_driver_via_k8s_api": bool(kwargs.get("track_driver_via_k8s_api", False)),
        }
        self._take_job_params(locals())
        self.streaming = streaming
        self.stop_timeout = stop_timeout

    # -- the attempt --------------------------------------------------------------------------
    def execute(self, context: Any) -> dict[str, Any]:  # type: ignore[override]
        # Only before the lease may a store that is down run the job unguarded (guarded.py).
        return execute_with_store(
            self, context, run_unguarded=lambda hook, exc: run_unguarded(self, context, hook, exc)
        )

    def _execute_guarded(self, context: Any, hook: JrsHook) -> dict[str, Any]:
        job_id = job_id_for(self.job_id, context)
        self.job_id = job_id
        fp = application_fingerprint(self.application, self.application_args, self.job_version)
        spec = JobSpec(job_id, fp, self.outputs or {"output": ""})
        jobs = hook.jobs()  # the attempt's and its supervisor's: one namespace, one client
        submit = SparkSubmitLauncher(self, context, jobs)
        # a stream resumes in its own folders, and a kill stops it at a batch boundary
        launcher: Launcher = StreamingLauncher(submit, self.stop_timeout) if self.streaming else submit
        return run_job(self, context, jobs, spec, launcher)

    def _spark_target(self) -> tuple[SparkTarget, DeployMode]:
        """Where this attempt's Spark goes, from the connection and the operator's arguments (never
        the hook's private state); refuses what cannot be made safe (each deploy mode says what)."""
        target = resolve_target(self.spark_conn_id, deploy_mode=self.spark_deploy_mode, conf=self.conf)
        refuse_unsafe(target, self.conf, task_id=self.task_id, durable=bool(self.durable), **self._jrs_tracking)
        return target, deploy_mode_for(target)

    def _checked_spark_hook(self) -> Any:
        """The provider's SparkSubmitHook, for a Spark connection that exists (see above)."""
        self._spark_target()
        return provider.build_submit_hook(self)

    # -- kill ---------------------------------------------------------------------------------
    def on_kill(self) -> None:
        """Kill Spark and revoke the lease so that no result can be written after this point
        (:meth:`airflow_jrs.protocol.JobAttempt.kill`: the one stop path, then the hard kill); in an
        unguarded run (no attempt held the lease), kill its spark-submit (:func:`kill_unguarded`).

        Runs inside a signal handler on the thread that is executing: it must not raise."""
        if not kill_attempt(self):
            kill_unguarded(self)


def _parent_is_durable() -> bool:
    """Does the provider's operator run on Airflow's own ``ResumableJobMixin`` (3.3+), not on
    common-compat's stand-in (which warns for any ``durable`` it is given and never resumes)?"""
    return any(
        c.__name__ == "ResumableJobMixin" and c.__module__.startswith("airflow.sdk")
        for c in SparkSubmitOperator.__mro__
    )


def _durable_kwargs(durable: bool | None, kwargs: dict[str, Any], *, task_id: Any) -> dict[str, Any]:
    """What reaches the parent of ``durable`` (and its deprecated alias ``reconnect_on_retry``, popped
    from ``kwargs`` below 3.3): only what the user set, so that a default warns nothing anywhere."""
    if _parent_is_durable():
        return {} if durable is None else {"durable": durable}
    alias = kwargs.pop("reconnect_on_retry", None)
    if durable or (durable is None and alias):
        warnings.warn(
            f"{task_id}: durable=True has no effect on Airflow {AIRFLOW_VERSION_TEXT}: the task state store it "
            "keeps the driver id in arrived in Airflow 3.3. The job's intent still makes a retry wait for, and "
            "adopt, a driver that still runs (docs/how-to/spark-cluster.md).",
            UserWarning,
            stacklevel=4,
        )
    return {}
