"""JrsSparkSqlOperator: the Spark provider's ``SparkSqlOperator``, guarded by the job result store.

The provider's operator runs the ``spark-sql`` CLI. This one takes the same arguments (``sql``,
a string or a ``.sql``/``.hql`` file, templated the same way; ``conf``; ``conn_id``; ``master``
and the executor settings) plus the job's (``job_id``, ``job_version``, ``outputs``,
``skip_when_done``, ...), and runs the statements through the same protocol as every guarded
operator (:class:`airflow_jrs.protocol.JobAttempt`: decide, lease, recover, intent, launch,
fenced dirty result, release), with :class:`~.session_launcher.SessionLauncher` as the launcher,
the one ``JrsPySparkOperator`` uses: a SparkSession in the task process, ``spark.sql()`` per
statement. A committed job runs no statement and starts no session (no JVM).

Why a session in the task process and not the ``spark-sql`` CLI: the CLI is a driver JVM in a
process of its own, which survives a SIGKILLed task and would need the spark-submit launcher's
supervisor to be fenced, and it reports a failed statement only as an exit code. In the task
process the driver dies with the task (the lease alone fences it, see
:mod:`.session_launcher`), the self-fencing watchdog and ``on_kill`` stop it, the commit marker
is written after the last statement by the same code as for a PySpark function, and a failed
statement is raised naming it. The price is the CLI's reach: ``local[...]`` and ``spark://``
masters only (YARN and Kubernetes are refused, as for ``JrsPySparkOperator``).

Where a SQL job may write (see docs/how-to/spark-sql.md):

* **paths** under the attempt's fenced folder, named by placeholders filled in at launch
  (:mod:`.sql_script`): ``INSERT OVERWRITE DIRECTORY '{jrs_output.daily}' USING parquet SELECT ...``,
  ``CREATE TABLE t USING parquet LOCATION '{jrs_output}/t' AS SELECT ...``. Fenced like a PySpark
  function's output: another attempt has another folder, and the result names the winner's.
* **tables** in a metastore (``INSERT INTO db.t``, ``CREATE TABLE db.t AS``) cannot be fenced by
  folder: a zombie attempt's late write lands in the same table. What holds is the decision and
  the lease (one live holder at a time; a holder that lost its lease stops its session). Name
  them in ``tables`` so the result records them; prefer path outputs and expose them as tables
  downstream.

The fingerprint (:func:`airflow_jrs.domain.identity.sql_fingerprint`) covers the statements as run,
before placeholders, and ``job_version``. The result's metrics: ``statements`` (how many ran),
``tables`` (when named), and the columns of the last statement when it returns one row
(``SELECT count(*) AS flights FROM ...``).
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Sequence
from typing import Any

from airflow.providers.apache.spark.operators.spark_sql import SparkSqlOperator

from airflow_jrs.domain.identity import job_id_for, sql_fingerprint
from airflow_jrs.domain.sql_script import check_placeholders, fill_placeholders, script_text, split_statements
from airflow_jrs.exceptions import JrsConfigError, JrsError
from airflow_jrs.hooks.jrs import JrsHook
from airflow_jrs.launch.provider_adapter import sql_settings
from airflow_jrs.launch.session_launcher import JobContext, SessionLauncher
from airflow_jrs.observability.lineage import with_spark_lineage
from airflow_jrs.operators.guarded import GuardedJob, execute_with_store, kill_attempt, run_job
from airflow_jrs.operators.job_params import JOB_TEMPLATE_FIELDS
from airflow_jrs.operators.links import JobResultLink
from airflow_jrs.operators.session_settings import in_process_session
from airflow_jrs.protocol import JobSpec

__all__ = ["JrsSparkSqlOperator", "SparkSqlStatementError"]

#: Rows of each statement's result shown in the task log (the CLI prints them all).
SHOWN_ROWS = 20


class SparkSqlStatementError(JrsError):
    """A statement of the script failed: names it (number, text) and carries Spark's message."""


class _SqlSessionLauncher(SessionLauncher):
    """The session launcher, remembering that it was stopped: a statement's error after that is
    the stop's effect (a kill, a lost lease), not bad SQL, and must not be reported as such."""

    stop_requested = False

    def stop(self) -> None:
        self.stop_requested = True
        super().stop()


