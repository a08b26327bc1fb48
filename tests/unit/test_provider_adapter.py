"""Pins every Spark provider internal that :mod:`airflow_jrs.launch.provider_adapter` touches, per
supported provider version: a release that renames one, changes a method's parameters, or stops
setting an attribute where the adapter expects it fails here, naming the internal and the version.

Supporting another provider version is one row of :data:`PINS` (run the suite with that version
installed); the row of the installed version must exist, so an upgrade cannot pass unpinned.

The adapter's Airflow internal (the executor safeguard's tracker) is pinned per supported Airflow
minor the same way (:data:`AIRFLOW_MINORS`; ``scripts/older_airflow`` runs this file on each), by
what the adapter relies on: a copy of a task's operator runs under ``allow_nested_operators=False``
inside :func:`~airflow_jrs.launch.provider_adapter.executing_in_task_runner`, and only there.
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import textwrap
from contextvars import ContextVar
from functools import cached_property
from importlib.metadata import version
from pathlib import Path

import pytest
from airflow.providers.apache.spark.hooks.spark_jdbc import SparkJDBCHook
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_sql import SparkSqlOperator
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from airflow_jrs.launch import provider_adapter

DISTRIBUTION = "apache-airflow-providers-apache-spark"
INSTALLED = version(DISTRIBUTION)
CLASSES = {cls.__name__: cls for cls in (SparkSubmitHook, SparkSubmitOperator, SparkJDBCHook, SparkSqlOperator)}

#: provider version -> {(class, internal): what must hold}. A method: its parameter names. A
#: property: ``"property"``. An attribute: the methods of the class that assign or read it
#: (``__init__`` first: it exists before anything ran; then where the provider sets or uses it).
#: A constant: its value.
PINS: dict[str, dict[tuple[str, str], list[str] | str]] = {
    "6.3.4": {
        ("SparkSubmitHook", "_build_spark_submit_command"): ["self", "application"],
        ("SparkSubmitHook", "_process_spark_submit_log"): ["self", "itr"],
        ("SparkSubmitHook", "_mask_cmd"): ["self", "connection_cmd"],
        ("SparkSubmitHook", "_get_yarn_rm_base_url"): ["self"],
        ("SparkSubmitHook", "_kill_yarn_application"): ["self", "application_id"],
        ("SparkSubmitHook", "_resolved_yarn_rm_auth"): "property",
        ("SparkSubmitHook", "_env"): ["__init__", "submit"],
        ("SparkSubmitHook", "_submit_sp"): ["__init__", "submit"],
        ("SparkSubmitHook", "_yarn_application_id"): ["__init__", "_process_spark_submit_log"],
        ("SparkSubmitHook", "_driver_id"): ["__init__", "_process_spark_submit_log"],
        ("SparkSubmitHook", "_kubernetes_application_id"): ["__init__", "_process_spark_submit_log"],
        ("SparkSubmitHook", "_kubernetes_driver_pod"): ["__init__", "_process_spark_submit_log"],
        ("SparkSubmitOperator", "_get_hook"): ["self"],
        ("SparkSubmitOperator", "_hook"): ["__init__", "execute"],
        ("SparkSubmitOperator", "_K8S_DRIVER_STATUS_KEY"): "k8s_driver_status",
        ("SparkJDBCHook", "_build_jdbc_application_arguments"): ["self", "jdbc_conn"],
        ("SparkJDBCHook", "_jdbc_connection"): ["__init__"],
        ("SparkSqlOperator", "_conf"): ["__init__", "_get_hook"],
        ("SparkSqlOperator", "_master"): ["__init__", "_get_hook"],
        ("SparkSqlOperator", "_total_executor_cores"): ["__init__", "_get_hook"],
        ("SparkSqlOperator", "_executor_cores"): ["__init__", "_get_hook"],
        ("SparkSqlOperator", "_executor_memory"): ["__init__", "_get_hook"],
        ("SparkSqlOperator", "_num_executors"): ["__init__", "_get_hook"],
        ("SparkSqlOperator", "_keytab"): ["__init__", "_get_hook"],
        ("SparkSqlOperator", "_principal"): ["__init__", "_get_hook"],
    },
}
#: Public methods the adapter wraps, with the parameters it passes on.
PUBLIC = {("SparkSubmitHook", "submit"): ["self", "application", "kwargs"]}


def _mentions(cls: type, method: str, attr: str) -> bool:
    """Whether ``cls.method``'s body uses ``self.<attr>`` (assigned or read)."""
    source = textwrap.dedent(inspect.getsource(getattr(cls, method)))
    return any(
        isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.value, ast.Name) and n.value.id == "self"
        for n in ast.walk(ast.parse(source))
    )


def test_the_installed_provider_version_has_a_row():
    assert INSTALLED in PINS, (
        f"{DISTRIBUTION} {INSTALLED} is installed but tests/unit/test_provider_adapter.py pins only "
        f"{sorted(PINS)}: check every internal of airflow_jrs/launch/provider_adapter.py against {INSTALLED} "
        "and add its row (or install a pinned version)."
    )


@pytest.mark.parametrize("provider_version", sorted(PINS))
def test_every_row_pins_exactly_what_the_adapter_touches(provider_version):
    declared = {(cls, name) for cls, name, _ in provider_adapter.PINNED}
    pinned = set(PINS[provider_version])
    assert pinned == declared, (
        f"provider {provider_version}: PINS and provider_adapter.PINNED differ: "
        f"unpinned {sorted(declared - pinned)}, stale {sorted(pinned - declared)}"
    )


