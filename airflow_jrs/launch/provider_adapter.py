"""The one module that names an internal of the Spark provider (apache-airflow-providers-apache-spark)
or of Airflow.

The guard needs things the provider learns or does but does not publish: the spark-submit
process it started, the application or driver id it parsed from spark-submit's output, the
command it builds (to put the supervisor in front of it), the lines it reads (to keep the tail
a FAILED result records), the YARN ResourceManager it resolved, and the JDBC script's arguments.
No public method of ``SparkSubmitHook``, ``SparkSubmitOperator`` or ``SparkJDBCHook`` hands them
out, so each is read or replaced here (and the provider's submit itself runs from here, on a
per-launch copy of the operator: :func:`run_submit`), behind a function named for what the guard needs, and
nowhere else (the unit test ``test_architecture.py`` enforces it). A provider release that
renames or reshapes one of them fails the unit test ``test_provider_adapter.py``, which pins
every name in :data:`PINNED` per supported provider version and names the one that changed.

One Airflow internal is here too, for the same reason (:data:`AIRFLOW_PINNED`, pinned by the same
test per supported Airflow minor): the executor safeguard's record of which operator the Task
Runner executes, which the per-launch copy must be in while it runs (:func:`run_submit`).
"""

from __future__ import annotations

import copy
import os
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NamedTuple

#: Every provider internal this module touches: (class, name, kind). ``kind`` is ``"method"``,
#: ``"property"``, ``"attribute"`` (set on the instance by the class's ``__init__``) or
#: ``"constant"`` (a string on the class). The pinning test checks each one, the signature of each
#: method and the value of each constant, per provider version.
PINNED: tuple[tuple[str, str, str], ...] = (
    ("SparkSubmitHook", "_build_spark_submit_command", "method"),
    ("SparkSubmitHook", "_process_spark_submit_log", "method"),
    ("SparkSubmitHook", "_mask_cmd", "method"),
    ("SparkSubmitHook", "_get_yarn_rm_base_url", "method"),
    ("SparkSubmitHook", "_kill_yarn_application", "method"),
    ("SparkSubmitHook", "_resolved_yarn_rm_auth", "property"),
    ("SparkSubmitHook", "_env", "attribute"),
    ("SparkSubmitHook", "_submit_sp", "attribute"),
    ("SparkSubmitHook", "_yarn_application_id", "attribute"),
    ("SparkSubmitHook", "_driver_id", "attribute"),
    ("SparkSubmitHook", "_kubernetes_application_id", "attribute"),
    ("SparkSubmitHook", "_kubernetes_driver_pod", "attribute"),
    ("SparkSubmitOperator", "_get_hook", "method"),
    ("SparkSubmitOperator", "_hook", "attribute"),
    ("SparkSubmitOperator", "_K8S_DRIVER_STATUS_KEY", "constant"),
    ("SparkJDBCHook", "_build_jdbc_application_arguments", "method"),
    ("SparkJDBCHook", "_jdbc_connection", "attribute"),
    ("SparkSqlOperator", "_conf", "attribute"),
    ("SparkSqlOperator", "_master", "attribute"),
    ("SparkSqlOperator", "_total_executor_cores", "attribute"),
    ("SparkSqlOperator", "_executor_cores", "attribute"),
    ("SparkSqlOperator", "_executor_memory", "attribute"),
    ("SparkSqlOperator", "_num_executors", "attribute"),
    ("SparkSqlOperator", "_keytab", "attribute"),
    ("SparkSqlOperator", "_principal", "attribute"),
)
#: Every Airflow internal this module touches: (module, class, attribute). Not Airflow's public
#: authoring API (``airflow.sdk``); the pinning test checks each one per supported Airflow minor.
AIRFLOW_PINNED: tuple[tuple[str, str, str], ...] = (("airflow.sdk.bases.operator", "ExecutorSafeguard", "tracker"),)
#: Every file of the provider's package this module hands out a path to: (package, file name). A
#: file's place in the provider's package is no published interface either; the pinning test
#: checks each is shipped by the installed provider.
JDBC_SCRIPT = "spark_jdbc_script.py"
PINNED_FILES: tuple[tuple[str, str], ...] = (("airflow.providers.apache.spark.hooks", JDBC_SCRIPT),)


# -- the spark-submit process and what the hook parsed from its output ---------------------------
def submit_process(spark_hook: Any) -> subprocess.Popen[Any] | None:
    """The spark-submit process the hook started (``SparkSubmitHook._submit_sp``), or ``None``
    before it starts: its pid goes into the intent, its exit code into a FAILED result, and
    whether it still runs decides a kill. ``submit()`` returns nothing that gives it out."""
    return getattr(spark_hook, "_submit_sp", None)


class ReportedIds(NamedTuple):
    """The ids the hook parsed from spark-submit's output so far (each ``None`` until seen)."""

    yarn_application_id: Any
    driver_id: Any
    kubernetes_application_id: Any
    kubernetes_driver_pod: Any


