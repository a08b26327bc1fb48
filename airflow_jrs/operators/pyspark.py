"""JrsPySparkOperator: the Spark provider's ``PySparkOperator``, guarded by the job result store.

The provider's operator (and its ``@task.pyspark``) hands a SparkSession to a Python function
in the task process. This one takes the same arguments (``python_callable``, ``conn_id``,
``config_kwargs``, ``op_args``, ``op_kwargs``) plus the job's (``job_id``, ``job_version``,
``outputs``, ``skip_when_done``, ...), and runs the function through the same protocol as
:class:`~airflow_jrs.operators.spark.JrsSparkSubmitOperator`
(:class:`airflow_jrs.protocol.JobAttempt`: decide, lease, recover or adopt, intent, launch,
fenced dirty result, release), with a session in this process as the launcher
(:class:`~.session_launcher.SessionLauncher`). A job that is done never calls the function and
never creates a session (no JVM is started).

The function receives, by parameter name (like the provider's ``spark``):

* ``spark``: the SparkSession, ``sc``: its SparkContext;
* ``jrs``: the attempt's :class:`~.session_launcher.JobContext` (``job_id``, ``fence``,
  ``output``: the fenced folder to write to, ``outputs``).

It writes its data under ``jrs.output``; the commit marker is written after it returns. Its
return value, when JSON and small, becomes the result's metrics. The task returns the job's
result payload (the same shape as the spark-submit operator's: ``outputs``, ``metrics``,
``reused``, ...), computed or reused, so downstream tasks and the cleanup read one shape.

The fingerprint (:func:`airflow_jrs.domain.identity.function_fingerprint`) covers the function's
source, its rendered ``op_args``/``op_kwargs`` and ``job_version``; it cannot see code the
function calls from other modules: bump ``job_version`` when that changes.

Sessions: ``local[*]`` (no connection), or the connection's master (``local[N]``,
``spark://host:port``) as the provider resolves it, with its extras and then
``config_kwargs`` as Spark conf. Spark Connect: a ``spark_connect`` connection (or
``spark.remote`` in ``config_kwargs``) runs the function on a remote session of its own,
recorded in the job's intent and tagged with the job and fence, which a retry reattaches to
(:mod:`.connect_launcher`); ``config_kwargs`` are then runtime session conf and ``sc`` is
``None`` (a Connect session has no SparkContext). Other masters (YARN, Kubernetes) are refused
with :class:`~airflow_jrs.exceptions.JrsConfigError`: the driver must live in the task process
for the lease alone to be enough (see :mod:`.session_launcher`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
from airflow.providers.apache.spark.operators.spark_pyspark import PySparkOperator
from airflow.providers.common.compat.sdk import BaseHook

from airflow_jrs.domain.identity import function_fingerprint, job_id_for
from airflow_jrs.hooks.jrs import JrsHook
from airflow_jrs.launch.connect_launcher import ConnectLauncher
from airflow_jrs.launch.session_launcher import JobContext
from airflow_jrs.observability.lineage import with_spark_lineage
from airflow_jrs.operators.guarded import GuardedJob, execute_with_store, kill_attempt, run_job
from airflow_jrs.operators.job_params import JOB_TEMPLATE_FIELDS
from airflow_jrs.operators.links import JobResultLink
from airflow_jrs.operators.session_settings import in_process_session
from airflow_jrs.protocol import JobSpec
from airflow_jrs.spark.commit import is_connect_session

__all__ = ["SESSION_KEYS", "JrsPySparkOperator"]

#: Parameters the operator fills in for the function, by name (like the provider's ``spark``/``sc``).
SESSION_KEYS = ("spark", "sc", "jrs")


def with_session_defaults(python_callable: Callable[..., Any]) -> None:
    """Give the function's ``spark``/``sc``/``jrs`` parameters a ``None`` default, as the provider
    does for ``spark``/``sc``: the DAG author never passes them, the operator fills them in."""
    import inspect

    signature = inspect.signature(python_callable)
    parameters = [p.replace(default=None) if p.name in SESSION_KEYS else p for p in signature.parameters.values()]
    python_callable.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]


class JrsPySparkOperator(PySparkOperator, GuardedJob):
    """Run a PySpark function once per job; later attempts reuse the stored result.

    Takes what the provider's ``PySparkOperator`` takes, and:

    :param python_callable: the job: receives ``spark``, ``sc`` and ``jrs`` (the attempt's
        :class:`~.session_launcher.JobContext`) by parameter name, writes under ``jrs.output``;
        its return value (small JSON) becomes the result's metrics
    :param job_version: bump it to recompute although the function and its arguments are unchanged
        (e.g. a helper it imports from another module changed)
    :param predecessor: ``"wait"`` (default) or ``"stop"``: a predecessor's driver still on this
        host (it dies with its task process; this covers the moment it takes), or, with Spark
        Connect, a dead predecessor's operations still running in its session on the server
        (``"stop"`` interrupts them; ``"wait"`` waits, then adopts its output if it committed)
    """

    template_fields: Sequence[str] = (*PySparkOperator.template_fields, *JOB_TEMPLATE_FIELDS)
    ui_color = "#fdd9b5"
    operator_extra_links = (JobResultLink(),)
    jrs_guarded = "function"  # what the fingerprint covers; the CLI plans by it (protocol/guarded_task.py)

    def __init__(
        self,
        *,
        python_callable: Callable[..., Any],
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
        **kwargs: Any,
    ) -> None:
        super().__init__(python_callable=python_callable, **kwargs)
        with_session_defaults(python_callable)
        self._take_job_params(locals())

    # -- the attempt --------------------------------------------------------------------------
    def execute(self, context: Any) -> dict[str, Any]:
        return execute_with_store(self, context, unsupported_by="JrsPySparkOperator yet")

    def _execute_guarded(self, context: Any, hook: JrsHook) -> dict[str, Any]:
        from airflow.providers.common.compat.sdk import context_merge

        job_id = self.job_id = job_id_for(self.job_id, context)
        fp = function_fingerprint(self.python_callable, self.op_args, self.op_kwargs, self.job_version)
        context_merge(context, self.op_kwargs, templates_dict=self.templates_dict)
        kwargs = dict(self.determine_kwargs(context))
        launcher = ConnectLauncher(
            self._bind(kwargs), with_spark_lineage(self._session_settings, context),
            callable_name=_qualified_name(self.python_callable),
            log=self.log, unseen_tasks_wait=hook.settings.connect_unseen_tasks_wait,
        )  # fmt: skip
        return run_job(self, context, hook.jobs(), JobSpec(job_id, fp, self.outputs or {"output": ""}), launcher)

    def _bind(self, kwargs: Mapping[str, Any]) -> Callable[[Any, JobContext], Any]:
        """The function bound to its arguments; the session keys it accepts are filled in at launch."""
        import inspect

        params = inspect.signature(self.python_callable).parameters
        takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        wanted = [key for key in SESSION_KEYS if takes_all or key in params]
        args = list(self.op_args)

        def call(spark: Any, job: JobContext) -> Any:
            given = {"spark": spark, "jrs": job}
            if "sc" in wanted:  # a Spark Connect session has no SparkContext (its property raises)
                given["sc"] = None if is_connect_session(spark) else spark.sparkContext
            return self.python_callable(*args, **{**kwargs, **{key: given[key] for key in wanted}})

        return call

    # -- the session --------------------------------------------------------------------------
    def _session_settings(self) -> tuple[str, dict[str, str]]:
        """(master, conf) the way the provider's ``PySparkOperator.execute_callable`` resolves them
        (:func:`~.session_settings.in_process_session`: the rule the SQL operator shares), or the
        Spark Connect URL and session conf (:meth:`_connect_settings`)."""
        remote = self._connect_settings()
        if remote is not None:
            return remote
        return in_process_session(
            task_id=self.task_id, operator="JrsPySparkOperator", conn_id=self.conn_id, conf=self.config_kwargs,
            app_name=f"{self.dag_id}-{self.task_id}",
        )  # fmt: skip

    def _connect_settings(self) -> tuple[str, dict[str, str]] | None:
        """(``sc://`` URL, session conf) when the session is remote, as the provider resolves it:
        a ``spark_connect`` connection's URL (host, port, login as ``user_id``, password as
        ``token``, ``use_ssl``), then ``spark.remote`` in ``config_kwargs``. Its other extras and
        ``config_kwargs`` become runtime conf of the session; ``None``: not Spark Connect."""
        conf = {str(k): str(v) for k, v in (self.config_kwargs or {}).items()}
        remote = conf.pop("spark.remote", None)
        if self.conn_id:
            conn = BaseHook.get_connection(self.conn_id)
            if conn.conn_type == SparkConnectHook.conn_type:
                url = SparkConnectHook(self.conn_id).get_connection_url()
                extras = {str(k): str(v) for k, v in conn.extra_dejson.items() if k != SparkConnectHook.PARAM_USE_SSL}
                return remote or url, {**extras, **conf}
        return (remote, conf) if remote else None

    # -- kill ---------------------------------------------------------------------------------
    def on_kill(self) -> None:
        """Stop the session and revoke the lease so that no result can be written after this point.
        Runs inside a signal handler on the thread that is executing: it must not raise."""
        kill_attempt(self)


def _qualified_name(fn: Any) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