def test_the_adapter_names_no_provider_internal_it_does_not_declare():
    tree = ast.parse(Path(provider_adapter.__file__).read_text())
    declared = {name for _, name, _ in provider_adapter.PINNED}
    used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr.startswith("_")}
    used |= {
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant)
        and isinstance(n.value, str)
        and n.value.startswith("_")
        and n.value.isidentifier()
    }
    used |= {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("_")}
    undeclared = sorted(u for u in used if not u.startswith("__") and u not in declared)
    assert not undeclared, f"provider_adapter.py uses {undeclared}, not declared in PINNED (so not pinned here)"


KINDS = {(cls, name): kind for cls, name, kind in provider_adapter.PINNED}
_INSTALLED_PINS = sorted(PINS.get(INSTALLED, {}).items()) + sorted(PUBLIC.items())


@pytest.mark.parametrize(("internal", "expected"), _INSTALLED_PINS, ids=[f"{c}.{n}" for (c, n), _ in _INSTALLED_PINS])
def test_the_internal_is_still_there_as_pinned(internal, expected):
    cls_name, name = internal
    cls = CLASSES[cls_name]
    where = f"{cls_name}.{name} ({DISTRIBUTION} {INSTALLED})"
    kind = KINDS.get(internal, "method")
    if kind == "property":
        found = inspect.getattr_static(cls, name, None)
        assert isinstance(found, (property, cached_property)), f"{where} is no longer a property: {found!r}"
        return
    if kind == "constant":
        found = inspect.getattr_static(cls, name, None)
        assert found == expected, f"{where} changed from {expected!r} to {found!r}"
        return
    if kind == "method":
        method = getattr(cls, name, None)
        assert callable(method), f"{where} is gone (or no longer a method)"
        params = list(inspect.signature(method).parameters)
        assert params == expected, f"{where}: parameters changed from {expected} to {params}"
        return
    for method in expected:  # an instance attribute
        assert _mentions(cls, method, name), f"{where}: {cls_name}.{method} no longer sets or reads self.{name}"


def test_the_pins_check_what_they_check():
    # A renamed attribute and a changed signature are seen (the checks above are not vacuous).
    assert not _mentions(SparkSubmitHook, "__init__", "_submit_process")
    assert list(inspect.signature(SparkSubmitHook._mask_cmd).parameters) != ["self"]
    assert _mentions(SparkSubmitHook, "__init__", "_submit_sp")


#: Airflow minors whose internals of :data:`provider_adapter.AIRFLOW_PINNED` were checked (by the
#: tests below, run on that minor): the installed minor must be one, so an upgrade cannot pass unpinned.
AIRFLOW_MINORS = ("3.1", "3.2", "3.3")
AIRFLOW_INSTALLED = ".".join(version("apache-airflow").split(".")[:2])


def test_the_installed_airflow_minor_is_pinned():
    assert AIRFLOW_INSTALLED in AIRFLOW_MINORS, (
        f"Airflow {AIRFLOW_INSTALLED} is installed but tests/unit/test_provider_adapter.py pins the Airflow "
        f"internals of airflow_jrs/launch/provider_adapter.py (AIRFLOW_PINNED) for {list(AIRFLOW_MINORS)} only: "
        f"run this file on {AIRFLOW_INSTALLED}, then add it to AIRFLOW_MINORS."
    )


@pytest.mark.parametrize(("module", "cls", "name"), provider_adapter.AIRFLOW_PINNED)
def test_the_airflow_internal_is_still_there(module, cls, name):
    found = getattr(getattr(importlib.import_module(module), cls, None), name, None)
    assert isinstance(found, ContextVar), f"{module}.{cls}.{name} (Airflow {AIRFLOW_INSTALLED}) is gone: {found!r}"


def test_a_copy_of_the_task_runs_inside_executing_in_task_runner_and_only_there(monkeypatch):
    from airflow.sdk import BaseOperator
    from airflow.sdk.bases.operator import ExecutorSafeguard

    monkeypatch.setattr(ExecutorSafeguard, "test_mode", False)  # Airflow's unit_test_mode turns it off

    class Probe(BaseOperator):
        def execute(self, context):
            return "ran"

    runner = copy.copy(Probe(task_id="probe", allow_nested_operators=False))
    with pytest.raises(Exception, match="cannot be called outside of the Task Runner"):
        runner.execute({})  # the safeguard still refuses a copy outside: the check below is not vacuous
    with provider_adapter.executing_in_task_runner(runner):
        assert runner.execute({}) == "ran"
    with pytest.raises(Exception, match="cannot be called outside of the Task Runner"):
        runner.execute({})  # restored on the way out


@pytest.mark.parametrize(("package", "name"), provider_adapter.PINNED_FILES)
def test_every_provider_file_the_adapter_hands_out_is_shipped(package, name):
    """A file's place in the provider's package is pinned like a private name: a release that
    moves ``spark_jdbc_script.py`` fails here, not in a JDBC copy at run time."""
    folder = Path(importlib.import_module(package).__file__ or "").parent
    assert (folder / name).is_file(), f"{DISTRIBUTION} {INSTALLED} no longer ships {package}/{name}"
    assert provider_adapter.jdbc_script_path() == str(folder / provider_adapter.JDBC_SCRIPT)
