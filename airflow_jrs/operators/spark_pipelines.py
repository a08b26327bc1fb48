"""JrsSparkPipelinesOperator: the Spark provider's ``SparkPipelinesOperator``, guarded by the job result store.

A Spark Declarative Pipelines run per job (per date by default) is computed once: the attempt
is the same protocol as every guarded operator's (:class:`airflow_jrs.protocol.JobAttempt`:
decide, lease, recover, intent, launch, fenced dirty result, release), with
:class:`~airflow_jrs.launch.pipelines_launcher.PipelinesLauncher` as the launcher. A date with a
SUCCEEDED result runs no pipeline and starts no JVM (the decision reads Redis only).

Why this design (the simplest that keeps docs/architecture.md, "Invariants"):

* ``spark-pipelines`` is a driver process of its own, like spark-submit (a JVM with a local
  Spark Connect server, and the CLI's Python as its child). A SIGKILLed task would leave it
  running, so it runs under the existing supervisor (heartbeat per fence, the first beat
  refused once the lease is lost, self-fencing, death with the supervisor): one holder, and a
  killed attempt never succeeds. The in-process route of ``JrsSparkSqlOperator`` is not open:
  the CLI is the only supported runner of a pipeline graph.
* The fence is a folder: each attempt's ``storage`` and ``spark.sql.warehouse.dir`` are under
  its own ``<output_root>/<namespace>/<job id>/fence-<token>-<nonce>``, so a zombie attempt
  cannot overwrite the winner's datasets; the cleanup (``JrsCleanupOperator``) removes the
  losers' folders and commits the result, as for every guarded job.
* The operator builds the CLI's command itself instead of the provider hook's: the hook
  (provider 6.3) always passes ``--master``, which ``spark-pipelines`` 4.x refuses, and its
  Spark Connect mode talks to a remote server whose warehouse is shared by everyone (no fence
  possible). Only the CLI's own local server runs here; the operator refuses the rest with
  the reason.

Full refresh: every guarded run already starts from empty ``storage`` and an empty warehouse
in a fresh fence folder, i.e. it *is* a full refresh of the whole graph (``--full-refresh-all``
would change nothing). A full refresh of a date that is already done is a recompute, on purpose
and visible: ``airflow-jrs recompute`` (or ``forget``) and re-run the task; there is no flag that
silently bypasses the store. Incremental state across dates (a streaming table continuing from
yesterday's checkpoint) is therefore not kept: a checkpoint shared between attempts would be a
folder a zombie could write.

The fingerprint (:func:`airflow_jrs.domain.pipeline_spec.pipeline_fingerprint`) covers the spec
(without ``storage``), every definition file its libraries match, and ``job_version``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from airflow.providers.apache.spark.operators.spark_pipelines import SparkPipelinesOperator

from airflow_jrs.domain.identity import job_id_for
from airflow_jrs.domain.pipeline_spec import load_spec, pipeline_fingerprint
from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.hooks.jrs import JrsHook
from airflow_jrs.launch.deploy_modes.registry import kind_of
from airflow_jrs.launch.pipelines_fence import check_fenced
from airflow_jrs.launch.pipelines_launcher import PipelineRunError, PipelinesLauncher
from airflow_jrs.observability.lineage import spark_lineage_conf
from airflow_jrs.operators.guarded import GuardedJob, execute_with_store, kill_attempt, run_job
from airflow_jrs.operators.job_params import JOB_TEMPLATE_FIELDS
from airflow_jrs.operators.links import JobResultLink
from airflow_jrs.protocol import JobSpec

__all__ = ["JrsSparkPipelinesOperator", "PipelineRunError"]


class JrsSparkPipelinesOperator(SparkPipelinesOperator, GuardedJob):
    """Run a Spark Declarative Pipeline once per job; later attempts reuse the stored result.

    Takes what the provider's ``SparkPipelinesOperator`` takes, and:

    :param pipeline_spec: the pipeline's ``spark-pipeline.yml`` as the worker sees it (templated).
        Its ``storage`` is replaced by ``<fenced folder>/storage`` for each attempt
    :param pipeline_command: ``"run"`` only: a ``dry-run`` computes nothing to record (use the
        provider's operator for it)
    :param conn_id: a Spark connection; only a local master is accepted (the CLI's own local
        Spark Connect server runs the pipeline). Default: none, local
    :param conf: Spark conf for the pipeline's server; ``spark.sql.warehouse.dir`` is set by the
        guard (under the fence) and may not be given, nor a catalog or metastore setting
        (``spark.sql.catalog*``, ``hive.*``, ``javax.jdo.*``): the spec's ``catalog`` must be the
        session catalog, and the same keys are refused in its ``configuration`` and the worker's
        ``SPARK_CONF_DIR`` (with a ``hive-site.xml``)
    :param job_version: bump it to recompute although the spec and definitions are unchanged
    :param outputs: logical output name -> sub-path of the fenced folder recorded in the result
        (default ``{"output": "warehouse"}``: the datasets; a table is ``warehouse/<table>``).
        A run that leaves no dataset in the warehouse, or a missing ``outputs`` path, fails and
        records nothing
    :param predecessor: what to do with a predecessor's spark-pipelines that still runs (its task
        was ``kill -9``-ed): ``"wait"`` (default) for it to end, or ``"stop"`` it; its folder is
        adopted only when its task wrote the commit marker, else the pipeline runs again
    :param openlineage_inject_parent_job_info: give the pipeline's Spark this task as its
        OpenLineage parent (``spark.openlineage.*`` conf). Default ``[openlineage]
        spark_inject_parent_job_info``; never part of the fingerprint
    :param openlineage_inject_transport_info: give it the task's OpenLineage transport. Default
        ``[openlineage] spark_inject_transport_info``
    """

    template_fields: Sequence[str] = (*SparkPipelinesOperator.template_fields, *JOB_TEMPLATE_FIELDS)
    ui_color = "#fdd9b5"
    operator_extra_links = (JobResultLink(),)
    jrs_guarded = "pipeline"  # what the fingerprint covers; the CLI plans by it (protocol/guarded_task.py)

    def __init__(
        self,
        *,
        pipeline_spec: str,
        pipeline_command: str = "run",
        conn_id: str | None = None,
        job_id: str | None = None,
        job_version: str | None = None,
        outputs: dict[str, str] | None = None,
        skip_when_done: bool = False,
        jrs_conn_id: str | None = None,
        jrs_namespace: str | None = None,
        lease_ttl: float | None = None,
        lease_wait_timeout: float = 0.0,
        accept_changed_fingerprint: bool = False,
        output_root: str | None = None,
        predecessor: str = "wait",
        openlineage_inject_parent_job_info: bool | None = None,
        openlineage_inject_transport_info: bool | None = None,
        **kwargs: Any,
    ) -> None:
        if pipeline_command != "run":
            raise JrsConfigError(
                f"{kwargs.get('task_id')}: pipeline_command={pipeline_command!r} is not guarded: a dry-run validates "
                "the graph and writes no dataset, so there is no result to record. Use the provider's "
                "SparkPipelinesOperator for a dry-run, and pipeline_command='run' (the default) here."
            )
        super().__init__(pipeline_spec=pipeline_spec, pipeline_command="run", conn_id=conn_id or "", **kwargs)
        self._take_job_params(locals())
        self.spark_conn_id = conn_id
        # Resolved at launch (None: [openlineage]), not when the DAG file is parsed as the parent's are.
        self.openlineage_inject_parent_job_info = openlineage_inject_parent_job_info
        self.openlineage_inject_transport_info = openlineage_inject_transport_info

    # -- the attempt --------------------------------------------------------------------------
    def execute(self, context: Any) -> dict[str, Any]:  # type: ignore[override]  # the job payload
        return execute_with_store(self, context, unsupported_by="JrsSparkPipelinesOperator")

    def _execute_guarded(self, context: Any, hook: JrsHook) -> dict[str, Any]:
        job_id = self.job_id = job_id_for(self.job_id, context)
        spec_path = str(self.pipeline_spec or "")
        if not spec_path:
            raise JrsConfigError(f"{self.task_id}: pipeline_spec is required (the path of spark-pipeline.yml)")
        fingerprint = pipeline_fingerprint(spec_path, self.job_version)
        cli_args = self._cli_args()
        conf = spark_lineage_conf(
            self._checked_conf(), context, parent=self.openlineage_inject_parent_job_info,
            transport=self.openlineage_inject_transport_info,
        )  # fmt: skip
        jobs = hook.jobs()  # the attempt's and its supervisor's: one namespace, one client
        launcher = PipelinesLauncher(
            spec_path=spec_path, cli_args=cli_args, conf=conf,
            env={str(k): str(v) for k, v in (self.env_vars or {}).items()}, jobs=jobs, log=self.log,
        )  # fmt: skip
        spec = JobSpec(job_id, fingerprint, self.outputs or {"output": "warehouse"})
        return run_job(self, context, jobs, spec, launcher)

    def _checked_conf(self) -> dict[str, Any]:
        """The user's conf plus the executor settings; refuses what would defeat the fence (a
        warehouse, another catalog or a metastore, in conf, the spec or the worker's
        ``SPARK_CONF_DIR``: :func:`~airflow_jrs.launch.pipelines_launcher.check_fenced`) or that
        Spark refuses for spark-pipelines (a master)."""
        self._check_connection()
        if self.deploy_mode == "cluster":
            raise JrsConfigError(
                f"{self.task_id}: deploy_mode='cluster' is not supported: spark-pipelines runs its own local "
                "Spark Connect server beside the CLI. Leave deploy_mode unset."
            )
        conf = dict(self.conf or {})
        # the spec and the worker's SPARK_CONF_DIR reach the same server: a catalog set there leaks as well
        conf_dir = (self.env_vars or {}).get("SPARK_CONF_DIR") or os.environ.get("SPARK_CONF_DIR")
        check_fenced(load_spec(str(self.pipeline_spec)), conf, conf_dir, who=self.task_id)
        executor = {
            "spark.executor.cores": self.executor_cores,
            "spark.executor.memory": self.executor_memory,
            "spark.executor.instances": self.num_executors,
            "spark.yarn.queue": self.yarn_queue,
        }
        conf.update({key: value for key, value in executor.items() if value})
        return conf

    def _check_connection(self) -> None:
        """A Spark connection may only say "local": anything else would not run where it says."""
        if not self.spark_conn_id:
            return
        from airflow.sdk import BaseHook

        conn = BaseHook.get_connection(self.spark_conn_id)
        host = (conn.host or "").strip()
        if conn.conn_type == "spark_connect" or not (host == "" or kind_of(host) == "local"):
            raise JrsConfigError(
                f"{self.task_id}: conn_id {self.spark_conn_id!r} ({conn.conn_type}, host {host!r}) is not supported: "
                "a guarded pipeline runs on the local Spark Connect server spark-pipelines starts (a remote "
                "server's warehouse is shared by every attempt, so no fence could separate them; spark-pipelines "
                "refuses --master). Leave conn_id unset, or use a connection whose host is local."
            )

    def _cli_args(self) -> list[str]:
        """The provider's other arguments as CLI options (spark-submit's, which the CLI passes on)."""
        args: list[str] = []
        if self.driver_memory:
            args += ["--driver-memory", str(self.driver_memory)]
        if self.keytab:
            args += ["--keytab", str(self.keytab)]
        if self.principal:
            args += ["--principal", str(self.principal)]
        if self.verbose:
            args += ["--verbose"]
        return args

    # -- kill ---------------------------------------------------------------------------------
    def on_kill(self) -> None:
        """Kill spark-pipelines (the supervisor and everything under it) and revoke the lease so
        that no result can be written after this point. Runs inside a signal handler: never raises."""
        kill_attempt(self)
