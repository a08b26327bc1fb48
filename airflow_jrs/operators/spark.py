"""JrsSparkSubmitOperator: the Spark provider's operator, guarded by the job result store.

The attempt itself (decide, lease, recover or adopt, intent, launch, fenced dirty result,
release) is the Airflow-free protocol, :class:`airflow_jrs.protocol.JobAttempt`; this operator
turns the task's context into its inputs, hands it spark-submit as the launcher
(:class:`~.spark_launcher.SparkSubmitLauncher`), and turns its outcome into what Airflow
understands (a return value, a skip, a failure with or without retries).

Killed attempts (SIGTERM, mark-failed, execution_timeout) never succeed: ``on_kill`` kills
spark-submit and revokes the lease on its own connection, so the fenced result write fails
even if ``execute`` carries on afterwards (apache/airflow#73006); ``execute`` then raises.

``durable`` (the parent's ResumableJobMixin, on by default in Airflow 3.3) is forced off, and
``durable=True`` is refused with :class:`~airflow_jrs.exceptions.JrsConfigError`: its reattach
reads an id from the task's state store, not from the job's intent, so a retry under a new
fence would reattach to (or report "already succeeded" for) the previous fence's driver and we
would publish the new fence's empty folder. The intent does that job for every deploy mode:
it records the driver or application id under the fence that owns it, and the next attempt
waits for that driver and adopts its output (:mod:`.recovery`).

Cluster deploy modes (the driver runs in the cluster; see docs/recovery.md, "Deploy modes"):
whatever the parent's ``execute`` raises (a lost status poll, a master or ResourceManager
failover), the driver may still run, so the intent is kept unless the cluster says the driver
ended without a commit marker; and SUCCEEDED is recorded only for output whose commit marker
(:mod:`airflow_jrs.spark.commit`) names this job and fence. The master and deploy mode come
from the Spark connection and the operator's arguments (:mod:`.spark_target`), which also
refuses configurations that cannot be made safe.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseOperatorLink

from airflow_jrs.domain.identity import application_fingerprint, job_id_for
from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.hooks.jrs import JrsHook
from airflow_jrs.launch import provider_adapter as provider
from airflow_jrs.launch.deploy_mode_choice import deploy_mode_for
from airflow_jrs.launch.deploy_modes import DeployMode
from airflow_jrs.launch.provider_adapter import PreparesSubmitHook
from airflow_jrs.launch.spark_launcher import SparkSubmitLauncher
from airflow_jrs.launch.spark_target import SparkTarget, refuse_unsafe, resolve_target
from airflow_jrs.operators.guarded import GuardedJob, execute_with_store, kill_attempt, run_job
from airflow_jrs.operators.links import JobResultLink, SparkApplicationLink, submit_links
from airflow_jrs.operators.unguarded import run_unguarded
from airflow_jrs.protocol import JobSpec
from airflow_jrs.spark.conf import PLACEHOLDERS
from airflow_jrs.store.stop_requests import DEFAULT_STOP_TIMEOUT

__all__ = ["PLACEHOLDERS", "JrsSparkSubmitOperator"]


class JrsSparkSubmitOperator(PreparesSubmitHook, SparkSubmitOperator, GuardedJob):
    """Submit a Spark application once per job; later attempts reuse the stored result.

    :param job_id: the job's id (templated). Default: ``{dag_id}.{task_id}.{date or partition}``,
        stable across scheduled, backfill and cleared runs of one data interval.
    :param jrs_conn_id: the job result store connection (default ``[jrs] conn_id``, ``jrs_default``)
    :param jrs_namespace: overrides the connection's/config's namespace
    :param job_version: bump it to recompute although code and arguments are unchanged
    :param accept_changed_fingerprint: skip on any SUCCEEDED result, even for other code/arguments
    :param skip_when_done: raise ``AirflowSkipException`` instead of succeeding when skipping
    :param outputs: logical output name -> sub-path of the staging folder recorded in the result
        (default ``{"output": ""}``: the staging folder itself)
    :param output_root: where staging folders live (default ``[jrs] output_root``)
    :param lease_ttl: seconds (default ``[jrs] lease_ttl``)
    :param lease_wait_timeout: how long to wait for another attempt's lease before failing
    :param predecessor: what to do with a predecessor's spark-submit that still runs:
        ``"wait"`` (default: its work may finish and be adopted) or ``"stop"``
    :param streaming: a Structured Streaming application (:func:`airflow_jrs.spark.streaming_job`):
        its checkpoint and output are stable across attempts and runs of the job (resume, no
        rewind), ``on_kill`` stops it at a batch boundary before it cancels, and a stop or cancel
        records STOPPED or CANCELED (see :mod:`airflow_jrs.launch.streaming`, docs/streaming.md)
    :param stop_timeout: streaming only: seconds ``on_kill`` waits for the stop before it cancels;
        keep it below Airflow's ``[core] killed_task_cleanup_time``
    :param durable: must be left unset or ``False``: the parent's reattach-on-retry is replaced by
        the job's intent (module docstring); ``True`` raises :class:`~airflow_jrs.exceptions.JrsConfigError`

    ``application_args`` may use ``{jrs_output}``, ``{jrs_job_id}`` and ``{jrs_fence}``; the
    same values reach the application as Spark conf ``spark.jrs.output_dir``, ``spark.jrs.job_id``
    and ``spark.jrs.fence`` (see :mod:`airflow_jrs.spark`).
    """

    template_fields: Sequence[str] = (
        *SparkSubmitOperator.template_fields,
        "job_id",
        "job_version",
        "output_root",
        "outputs",
    )
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
        if durable or kwargs.get("reconnect_on_retry"):
            raise JrsConfigError(
                f"{kwargs.get('task_id')}: JrsSparkSubmitOperator does not support durable=True (or "
                "reconnect_on_retry=True): the provider's reattach reads a driver id from the task's state, not "
                "from the job's intent, and could publish a new attempt's empty folder for a previous attempt's "
                "driver. Leave durable unset: the job's intent already makes a retry wait for, and adopt, a "
                "driver that still runs (docs/recovery.md, 'Deploy modes')."
            )
        kwargs.pop("reconnect_on_retry", None)
        super().__init__(durable=False, **kwargs)
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
        return run_job(self, context, hook, spec, SparkSubmitLauncher(self, context, hook))

    def _spark_target(self) -> tuple[SparkTarget, DeployMode]:
        """Where this attempt's Spark goes, from the connection and the operator's arguments (never
        the hook's private state); refuses what cannot be made safe (:mod:`.spark_target`)."""
        target = resolve_target(self.spark_conn_id, deploy_mode=self.spark_deploy_mode, conf=self.conf)
        refuse_unsafe(target, self.conf, task_id=self.task_id, **self._jrs_tracking)
        if getattr(self, "durable", False):  # set after construction (partial, a mutated task)
            raise JrsConfigError(f"{self.task_id}: durable=True is not supported (see the operator's docs)")
        return target, deploy_mode_for(target)

    def prepare_submit_hook(self, spark_hook: Any) -> None:
        """Each hook the provider's operator builds, prepared by this attempt's deploy mode (it may
        read spark-submit's output), its supervisor and its output tail (:mod:`.provider_adapter`)."""
        mode = getattr(self, "_jrs_deploy_mode", None)
        if mode is not None:
            mode.prepare(spark_hook)
        supervision = getattr(self, "_jrs_supervision", None)
        if supervision is not None:
            supervision.wrap(spark_hook)
        tail = getattr(self, "_jrs_output_tail", None)
        if tail is not None:
            tail.wrap(spark_hook)

    def _checked_spark_hook(self) -> Any:
        """The provider's SparkSubmitHook, for a Spark connection that exists (see above)."""
        self._spark_target()
        return provider.build_submit_hook(self)

    # -- kill ---------------------------------------------------------------------------------
    def on_kill(self) -> None:
        """Kill Spark and revoke the lease so that no result can be written after this point
        (:meth:`airflow_jrs.protocol.JobAttempt.kill`: the one stop path, then the hard kill).

        Runs inside a signal handler on the thread that is executing: it must not raise."""
        if not kill_attempt(self) and provider.submit_hook_of(self) is not None:  # no attempt yet, or an unguarded run
            try:
                super().on_kill()
            except Exception as exc:
                self.log.warning("Could not stop spark-submit: %s", exc)