def reported_ids(spark_hook: Any) -> ReportedIds:
    """``SparkSubmitHook._yarn_application_id``, ``._driver_id``, ``._kubernetes_application_id`` and
    ``._kubernetes_driver_pod``: what the hook parsed while spark-submit ran, recorded in the
    intent so that a successor finds a cluster driver. The hook keeps them only on itself."""
    return ReportedIds(
        getattr(spark_hook, "_yarn_application_id", None),
        getattr(spark_hook, "_driver_id", None),
        getattr(spark_hook, "_kubernetes_application_id", None),
        getattr(spark_hook, "_kubernetes_driver_pod", None),
    )


# -- how the hook starts spark-submit and reads its output ------------------------------------------
def supervise_submission(spark_hook: Any, supervised: Callable[[list[str]], list[str]], env: Mapping[str, str]) -> None:
    """Run spark-submit as ``supervised(command)`` with ``env`` added to its environment, and with
    stdin on ``/dev/null``.

    Replaces ``SparkSubmitHook._build_spark_submit_command`` (the provider builds the command and
    starts it in ``submit`` with no public way to prefix it) and extends ``SparkSubmitHook._env``
    after the build (the build sets it from ``env_vars`` in client mode; it is what ``submit``
    hands to ``Popen``). ``submit`` (public) gets ``stdin=DEVNULL`` unless the caller passed one."""
    build = spark_hook._build_spark_submit_command
    submit = spark_hook.submit

    def submit_detached(application: str = "", **kwargs: Any) -> Any:
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        return submit(application, **kwargs)

    def build_supervised(application: str) -> list[str]:
        command = build(application)
        spark_hook._env = {**(spark_hook._env or {}), **env}
        return supervised(command)

    spark_hook.submit = submit_detached
    spark_hook._build_spark_submit_command = build_supervised


def read_along(spark_hook: Any, scan: Callable[[Iterable[Any]], Iterator[Any]]) -> None:
    """Let ``scan`` see every line of spark-submit's output on its way to the provider (``scan``
    yields each line on). Wraps ``SparkSubmitHook._process_spark_submit_log``: the provider's only
    reader of that output, which keeps what it parses on itself and offers no callback."""
    process_log = spark_hook._process_spark_submit_log
    spark_hook._process_spark_submit_log = lambda itr: process_log(scan(itr))


def secret_mask(spark_hook: Any) -> Callable[[list[str]], str] | None:
    """The hook's masking of secrets in a command line (``SparkSubmitHook._mask_cmd``), applied to
    output lines before they are kept: the provider exports no masking function of its own."""
    return getattr(spark_hook, "_mask_cmd", None)


# -- YARN ----------------------------------------------------------------------------------------------
def yarn_rm_url(spark_hook: Any) -> str:
    """The ResourceManager's base URL as the hook resolves it from the connection
    (``SparkSubmitHook._get_yarn_rm_base_url``): asking the same RM as the provider's tracking."""
    return str(spark_hook._get_yarn_rm_base_url())


def yarn_rm_auth(spark_hook: Any) -> Any:
    """The ResourceManager's credentials as the hook resolves them (the property
    ``SparkSubmitHook._resolved_yarn_rm_auth``), for the same reason."""
    return spark_hook._resolved_yarn_rm_auth


def kill_yarn_application(spark_hook: Any, application_id: str) -> None:
    """Kill a YARN application through the RM the hook knows (``SparkSubmitHook._kill_yarn_application``);
    the public ``on_kill`` only kills the hook's own submission, not a predecessor's."""
    spark_hook._kill_yarn_application(application_id)


# -- the operator's hook -------------------------------------------------------------------------------
def submit_hook_of(op: Any) -> Any:
    """The hook the provider's operator built for this attempt (``SparkSubmitOperator._hook``),
    ``None`` before ``execute`` built it: the operator keeps it only on itself."""
    return getattr(op, "_hook", None)


def state_store_keys(op: Any) -> tuple[str, ...]:
    """The task state store keys the provider's ``durable`` reads on its next ``execute``: the driver
    or application id (``external_id_key``, public) and the Kubernetes driver status it caches once
    the pod succeeded (``SparkSubmitOperator._K8S_DRIVER_STATUS_KEY``): with either left from an
    earlier try, the provider reattaches to, or reports as succeeded, a driver it did not start."""
    return (op.external_id_key, op._K8S_DRIVER_STATUS_KEY)


def build_submit_hook(op: Any) -> Any:
    """A new hook from the operator's settings (``SparkSubmitOperator._get_hook``), to ask the
    cluster what it knows: the provider has no public factory."""
    return op._get_hook()


#: How the hooks built inside :func:`run_submit` are prepared (the call's own: no operator state).
_HOOK_PREPARER: ContextVar[Callable[[Any], None] | None] = ContextVar("jrs_hook_preparer", default=None)


