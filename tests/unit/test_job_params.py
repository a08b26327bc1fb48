"""The guarded operators' job parameters agree with their one table (operators/job_params.py).

Airflow's operator metaclass applies ``default_args`` only to what an ``__init__`` names, so
the signatures keep spelling the parameters out; these tests are what keeps them, the
``GuardedJob`` annotations, the ``template_fields``, the docstrings and the generated reference
from drifting apart: a default changed in one operator, a parameter one forgets, a field one
stops templating.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_jrs.operators.job_params import JOB_PARAM_NAMES, JOB_PARAMS, JOB_TEMPLATE_FIELDS

ROOT = Path(__file__).resolve().parents[2]


def _guarded_classes() -> list[type]:
    import airflow_jrs.operators as operators
    from airflow_jrs.decorators.pyspark import _JrsPySparkDecoratedOperator
    from airflow_jrs.operators.guarded import GuardedJob

    found = [getattr(operators, name) for name in operators.__all__]
    classes = [c for c in found if isinstance(c, type) and issubclass(c, GuardedJob)]
    assert len(classes) >= 5, classes  # the spark-submit, PySpark, SQL, JDBC and pipelines operators at least
    return [*classes, _JrsPySparkDecoratedOperator]


def _taken_by(cls: type, name: str) -> inspect.Parameter | None:
    """The parameter ``name`` as the first ``__init__`` of ``cls``' MRO that names it spells it
    (one that takes ``**kwargs`` hands it on to its parent, as the JDBC operator does)."""
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = inspect.signature(init).parameters
        if name in params:
            return params[name]
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            return None
    return None


@pytest.mark.parametrize("cls", _guarded_classes(), ids=lambda c: c.__name__)
def test_every_guarded_operator_takes_the_job_parameters_as_the_table_spells_them(cls: type) -> None:
    drift: dict[str, Any] = {}
    for param in JOB_PARAMS:
        taken = _taken_by(cls, param.name)
        if taken is None:
            drift[param.name] = "not taken"
        elif (taken.annotation, taken.default) != (param.annotation, param.default):
            drift[param.name] = (taken.annotation, taken.default, "table:", param.annotation, param.default)
    assert drift == {}, f"{cls.__name__} disagrees with operators/job_params.py"


@pytest.mark.parametrize("cls", _guarded_classes(), ids=lambda c: c.__name__)
def test_every_guarded_operator_templates_the_job_parameters_the_table_templates(cls: type) -> None:
    assert set(JOB_TEMPLATE_FIELDS) - set(cls.template_fields) == set()  # type: ignore[attr-defined]


def test_guarded_job_keeps_the_parameters_under_the_table_annotations() -> None:
    from airflow_jrs.operators.guarded import GuardedJob

    kept = {n: a for n, a in GuardedJob.__annotations__.items() if not n.startswith("_")}
    assert kept == {p.name: p.annotation for p in JOB_PARAMS}


def test_what_planning_reads_of_a_guarded_task_is_typed_as_the_table_says() -> None:
    """The Airflow-free protocol cannot import the operators' table; it names the few job
    parameters planning reads (``GuardedTask``), under the same annotations."""
    from airflow_jrs.protocol.guarded_task import GuardedTask

    table = {p.name: p.annotation for p in JOB_PARAMS}
    read = {n: a for n, a in GuardedTask.__annotations__.items() if n in table}
    assert read and read == {n: table[n] for n in read}


@pytest.mark.parametrize("cls", _guarded_classes(), ids=lambda c: c.__name__)
def test_every_documented_guarded_operator_documents_every_job_parameter(cls: type) -> None:
    """``help()`` shows each job parameter: the operator's own line, else the table's."""
    if not cls.__dict__.get("__doc__"):
        pytest.skip(f"{cls.__name__} has no docstring of its own")
    doc = cls.__doc__ or ""
    assert [name for name in JOB_PARAM_NAMES if doc.count(f":param {name}:") != 1] == []


def test_the_reference_renders_every_job_parameter_with_its_meaning() -> None:
    """docs/reference/operators.md's params blocks read the table for what an operator leaves to it."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from jrs_reference.params import render_params
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    rendered = render_params("airflow_jrs.operators.spark_sql.JrsSparkSqlOperator")
    for param in JOB_PARAMS:
        row = next((line for line in rendered.splitlines() if line.startswith(f"| `{param.name}` |")), "")
        assert row and not row.rstrip().endswith("|  |"), f"{param.name}: {row!r}"
    templated = next(line for line in rendered.splitlines() if line.startswith("Templated"))
    assert all(f"`{name}`" in templated for name in JOB_TEMPLATE_FIELDS), templated