class JrsSparkSqlOperator(SparkSqlOperator, GuardedJob):
    """Run a Spark SQL script once per job; later attempts reuse the stored result.

    Takes what the provider's ``SparkSqlOperator`` takes, and:

    :param sql: the statements, ``;``-separated, or a ``.sql``/``.hql`` file (templated). Write
        under ``{jrs_output}`` or ``{jrs_output.NAME}`` (the attempt's fenced folder, an output's
        path in it); ``{jrs_job_id}`` and ``{jrs_fence}`` are filled in too
    :param conn_id: a Spark connection (``spark_sql``/``spark`` type: its host and port are the
        master). Default: none, ``local[*]``
    :param conf: Spark conf, a dict or ``"key=value,key=value"`` as the provider takes it
    :param tables: tables the statements write, recorded in the result's metrics (they are not
        fenced: see the how-to)
    :param job_version: bump it to recompute although the SQL is unchanged (e.g. a table it reads
        was rebuilt)
    :param predecessor: ``"wait"`` (default) or ``"stop"``: a predecessor's driver still on this
        host (it dies with its task process; this covers the moment it takes)
    """

    template_fields: Sequence[str] = (*SparkSqlOperator.template_fields, *JOB_TEMPLATE_FIELDS, "tables")
    ui_color = "#fdd9b5"
    operator_extra_links = (JobResultLink(),)
    jrs_guarded = "sql"  # what the fingerprint covers; the CLI plans by it (protocol/guarded_task.py)

    def __init__(
        self,
        *,
        sql: str,
        conn_id: str | None = None,
        tables: Sequence[str] = (),
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
        super().__init__(sql=sql, conn_id=conn_id or "", **kwargs)
        self._take_job_params(locals())
        self.conn_id = conn_id
        self.tables = list(tables)
        self._launcher: _SqlSessionLauncher | None = None

    # -- the attempt --------------------------------------------------------------------------
    def statements(self) -> list[str]:
        """The rendered script's statements (a file's content for a file): what the fingerprint covers."""
        statements = split_statements(script_text(self.sql))
        if not statements:
            raise JrsConfigError(f"{self.task_id}: sql holds no statement (only blanks or comments): {self.sql!r}")
        return statements

    def execute(self, context: Any) -> dict[str, Any]:  # type: ignore[override]  # the job payload, as every guarded operator
        return execute_with_store(self, context, unsupported_by="JrsSparkSqlOperator")

    def _execute_guarded(self, context: Any, hook: JrsHook) -> dict[str, Any]:
        job_id = self.job_id = job_id_for(self.job_id, context)
        outputs = self.outputs or {"output": ""}
        statements = self.statements()
        check_placeholders(statements, outputs)
        launcher = self._launcher = _SqlSessionLauncher(
            self._runner(statements), with_spark_lineage(self._session_settings, context),
            callable_name=f"spark-sql ({len(statements)} statements)",
            log=self.log,
        )  # fmt: skip
        spec = JobSpec(job_id, sql_fingerprint(statements, self.job_version), outputs)
        return run_job(self, context, hook.jobs(), spec, launcher)

    def _runner(self, statements: list[str]) -> Any:
        """What the session launcher calls: every statement in order; the metrics (the launcher
        writes the commit marker with them after this returns, i.e. after the last statement)."""

        def run(spark: Any, job: JobContext) -> dict[str, Any]:
            filled = fill_placeholders(
                statements, output=job.output, outputs=job.outputs, job_id=job.job_id, fence=job.fence
            )
            rows: list[Any] = []
            for number, statement in enumerate(filled, 1):
                self.log.info("Statement %d of %d:\n%s", number, len(filled), statement)
                rows = self._run_statement(spark, statement, number, len(filled))
            metrics: dict[str, Any] = {"statements": len(filled)}
            if self.tables:
                metrics["tables"] = list(self.tables)
            if len(rows) == 1:  # the last statement's one row: its columns are the job's figures
                metrics.update({str(k): _plain(v) for k, v in rows[0].asDict().items()})
            return metrics

        return run

    def _run_statement(self, spark: Any, statement: str, number: int, total: int) -> list[Any]:
        try:
            rows = spark.sql(statement).take(SHOWN_ROWS + 1)
        except Exception as exc:
            if self._launcher is not None and self._launcher.stop_requested:
                raise  # the session was stopped (a kill, a lost lease): the protocol says so
            message = str(exc).strip().splitlines()
            raise SparkSqlStatementError(
                f"{self.task_id}: statement {number} of {total} failed ({type(exc).__name__}): "
                f"{' '.join(message[:3])[:1500]}\nThe statement:\n{statement}\nFix it in sql (the Rendered "
                "Template tab shows the SQL as run); the statements before it ran and nothing was recorded."
            ) from exc
        for row in rows[:SHOWN_ROWS]:
            self.log.info("  %s", row)
        if len(rows) > SHOWN_ROWS:
            self.log.info("  ... (first %d rows shown)", SHOWN_ROWS)
        return rows

    # -- the session --------------------------------------------------------------------------
    def _session_settings(self) -> tuple[str, dict[str, str]]:
        """(master, conf) as the provider's ``spark-sql`` would get them: ``master``, else the
        connection's host (and port), else ``local[*]``; ``conf`` and the executor settings as
        Spark conf (the connection's extra holds a YARN queue, not conf)."""
        conf: dict[str, Any] = {}
        given = sql_settings(self)
        raw = given.conf
        if isinstance(raw, str):
            for item in (part.strip() for part in raw.split(",") if part.strip()):
                key, sep, value = item.partition("=")
                if not sep:
                    raise JrsConfigError(
                        f"{self.task_id}: conf item {item!r} is not key=value. Pass conf as a dict or as "
                        "'key=value,key=value'."
                    )
                conf[key.strip()] = value.strip()
        elif raw:
            conf.update(raw)
        executor = {
            "spark.cores.max": given.total_executor_cores,
            "spark.executor.cores": given.executor_cores,
            "spark.executor.memory": given.executor_memory,
            "spark.executor.instances": given.num_executors,
            "spark.kerberos.keytab": given.keytab,
            "spark.kerberos.principal": given.principal,
        }
        conf.update({key: value for key, value in executor.items() if value})
        return in_process_session(
            task_id=self.task_id, operator="JrsSparkSqlOperator", conn_id=self.conn_id, conf=conf,
            app_name=f"{self.dag_id}-{self.task_id}", master=given.master, extras_as_conf=False,
        )  # fmt: skip

    # -- kill ---------------------------------------------------------------------------------
    def on_kill(self) -> None:
        """Stop the session and revoke the lease so that no result can be written after this point.
        Runs inside a signal handler on the thread that is executing: it must not raise."""
        kill_attempt(self)


def _plain(value: Any) -> Any:
    """A JSON form of a result column: numbers, strings, booleans and nulls as they are; dates and
    decimals as text (metrics are JSON)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dt.date | dt.datetime | decimal.Decimal):
        return str(value)
    return repr(value)