class PreparesSubmitHook:
    """Mixin before ``SparkSubmitOperator`` in the bases: every hook the provider's operator builds
    (``SparkSubmitOperator._get_hook``, its only hook factory, called by ``execute``) inside
    :func:`run_submit` passes through that call's ``prepare`` before it is used."""

    def _get_hook(self) -> Any:
        hook = super()._get_hook()  # type: ignore[misc]
        prepare = _HOOK_PREPARER.get()
        if prepare is not None:
            prepare(hook)
        return hook


def submit_runner(
    op: Any, *, conf: Mapping[str, Any], application_args: list[str] | None, name: str, application: str | None = None
) -> Any:
    """The provider's operator that runs one launch: a shallow copy of the task's ``op`` with the
    launch's application (``op``'s unless given), Spark conf, arguments and application name, and no
    hook yet (``SparkSubmitOperator._hook = None``). The provider reads them from its operator when it
    builds its hook (it has no other way in), and the task's own operator keeps what the user gave it."""
    runner = copy.copy(op)
    runner.conf, runner.application_args, runner.name = dict(conf), application_args, name
    if application is not None:
        runner.application = application
    runner._hook = None
    return runner


def run_submit(runner: Any, context: Any, prepare: Callable[[Any], None]) -> None:
    """The provider's own ``SparkSubmitOperator.execute`` on ``runner`` (:func:`submit_runner`), each
    hook it builds passed through ``prepare`` first (the deploy mode, the supervisor, the tail).

    Airflow wraps every operator's ``execute`` in its executor safeguard, which accepts only the
    operator its Task Runner executes (recorded in ``ExecutorSafeguard.tracker``, a context variable
    the Task Runner sets to the task's operator): on any other it logs "... cannot be called outside
    of the Task Runner!", or raises with ``allow_nested_operators=False``. ``runner`` is the task's
    operator for one launch, executing inside the task's own ``execute`` (which the safeguard already
    let through), so it is recorded as the executing operator for the call, and nothing else changes."""
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    token = _HOOK_PREPARER.set(prepare)
    with executing_in_task_runner(runner):
        try:
            SparkSubmitOperator.execute(runner, context)
        finally:
            _HOOK_PREPARER.reset(token)


@contextmanager
def executing_in_task_runner(operator: Any) -> Iterator[None]:
    """Within the block, Airflow's executor safeguard takes ``operator`` for the one its Task Runner
    executes (``airflow.sdk.bases.operator.ExecutorSafeguard.tracker``: the Task Runner's own way of
    saying so, in the same context variable); the previous value is restored on the way out."""
    from airflow.sdk.bases.operator import ExecutorSafeguard

    token = ExecutorSafeguard.tracker.set(operator)
    try:
        yield
    finally:
        ExecutorSafeguard.tracker.reset(token)


# -- JDBC ----------------------------------------------------------------------------------------------
def jdbc_script_path() -> str:
    """The provider's JDBC script (``hooks/spark_jdbc_script.py``), the application its
    ``SparkJDBCHook.submit_jdbc_job`` runs: a guarded copy runs the same file."""
    from importlib.util import find_spec

    package, name = PINNED_FILES[0]
    spec = find_spec(package)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    if not folders:
        raise ImportError(f"{package} is not installed: install apache-airflow-providers-apache-spark")
    return os.path.join(folders[0], name)


def jdbc_application_arguments(jdbc_hook: Any) -> list[str]:
    """The provider's JDBC script's arguments as ``SparkJDBCHook.submit_jdbc_job`` builds them, from
    ``SparkJDBCHook._build_jdbc_application_arguments`` and the resolved connection it takes
    (``SparkJDBCHook._jdbc_connection``): ``submit_jdbc_job`` would submit at once, unguarded."""
    return list(jdbc_hook._build_jdbc_application_arguments(jdbc_hook._jdbc_connection))


# -- spark-sql -----------------------------------------------------------------------------------------
class SqlSettings(NamedTuple):
    """What ``SparkSqlOperator`` keeps of its arguments, as its ``execute`` hands them to its hook."""

    conf: str | dict[str, Any] | None
    master: str | None
    total_executor_cores: int | None
    executor_cores: int | None
    executor_memory: str | None
    num_executors: int | None
    keytab: str | None
    principal: str | None


def sql_settings(op: Any) -> SqlSettings:
    """The settings a ``SparkSqlOperator`` was given (its ``_conf``, ``_master`` and executor
    attributes, set by its ``__init__``): the provider keeps them only as private attributes, and
    ``JrsSparkSqlOperator`` builds an in-process session from them instead of its hook."""
    return SqlSettings(
        conf=op._conf,
        master=op._master,
        total_executor_cores=op._total_executor_cores,
        executor_cores=op._executor_cores,
        executor_memory=op._executor_memory,
        num_executors=op._num_executors,
        keytab=op._keytab,
        principal=op._principal,
    )
