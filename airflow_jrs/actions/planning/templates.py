"""Which ``job_id`` templates a plan renders in the API server, and how: an allow-list, sandboxed.

A ``job_id`` template is DAG-author text, and the API server must run no DAG-author code
(docs/threat-model.md, "The API server runs no DAG code"). Jinja's sandbox alone is not enough:
it refuses ``_``-names, but any module reachable from the context (Airflow's ``macros`` imports
``uuid``, which carries ``os`` and ``sys``) runs code, and loops or ``'a' * 10**10`` hang or
exhaust the process. So a template is first parsed and checked against an allow-list of what a
job id needs (:func:`check`): text, ``{{ ... }}`` of the date's names (``ds``, ``ds_nodash``,
``ts``, ``ts_nodash``, ``logical_date``, ``data_interval_start``/``end``), ``ti.dag_id``,
``ti.task_id``, ``ti.map_index``, ``dag.dag_id``, ``task.task_id``, Airflow's own filters
without arguments, and ``macros.ds_add``/``macros.ds_format`` called with those names or
literals. Anything else (a statement, a loop, arithmetic, another call, a user macro) is
:class:`NotPlannable`, which the page shows as "needs the DAG file". What passes renders in an
immutable sandbox whose ``macros`` is a namespace of the two vetted functions, not the module.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

#: Longer templates are not planned (a job id is at most 200 characters).
MAX_TEMPLATE = 1000
#: Names a template may print, as Airflow's task context has them.
NAMES = frozenset({"ds", "ds_nodash", "ts", "ts_nodash", "logical_date", "data_interval_start", "data_interval_end"})
#: ``object.attribute`` a template may print: what the plan's context objects carry.
ATTRIBUTES = frozenset(
    {("ti", "dag_id"), ("ti", "task_id"), ("ti", "map_index"), ("dag", "dag_id"), ("task", "task_id")}
)
#: ``macros.<name>(...)`` a template may call: pure functions of their arguments.
MACROS = frozenset({"ds_add", "ds_format"})
RENDERABLE = (
    "ds, ds_nodash, ts, ts_nodash, logical_date, data_interval_start/end, ti.dag_id, ti.task_id, ti.map_index, "
    "dag.dag_id, task.task_id, Airflow's filters, macros.ds_add and macros.ds_format"
)


class NotPlannable(ValueError):
    """A template uses something outside the allow-list: only the DAG file can render it."""


def check(env: Any, template: str) -> None:
    """Raise :class:`NotPlannable` unless every node of ``template`` is on the allow-list."""
    from jinja2 import nodes
    from jinja2.exceptions import TemplateSyntaxError

    if len(template) > MAX_TEMPLATE:
        raise NotPlannable(f"the template is {len(template)} characters (a plan renders at most {MAX_TEMPLATE})")
    try:
        tree = env.parse(template)
    except TemplateSyntaxError as exc:
        raise NotPlannable(f"it does not parse ({exc.message})") from None
    for node in tree.body:
        if not isinstance(node, nodes.Output):
            raise NotPlannable(f"it uses a statement ({type(node).__name__})")
        for part in node.nodes:
            if not isinstance(part, nodes.TemplateData):
                _value(part, env)


def _value(node: Any, env: Any) -> None:
    from jinja2 import nodes

    if isinstance(node, nodes.Const) and isinstance(node.value, str | int):
        return
    if isinstance(node, nodes.Neg | nodes.Pos) and isinstance(node.node, nodes.Const):  # ds_add(ds, -1)
        if isinstance(node.node.value, int):
            return
    if isinstance(node, nodes.Name) and node.name in NAMES:
        return
    if isinstance(node, nodes.Getattr) and isinstance(node.node, nodes.Name):
        if (node.node.name, node.attr) in ATTRIBUTES:
            return
    if isinstance(node, nodes.Filter) and node.node is not None and not node.args and not node.kwargs:
        if node.name in env.filters:
            _value(node.node, env)
            return
    if isinstance(node, nodes.Call) and isinstance(node.node, nodes.Getattr):
        target = node.node
        if isinstance(target.node, nodes.Name) and target.node.name == "macros" and target.attr in MACROS:
            if node.kwargs or node.dyn_args or node.dyn_kwargs:
                raise NotPlannable(f"macros.{target.attr} takes positional arguments here")
            for arg in node.args:
                _value(arg, env)
            return
    raise NotPlannable(f"it uses {_describe(node)}, which a plan does not render")


def _describe(node: Any) -> str:
    from jinja2 import nodes

    if isinstance(node, nodes.Name):
        return f"the name {node.name!r}"
    if isinstance(node, nodes.Getattr):
        return f"the attribute {node.attr!r}"
    if isinstance(node, nodes.Filter):
        return f"the filter {node.name!r}"
    return f"a {type(node).__name__.lower()} expression"


def sandbox() -> Any:
    """The immutable, strict sandbox the allowed templates render in, with Airflow's filters."""
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined, cache_size=400)
    try:
        from airflow.sdk.definitions._internal.templater import FILTERS
    except ImportError:  # pragma: no cover - every supported minor has it
        FILTERS = {}
    env.filters.update(FILTERS)
    return env


def macros() -> Any:
    """``macros`` for a plan: the vetted functions only, never Airflow's module (it leads to ``os``)."""
    from airflow.sdk.execution_time.macros import ds_add, ds_format

    return SimpleNamespace(ds_add=ds_add, ds_format=ds_format)
