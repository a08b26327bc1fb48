"""JrsSparkJDBCOperator: the Spark provider's ``SparkJDBCOperator``, guarded by the job result store.

The provider's operator is a ``SparkSubmitOperator`` whose application is the provider's own
script (``hooks/spark_jdbc_script.py``), with arguments its ``SparkJDBCHook`` builds from the
operator's parameters and the JDBC connection. This one is a
:class:`~airflow_jrs.operators.spark.JrsSparkSubmitOperator` running that same script with those
same arguments, so a copy runs through the same protocol as every guarded spark-submit (decide,
lease, recover, intent, launch under the supervisor, fenced dirty result, release) and a
committed copy starts no JVM.

Where the copy lands (docs/how-to/spark-jdbc.md):

* ``jdbc_to_spark`` writes ``metastore_table`` with ``saveAsTable``. The launch points the
  session's warehouse (``spark.sql.warehouse.dir``) at ``<fence folder>/warehouse`` and its
  metastore at an in-memory Derby database of its own, so the table's files land under the
  attempt's fenced folder: a zombie attempt writes into its own folder, never the winner's, and
  the result records the winner's (output ``table``). A table name in another database is
  refused (the attempt's metastore has only ``default``); so is conf that moves the warehouse or
  the metastore elsewhere (the copy would leave the fence).
* ``spark_to_jdbc`` writes a table of the JDBC database, which no folder can fence: what holds
  is the decision (a committed date writes nothing) and the lease (one live holder at a time; a
  holder that lost its lease is killed by its supervisor). ``save_mode`` decides what a second
  writer does to rows a first one left (``overwrite`` replaces them; ``append`` duplicates them).

The fingerprint covers the copy's definition (:func:`copy_definition`: direction, tables, JDBC
connection id, driver, modes, bounds) and ``job_version``: not the provider's script text (a
provider upgrade does not recompute every date) and not the connection's content (a new
password is not a new copy). It is plannable before the task runs (``airflow-jrs plan``):
``application_args`` holds the definition until launch, when the provider's arguments replace it.

The hook's argument builder, a private name of the provider, is read in :func:`provider_jdbc_arguments`
through :mod:`airflow_jrs.launch.provider_adapter`, which pins it per provider version.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.hooks.spark_jdbc import SparkJDBCHook

from airflow_jrs.domain.identity import application_fingerprint, job_id_for
from airflow_jrs.exceptions import ApplicationFailedError, JrsConfigError
from airflow_jrs.hooks.jrs import JrsHook
from airflow_jrs.launch import provider_adapter as provider
from airflow_jrs.launch.deploy_modes import DeployMode, SparkTarget
from airflow_jrs.launch.spark_launcher import SparkSubmitLauncher
from airflow_jrs.operators.guarded import execute_with_store, run_job
from airflow_jrs.operators.spark import JrsSparkSubmitOperator
from airflow_jrs.protocol import JobSpec
from airflow_jrs.protocol.launcher import Launch
from airflow_jrs.store import JobResult

__all__ = ["JDBC_TO_SPARK", "SPARK_TO_JDBC", "JrsSparkJDBCOperator", "copy_definition", "provider_jdbc_arguments"]

SPARK_TO_JDBC, JDBC_TO_SPARK = "spark_to_jdbc", "jdbc_to_spark"
#: What the fingerprint and the plan know as the application: the provider's script by name
#: (its path differs per host, its text per provider release; neither changes the copy).
SCRIPT_NAME = provider.JDBC_SCRIPT
#: The provider's script, run by spark-submit (the hook's ``submit_jdbc_job`` runs the same file); its
#: place in the provider's package is pinned by the adapter (``PINNED_FILES``).
SCRIPT_PATH = provider.jdbc_script_path()
#: Spark conf a ``jdbc_to_spark`` launch sets so that the table lands under the fenced folder.
WAREHOUSE_CONF = "spark.sql.warehouse.dir"
METASTORE_URL_CONF = "spark.hadoop.javax.jdo.option.ConnectionURL"
METASTORE_URIS_CONF = "spark.hadoop.hive.metastore.uris"
#: The attempt's own metastore: in memory, gone with the driver; the table's files are the copy.
METASTORE_URL = "jdbc:derby:memory:;databaseName=jrs_metastore;create=true"
#: Sub-folder of the fenced folder that is the session's warehouse.
WAREHOUSE = "warehouse"
#: The definition's parameters, in the order :func:`copy_definition` lists them.
DEFINITION = (
    "cmd_type", "jdbc_conn_id", "jdbc_table", "jdbc_driver", "metastore_table", "jdbc_truncate", "save_mode",
    "save_format", "batch_size", "fetch_size", "num_partitions", "partition_column", "lower_bound", "upper_bound",
    "create_table_column_types",
)  # fmt: skip


def copy_definition(params: Mapping[str, Any]) -> list[str]:
    """The copy's definition as ``name=value`` strings (unset parameters left out): what the
    fingerprint covers and the plan reads, before any connection is looked up."""
    return [f"{name}={params[name]}" for name in DEFINITION if params.get(name) not in (None, False, "")]


def provider_jdbc_arguments(hook: SparkJDBCHook) -> list[str]:
    """The script's arguments as the provider's ``SparkJDBCHook.submit_jdbc_job`` builds them.

    The provider's private surface (``submit_jdbc_job`` would submit at once), read through
    :func:`airflow_jrs.launch.provider_adapter.jdbc_application_arguments`, pinned there."""
    return provider.jdbc_application_arguments(hook)


def masked(args: Sequence[Any]) -> list[Any]:
    """``args`` with the value after ``-password`` masked: the spec kept in the state backend is
    not a place for the database's password (the provider passes it on spark-submit's command
    line, which its hook masks in the task log)."""
    out = list(args)
    for i, arg in enumerate(out[:-1]):
        if arg == "-password":
            out[i + 1] = "***"
    return out


def is_template(value: str | None) -> bool:
    """Whether ``value`` is a Jinja template, rendered only when the task runs: its text says
    nothing yet of the table (``{{ params.table }}`` has a dot but names no database)."""
    return value is not None and ("{{" in value or "{%" in value)


def table_folder(metastore_table: str, *, task_id: str) -> str:
    """The sub-path of the fenced folder that holds ``metastore_table``'s files: the warehouse's
    folder of a table of the ``default`` database (lower case, as the metastore keeps names)."""
    parts = [part.strip("`") for part in metastore_table.split(".")]
    if parts[:-1] not in ([], ["default"], ["spark_catalog", "default"]) or not parts[-1]:
        raise JrsConfigError(
            f"{task_id}: metastore_table {metastore_table!r} names a database other than 'default'. A "
            "jdbc_to_spark copy is written to the attempt's own metastore under its fenced folder, which has "
            "only 'default': name the table alone (e.g. 'flights') and expose the recorded folder as a table "
            "downstream (docs/how-to/spark-jdbc.md)."
        )
    return f"{WAREHOUSE}/{parts[-1].lower()}"


class _JdbcLauncher(SparkSubmitLauncher):
    """spark-submit of the provider's script: the arguments from the JDBC hook at launch, the
    warehouse under the fence for ``jdbc_to_spark``, the copy checked and recorded after it."""

    op: JrsSparkJDBCOperator

    def application(self) -> str:
        return SCRIPT_PATH

    def user_args(self, launch: Launch) -> list[Any]:
        return [*self.op.jdbc_arguments(), "-name", launch.app_name]

    def user_conf(self, launch: Launch) -> dict[str, Any]:
        conf = dict(self.op.conf or {})
        if self.op.cmd_type == JDBC_TO_SPARK:  # the attempt's own warehouse, under its fence
            conf.update({WAREHOUSE_CONF: f"{launch.staging}/{WAREHOUSE}", METASTORE_URL_CONF: METASTORE_URL,
                         METASTORE_URIS_CONF: ""})  # fmt: skip
        return conf

    def prepare(self, launch: Launch) -> dict[str, Any]:
        spec = super().prepare(launch)
        spec["application_args"] = masked(spec["application_args"])
        spec["copy"] = copy_definition(vars(self.op))
        return spec

    def finish(self, launch: Launch, result: JobResult) -> JobResult:
        """The copy's facts as metrics; a ``jdbc_to_spark`` copy whose table is not under the fence
        records nothing."""
        self._check_table(launch)
        op = self.op
        metrics = {"cmd_type": op.cmd_type, "jdbc_table": op.jdbc_table, "metastore_table": op.metastore_table}
        if op.cmd_type == SPARK_TO_JDBC:
            metrics["save_mode"] = op.save_mode
        return super().finish(launch, dataclasses.replace(result, metrics={**result.metrics, **metrics}))

    def _check_table(self, launch: Launch) -> None:
        if self.op.cmd_type != JDBC_TO_SPARK or "://" in launch.staging:
            return
        folder = Path(launch.staging, table_folder(self.op.metastore_table or "", task_id=self.op.task_id))
        if not folder.is_dir():
            raise ApplicationFailedError(
                f"job {launch.job_id}: spark-submit ended well but the table {self.op.metastore_table!r} is not "
                f"under the fenced folder ({folder} is missing); nothing recorded. Does a hive-site.xml or "
                "spark-defaults.conf on this host move the warehouse or name a metastore? The copy must stay "
                "under the fence (docs/how-to/spark-jdbc.md).",
                job_id=launch.job_id,
                fence=launch.fence,
            )


class JrsSparkJDBCOperator(JrsSparkSubmitOperator):
    """Copy a table between a JDBC database and Spark once per job; later attempts reuse the result.

    Takes what the provider's ``SparkJDBCOperator`` takes (``spark_app_name`` is replaced by the
    job's application name, ``jrs-<namespace>-<job>-f<fence>``), the executor settings of
    ``SparkSubmitOperator``, and the job's parameters (``job_id``, ``job_version``,
    ``skip_when_done``, ... as :class:`~airflow_jrs.operators.spark.JrsSparkSubmitOperator`).

    :param cmd_type: ``"jdbc_to_spark"`` (the JDBC table into ``metastore_table``, whose files
        land under the attempt's fenced folder and are recorded as output ``table``) or
        ``"spark_to_jdbc"`` (``metastore_table`` into the JDBC table: not fenced, see the how-to)
    :param jdbc_table: the JDBC table, or a subquery ``(SELECT ... WHERE day = '{{ ds }}') t``
        (templated)
    :param jdbc_conn_id: the JDBC database's connection: ``conn_prefix`` extra + host[:port] +
        ``/`` + schema is the URL; login and password its credentials
    :param jdbc_driver: the driver class; its jar goes in ``spark_jars``
    :param metastore_table: the Spark table (templated); for ``jdbc_to_spark`` a table of the
        ``default`` database (the attempt's own metastore)
    :param spark_app_name: no effect: the application is named after the job and its fence
    :param spark_conn_id: the Spark connection (default ``spark_default``: the provider's
        operator defaults to ``spark-default``, which no connection is usually called)
    :param spark_conf: Spark conf; for ``jdbc_to_spark`` it may not set the warehouse or metastore
    :param spark_py_files: ``--py-files``
    :param spark_files: ``--files``
    :param spark_jars: ``--jars`` (the JDBC driver's jar)
    :param jdbc_truncate: spark_to_jdbc with ``save_mode="overwrite"``: truncate instead of dropping
    :param save_mode: Spark's save mode (``overwrite``, ``append``, ``errorifexists``, ``ignore``)
    :param save_format: jdbc_to_spark: the table's format (default Spark's, parquet)
    :param batch_size: spark_to_jdbc: rows per insert round trip
    :param fetch_size: jdbc_to_spark: rows per fetch round trip
    :param num_partitions: the most partitions (and JDBC connections) used at once
    :param partition_column: jdbc_to_spark: numeric column to split the read by (with the bounds)
    :param lower_bound: jdbc_to_spark: the partition column's lower bound
    :param upper_bound: jdbc_to_spark: the partition column's upper bound
    :param create_table_column_types: spark_to_jdbc: column types of a table Spark creates
    :param outputs: logical output name -> sub-path of the fenced folder recorded in the result.
        Default: ``{"table": "warehouse/<table>"}`` for jdbc_to_spark, none for spark_to_jdbc
    """

    template_fields: Sequence[str] = (*JrsSparkSubmitOperator.template_fields, "jdbc_table", "metastore_table")
    # the copy's definition (DEFINITION), kept under the provider's parameter names
    cmd_type: str
    jdbc_conn_id: str
    jdbc_table: str | None
    jdbc_driver: str | None
    metastore_table: str | None
    jdbc_truncate: bool
    save_mode: str | None
    save_format: str | None
    batch_size: int | None
    fetch_size: int | None
    num_partitions: int | None
    partition_column: str | None
    lower_bound: str | None
    upper_bound: str | None
    create_table_column_types: str | None

    def __init__(
        self,
        *,
        cmd_type: str = "spark_to_jdbc",
        jdbc_table: str | None = None,
        jdbc_conn_id: str = "jdbc-default",
        jdbc_driver: str | None = None,
        metastore_table: str | None = None,
        spark_app_name: str = "airflow-spark-jdbc",
        spark_conn_id: str = "spark_default",
        spark_conf: dict[str, Any] | None = None,
        spark_py_files: str | None = None,
        spark_files: str | None = None,
        spark_jars: str | None = None,
        jdbc_truncate: bool = False,
        save_mode: str | None = None,
        save_format: str | None = None,
        batch_size: int | None = None,
        fetch_size: int | None = None,
        num_partitions: int | None = None,
        partition_column: str | None = None,
        lower_bound: str | None = None,
        upper_bound: str | None = None,
        create_table_column_types: str | None = None,
        outputs: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        task_id = kwargs.get("task_id")
        for taken in ("application", "application_args", "conn_id", "conf"):
            if taken in kwargs:
                raise JrsConfigError(
                    f"{task_id}: JrsSparkJDBCOperator does not take {taken!r}: the application is the Spark "
                    "provider's JDBC script with the arguments its hook builds; pass spark_conn_id and "
                    "spark_conf for the Spark connection and conf."
                )
        if cmd_type not in (SPARK_TO_JDBC, JDBC_TO_SPARK):
            raise JrsConfigError(
                f"{task_id}: cmd_type must be {SPARK_TO_JDBC!r} or {JDBC_TO_SPARK!r}, got {cmd_type!r}"
            )
        if not jdbc_table or not metastore_table:
            raise JrsConfigError(f"{task_id}: a JDBC copy needs both jdbc_table and metastore_table")
        params = dict(locals())
        if outputs is None and not is_template(metastore_table):  # a template's: at execution, once rendered
            outputs = self._default_outputs(cmd_type, metastore_table, task_id=task_id or "?")
        super().__init__(
            application=SCRIPT_NAME, application_args=copy_definition(params), conn_id=spark_conn_id,
            conf=spark_conf, py_files=spark_py_files, files=spark_files, jars=spark_jars, name=spark_app_name,
            outputs=outputs, **kwargs,
        )  # fmt: skip
        for name in DEFINITION:
            setattr(self, name, params[name])

    # -- the attempt --------------------------------------------------------------------------
    def execute(self, context: Any) -> dict[str, Any]:  # type: ignore[override]  # the job payload
        # Fails closed when the store is down, whatever [jrs] on_store_unavailable says: an
        # unguarded spark_to_jdbc would write the database table a second time, and the
        # unguarded path runs application_args as given (here the definition, not the script's).
        return execute_with_store(self, context, unsupported_by="JrsSparkJDBCOperator")

    def _execute_guarded(self, context: Any, hook: JrsHook) -> dict[str, Any]:
        job_id = self.job_id = job_id_for(self.job_id, context)
        self._refuse_fence_escapes()
        # the definition as rendered (jdbc_table and metastore_table may be templates)
        self.application, self.application_args = SCRIPT_NAME, copy_definition(vars(self))
        fp = application_fingerprint(self.application, self.application_args, self.job_version)
        outputs = self.outputs  # None: metastore_table was a template, whose folder is known now it is rendered
        if outputs is None:
            outputs = self._default_outputs(self.cmd_type, self.metastore_table or "", task_id=self.task_id)
        spec = JobSpec(job_id, fp, outputs)
        jobs = hook.jobs()  # the attempt's and its supervisor's: one namespace, one client
        return run_job(self, context, jobs, spec, _JdbcLauncher(self, context, jobs))

    @staticmethod
    def _default_outputs(cmd_type: str, metastore_table: str, *, task_id: str) -> dict[str, str]:
        """jdbc_to_spark: the table's folder (refusing a table of another database); spark_to_jdbc:
        none (it writes a database table, no folder to name)."""
        return {"table": table_folder(metastore_table, task_id=task_id)} if cmd_type == JDBC_TO_SPARK else {}

    def _refuse_fence_escapes(self) -> None:
        """A ``jdbc_to_spark`` whose conf moves the warehouse or names a metastore would write the
        table outside the attempt's fenced folder: refused before anything runs."""
        if self.cmd_type != JDBC_TO_SPARK:
            return
        table_folder(self.metastore_table or "", task_id=self.task_id)
        taken = sorted(set(self.conf or {}) & {WAREHOUSE_CONF, METASTORE_URL_CONF, METASTORE_URIS_CONF})
        if taken:
            raise JrsConfigError(
                f"{self.task_id}: spark_conf sets {taken}, which a jdbc_to_spark copy sets itself: the table is "
                "written to the attempt's own warehouse under its fenced folder, so that a zombie attempt cannot "
                "overwrite the winner's copy. Remove them (docs/how-to/spark-jdbc.md)."
            )

    def _spark_target(self) -> tuple[SparkTarget, DeployMode]:
        target, mode = super()._spark_target()
        if mode.cluster:
            raise JrsConfigError(
                f"{self.task_id}: JrsSparkJDBCOperator runs in client or local deploy mode only: the provider's "
                "JDBC script writes no commit marker, and a cluster driver's success is recorded only from one. "
                "Remove deploy_mode='cluster' (or the connection's deploy-mode extra)."
            )
        return target, mode

    def jdbc_arguments(self) -> list[str]:
        """The provider's script arguments for this copy, from its hook (the JDBC connection is
        looked up here, at launch: a committed date never reads it). A connection that cannot be
        read is refused (the provider's hook would run the copy without a URL)."""
        spark_jdbc_hook = SparkJDBCHook(
            spark_conn_id=self.spark_conn_id, conn_id=self.spark_conn_id, cmd_type=self.cmd_type,
            jdbc_table=self.jdbc_table, jdbc_conn_id=self.jdbc_conn_id, jdbc_driver=self.jdbc_driver,
            metastore_table=self.metastore_table, jdbc_truncate=self.jdbc_truncate, save_mode=self.save_mode,
            save_format=self.save_format, batch_size=self.batch_size, fetch_size=self.fetch_size,
            num_partitions=self.num_partitions, partition_column=self.partition_column,
            lower_bound=self.lower_bound, upper_bound=self.upper_bound,
            create_table_column_types=self.create_table_column_types,
        )  # fmt: skip
        args = provider_jdbc_arguments(spark_jdbc_hook)
        if "-url" not in args:
            raise JrsConfigError(
                f"{self.task_id}: JDBC connection {self.jdbc_conn_id!r} is not defined or has no host. Define it "
                "with the URL's parts: extra conn_prefix (e.g. 'jdbc:postgresql://'), host[:port], schema (the "
                f"database), login and password, e.g. AIRFLOW_CONN_{self.jdbc_conn_id.upper().replace('-', '_')}"
                '=\'{"conn_type": "jdbc", "host": "db", "port": 5432, "schema": "sales", '
                '"extra": {"conn_prefix": "jdbc:postgresql://"}}\''
            )
        return args
