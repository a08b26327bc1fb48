"""The layering of docs/architecture.md, "Layers", checked from the source (imports inside functions count too).

* no module imports relatively (ruff's TID252 too), so the checks below see every edge;
* the import graph of ``airflow_jrs`` has no circle;
* the packages form layers and nothing imports upward, not even for type checking: errors,
  settings and the driver helpers; the domain; the store; the protocol; where applications run
  and how a job is viewed; the Airflow adapters; the actions (and the planning of dates they
  start from); the CLI and the page (the package root only re-exports, lazily);
* the actions import nothing of the CLI, not even inside a function or for type checking;
* the store, the lease, the pure job rules and the PySpark helpers import no Airflow;
* triggers never import operators;
* the PySpark helpers (``airflow_jrs.spark``) import nothing of airflow_jrs outside themselves,
  and importing them in a fresh interpreter loads neither Redis, Airflow, psutil nor the store;
* only ``store/`` (results, leases, intents, heartbeats, recompute and stop requests) talks to
  Redis: nobody else imports the key layout, the Lua scripts or the encoding, builds keys, or sends
  raw commands; every Lua script of the store is one of those internals;
* Redis has one owner: only ``store/redis/clients.py`` constructs a redis-py client or pool, and
  nothing outside ``store/`` reads a store's raw ``.client`` (``JobNamespace`` hands it out);
* TYPE_CHECKING imports make no circle either;
* results are written only by ``protocol/``, or on a person's request by the actions that
  ``RESULT_WRITERS`` names;
* the deploy modes have one home: no module outside ``launch/deploy_modes/`` spells an
  application-id shape (as the modes of ``registry.MODES`` declare them) or a deploy mode's master prefix.

Each rule is one test that names every offender at once (a fix-one-rerun loop costs a run per
module), each with what to do.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "airflow_jrs"
MODULES = {
    ".".join(("airflow_jrs", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__"): path
    for path in sorted(PACKAGE.rglob("*.py"))
}
#: Allowed to talk to Redis (docs/architecture.md, "Layers").
REDIS_OWNERS = (
    "airflow_jrs.store",
    "airflow_jrs.store.leases",
    "airflow_jrs.store.intents",
    "airflow_jrs.store.heartbeats",
)
#: Must stay free of Airflow: importable in milliseconds, and inside a PySpark driver.
AIRFLOW_FREE = (
    "airflow_jrs.store",
    "airflow_jrs.store.leases",
    "airflow_jrs.store.intents",
    "airflow_jrs.store.heartbeats",
    "airflow_jrs.launch.supervisor",
    "airflow_jrs.protocol.stream_requests",
    "airflow_jrs.exceptions",
    "airflow_jrs.domain",
    "airflow_jrs.settings",
    "airflow_jrs.spark",
    "airflow_jrs.protocol",
    "airflow_jrs.views",
)
#: Modules that adapt the store to Airflow: nothing Airflow-free may import them.
AIRFLOW_FACING = (
    "airflow_jrs.hooks",
    "airflow_jrs.observability",  # lineage and metrics: Airflow's surfaces, where tasks run
    "airflow_jrs.operators",
    "airflow_jrs.decorators",
    "airflow_jrs.sensors",
    "airflow_jrs.triggers",
    "airflow_jrs.cli",
    "airflow_jrs.compat",  # what differs between Airflow minors: the adapters' helper
)
#: The key layout, the Lua scripts and the encoding: nobody outside the Redis owners imports them.
#: A noun in one module keeps its Lua beside it: those scripts are named one by one.
STORE_INTERNALS = (
    "airflow_jrs.store.redis.keys",
    "airflow_jrs.store.redis.lua",
    "airflow_jrs.store.redis.result_scripts",
    "airflow_jrs.store.redis.lease_scripts",
    "airflow_jrs.store.results.serde",
    "airflow_jrs.store.redis.intents.RECORD_INTENT",
    "airflow_jrs.store.redis.intents.AMEND_INTENT",
    "airflow_jrs.store.redis.intents.CLEAR_INTENT",
    "airflow_jrs.store.redis.heartbeats.BEAT",
    "airflow_jrs.store.redis.heartbeats.END_HEARTBEAT",
    "airflow_jrs.store.redis.stop_requests.ADDRESSING",
    "airflow_jrs.store.redis.stop_requests.REQUEST_CONTROL",
    "airflow_jrs.store.redis.recompute_requests.RECORD_REQUEST",
    "airflow_jrs.store.redis.recoveries.RECORD_RECOVERY",
)
RAW_COMMANDS = {
    "eval", "evalsha", "register_script", "hget", "hgetall", "hmget", "hset", "smembers", "sadd", "srem",
    "zadd", "zrange", "zrevrange", "zrangebyscore", "lrange", "lpush", "mget", "publish", "pubsub",
    "pexpire", "pttl", "scan_iter", "execute_command",
}  # fmt: skip


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, *, type_only: bool = False) -> list[tuple[str, list[str]]]:
    """(module, names) of every import statement, inside functions too, and in TYPE_CHECKING blocks
    only with ``type_only`` (a runtime circle is the other rules' concern; a reader follows both)."""
    found: list[tuple[str, list[str]]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node) and not type_only:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, [alias.name for alias in node.names]))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _relative_imports(tree: ast.AST) -> list[str]:
    """Lines of ``from . import x`` and ``from .x import y``: the edges ``_imports`` cannot see."""
    return [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level
    ]


def test_no_module_imports_relatively():
    # ruff's TID252 bans them too (pyproject.toml); this keeps the suite honest on its own.
    offenders = []
    for name in sorted(MODULES):
        found = _relative_imports(_tree(MODULES[name].read_text()))
        if found:
            offenders.append(f"{name}: {'; '.join(found)}")
    _offenders(
        "no relative import in airflow_jrs (the layer and circle checks read absolute ones only): spell "
        "the module from airflow_jrs down",
        offenders,
    )


def test_the_relative_import_check_sees_one():
    sample = "from . import a\nfrom ..b import c\nfrom airflow_jrs.d import e\nimport f\n"
    assert [f.split(":")[0] for f in _relative_imports(ast.parse(sample))] == ["line 1", "line 2"]


def _edges(name: str, *, type_only: bool = False) -> set[str]:
    """Modules of airflow_jrs that ``name`` imports (``from pkg import submodule`` counts as the submodule)."""
    out = set()
    for module, names in _imports_of(MODULES[name].read_text(), type_only):
        if not module.startswith("airflow_jrs"):
            continue
        subs = {f"{module}.{n}" for n in names if f"{module}.{n}" in MODULES}
        out |= subs or ({module} if module in MODULES else set())
    out.discard(name)
    return out


@cache
def _tree(source: str) -> ast.Module:
    """A module's text parsed once for every rule (read only: no rule changes a tree)."""
    return ast.parse(source)


@cache
def _imports_of(source: str, type_only: bool) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """:func:`_imports` of one module's text, kept: the layer rule and each planted variant of it
    walk the same trees (seconds a walk); a changed or planted text is walked anew."""
    return tuple((module, tuple(names)) for module, names in _imports(_tree(source), type_only=type_only))


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _offenders(rule: str, offenders: list[str]) -> None:
    """Fail once, listing every offender of ``rule`` (which says what to do), or pass."""
    if offenders:
        pytest.fail(f"{len(offenders)} offender(s) of the rule: {rule}\n" + "\n".join(f"  - {o}" for o in offenders))


def _circles(graph: dict[str, set[str]]) -> list[str]:
    """Every circle a depth-first walk of ``graph`` closes, one per edge that closes it."""
    state: dict[str, int] = {}
    path: list[str] = []
    found: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                found.append(" -> ".join([*path[path.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)
    return found


def test_the_import_graph_has_no_circle():
    _offenders(
        "no import circle (move what both sides need one layer down, or import it where it is used)",
        _circles({name: _edges(name) for name in MODULES}),
    )


def test_the_circle_check_names_every_circle():
    graph = {"a": {"b"}, "b": {"a", "c"}, "c": {"d"}, "d": {"c"}, "e": set()}
    assert _circles(graph) == ["a -> b -> a", "c -> d -> c"]


CLI = "airflow_jrs.cli"
#: Bottom to top, one package per layer, or siblings that know nothing of each other: a module
#: imports from its own package or the layers below, never from above, never from a sibling.
LAYERS = (
    ("airflow_jrs.spark",),  # what a PySpark driver imports: the standard library only
    ("airflow_jrs.exceptions",),
    ("airflow_jrs.domain",),
    ("airflow_jrs.settings",),
    ("airflow_jrs.store",),
    ("airflow_jrs.protocol",),
    ("airflow_jrs.launch", "airflow_jrs.views"),  # running Spark; showing a job
    ("airflow_jrs.compat", "airflow_jrs.observability"),  # what differs per Airflow minor; lineage, metrics
    ("airflow_jrs.hooks",),
    ("airflow_jrs.triggers",),
    ("airflow_jrs.operators", "airflow_jrs.sensors"),
    ("airflow_jrs.decorators",),
    ("airflow_jrs.actions",),  # every write a person makes, and the planning of dates it starts from
    (CLI, "airflow_jrs.plugins"),  # the terminal and the page: both call the actions, neither the other
)
#: The package root and the provider entry point sit above every layer (they re-export).
ABOVE_LAYERS = ("airflow_jrs", "airflow_jrs.get_provider_info")


def _layer(name: str) -> int:
    return next(i for i, prefixes in enumerate(LAYERS) if _within(name, prefixes))


def _above_or_sibling(imported: str, importer: str) -> bool:
    mine, theirs = _layer(importer), _layer(imported)
    return theirs > mine or (theirs == mine and _package(imported) != _package(importer))


def _package(name: str) -> str:
    """The entry of LAYERS ``name`` falls under (its package, or a top-level module)."""
    return next(prefix for prefixes in LAYERS for prefix in prefixes if _within(name, (prefix,)))


#: TYPE_CHECKING imports still pointing upward, each (importer, imported) a known knot to cut, not a
#: precedent; a runtime import of the same pair is an offender all the same. None is left (the last
#: two, launch/ typed against the hook, went when launch/ was handed the namespace: issue 44 item 1).
TYPE_ONLY_UPWARD_KNOTS: set[tuple[str, str]] = set()


def test_every_module_has_a_layer_and_imports_nothing_above_it():
    # A module no layer names would escape the check: placing it is part of adding it. A type-only
    # import counts: a reader of the lower layer must still follow it upward.
    names = sorted(n for n in MODULES if n not in ABOVE_LAYERS)
    placed = {n for n in MODULES if any(_within(n, prefixes) for prefixes in LAYERS)}
    offenders = [f"{n} is in no layer of LAYERS" for n in names if n not in placed]
    knots_seen = set()
    for name in sorted(placed - set(ABOVE_LAYERS)):
        runtime = _edges(name)
        every = runtime | _edges(name, type_only=True)
        upward = sorted(m for m in every if m in placed and _above_or_sibling(m, name))
        knots_seen |= {(name, m) for m in upward if (name, m) in TYPE_ONLY_UPWARD_KNOTS and m not in runtime}
        upward = [m for m in upward if (name, m) not in knots_seen]
        if upward:
            offenders.append(f"{name} (layer {_layer(name)}) imports from above or a sibling: {upward}")
    _offenders(
        "every module is in a layer of LAYERS (add it to the one it belongs to) and imports nothing from a "
        "layer above its own, TYPE_CHECKING imports included (move the shared part down, or type against a "
        "Protocol below)",
        offenders,
    )
    _offenders(
        "TYPE_ONLY_UPWARD_KNOTS names only type-only imports from above: drop these",
        sorted(f"{a} -> {b}" for a, b in TYPE_ONLY_UPWARD_KNOTS - knots_seen),
    )


def _assert_rule_catches(
    rule: Callable[[], None], module: str, source: str, match: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plant ``source`` as ``module`` (only this test's view of the tree) and check that ``rule``
    fails naming ``match``: a rule that cannot fail proves nothing."""
    sample = tmp_path / "planted.py"
    sample.write_text(source)
    monkeypatch.setitem(MODULES, module, sample)
    with pytest.raises(pytest.fail.Exception, match=re.escape(match)):
        rule()


@pytest.mark.parametrize(
    "source",
    [
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from airflow_jrs.operators.spark import X\n",
        "import typing\nif typing.TYPE_CHECKING:\n    from airflow_jrs.hooks import jrs\n",
        "def f():\n    from airflow_jrs.actions import writes\n",
    ],
)
def test_the_layer_rule_fails_on_a_planted_upward_import(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _assert_rule_catches(
        test_every_module_has_a_layer_and_imports_nothing_above_it, "airflow_jrs.launch.planted", source,
        "airflow_jrs.launch.planted (layer 6) imports from above", tmp_path, monkeypatch,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("package", "source", "layer"),
    [
        ("plugins", "from airflow_jrs.cli import common\n", 13),
        ("cli", "from airflow_jrs.plugins import security\n", 13),
        ("hooks", "from airflow_jrs.operators import guarded\n", 8),
        ("views", "from airflow_jrs.launch import durable\n", 6),
    ],
)
def test_the_layer_rule_fails_on_a_planted_sibling_or_adapter_import(
    package: str, source: str, layer: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Layers per package: the page and the terminal know nothing of each other, a hook nothing of
    an operator, a view nothing of a launcher."""
    module = f"airflow_jrs.{package}.planted"
    rule = test_every_module_has_a_layer_and_imports_nothing_above_it
    _assert_rule_catches(rule, module, source, f"{module} (layer {layer})", tmp_path, monkeypatch)


def test_a_knot_is_no_licence_for_a_runtime_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The knots excuse the type-only import they name, not the same edge at runtime.
    _assert_rule_catches(
        test_every_module_has_a_layer_and_imports_nothing_above_it, "airflow_jrs.launch.submission",
        "from airflow_jrs.hooks.jrs import JrsHook\n", "airflow_jrs.launch.submission (layer 6)", tmp_path, monkeypatch,
    )  # fmt: skip


def _cli_imports(name: str) -> list[str]:
    """Every import of ``airflow_jrs.cli`` in module ``name``: at module level, inside functions, under
    TYPE_CHECKING, relative (``from ..cli import x``) or by name (``importlib.import_module("...")``)."""
    tree = _tree(MODULES[name].read_text())
    package = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            targets = [module, *(f"{module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            callee = ast.unparse(node.func)
            if callee.endswith(("import_module", "__import__")):
                targets = [str(node.args[0].value)]
        if any(_within(t, (CLI,)) for t in targets):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_actions_import_nothing_of_the_cli():
    # The layer test above counts a package by its modules and reads no relative or by-name import:
    # this rule is stricter, for the boundary the UI page depends on (it calls the actions, never cli/).
    offenders = []
    for name in sorted(n for n in MODULES if _within(n, ("airflow_jrs.actions",))):
        found = _cli_imports(name)
        if found:
            offenders.append(f"{name}: {'; '.join(found)}")
    _offenders(
        "nothing in actions/ imports airflow_jrs.cli (the page calls the actions too): move what both need "
        "into actions/ (planning/ for planning a DAG's dates) or below (views/words.py for plural and stamp), "
        "and raise ActionError with a cli= hint instead of CliError",
        offenders,
    )


def test_the_cli_import_check_sees_every_form(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from typing import TYPE_CHECKING\n"
        "import airflow_jrs.cli.common\n"
        "from ..cli import plan\n"
        "if TYPE_CHECKING:\n    from airflow_jrs.cli.common import Ctx\n"
        "def f():\n    from airflow_jrs import cli\n    return importlib.import_module('airflow_jrs.cli.plan')\n"
        "from airflow_jrs.actions import ActionError\n"
    )
    monkeypatch.setitem(MODULES, "airflow_jrs.actions.sample", sample)
    assert [f.split(":")[0] for f in _cli_imports("airflow_jrs.actions.sample")] == [
        "line 2", "line 3", "line 5", "line 7", "line 8",
    ]  # fmt: skip


def test_nothing_imports_the_package_root_or_the_provider_entry_point():
    # The root re-exports from every layer: importing it from below would be a circle in disguise.
    importers = sorted(n for n in MODULES if n not in ABOVE_LAYERS and set(_edges(n)) & set(ABOVE_LAYERS))
    assert not importers, importers


def test_store_lease_rules_and_spark_helpers_import_no_airflow():
    offenders = []
    for name in sorted(n for n in MODULES if _within(n, AIRFLOW_FREE)):
        tree = _tree(MODULES[name].read_text())
        airflow = [m for m, _ in _imports(tree) if m == "airflow" or m.startswith("airflow.")]
        upward = [m for m in _edges(name) if _within(m, AIRFLOW_FACING)]
        if airflow or upward:
            offenders.append(f"{name} imports {airflow + upward}")
    _offenders(
        "the modules of AIRFLOW_FREE import neither Airflow nor an Airflow adapter (they run inside a PySpark "
        "driver and must import in milliseconds): move the Airflow part into hooks/, operators/ or cli/",
        offenders,
    )


def test_triggers_never_import_operators():
    offenders = []
    for name in sorted(n for n in MODULES if _within(n, ("airflow_jrs.triggers",))):
        found = sorted(m for m in _edges(name) if _within(m, ("airflow_jrs.operators", "airflow_jrs.sensors")))
        if found:
            offenders.append(f"{name} imports {found}")
    _offenders(
        "triggers never import operators or sensors (the triggerer must not load them): "
        "move what both need below them (protocol/ or launch/)",
        offenders,
    )


def test_only_the_store_the_lease_and_the_intent_talk_to_redis():
    offenders = []
    for name in sorted(n for n in MODULES if not _within(n, REDIS_OWNERS)):
        source = MODULES[name].read_text()
        tree = ast.parse(source)
        internals = [
            m
            for m, names in _imports(tree)
            for target in [m, *(f"{m}.{n}" for n in names)]
            if target in STORE_INTERNALS
        ]
        if internals:
            offenders.append(f"{name} imports the store's internals: {internals}")
        if "KeySpace" in {n for _, ns in _imports(tree) for n in ns}:
            offenders.append(f"{name} builds Redis keys (imports KeySpace)")
        if "jrs:{" in source:
            offenders.append(f"{name} spells a Redis key (jrs:{{...)")
        calls = sorted(
            {
                node.func.attr
                for node in ast.walk(tree)
                if isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in RAW_COMMANDS
            }
        )
        if calls:
            offenders.append(f"{name} sends raw Redis commands: {calls}")
    _offenders(
        "only store/ (REDIS_OWNERS) talks to Redis: ask the store, the lease or the intent for it instead",
        offenders,
    )


def test_every_lua_script_of_the_store_is_an_internal():
    # A script added beside its noun must not escape the rule above by living in a public module.
    import importlib

    offenders = []
    for name in sorted(n for n in MODULES if _within(n, ("airflow_jrs.store",))):
        module = importlib.import_module(name)
        tree = _tree(MODULES[name].read_text())
        own = {
            t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)
        }
        for attr in sorted(own):
            value = getattr(module, attr)
            if isinstance(value, str) and "redis.call(" in value:
                if not any(target in STORE_INTERNALS for target in (name, f"{name}.{attr}")):
                    offenders.append(f"{name}.{attr}")
    _offenders(
        "every Lua script of the store is in STORE_INTERNALS (its module, or the script by name when its noun "
        "is one public module): add it there",
        offenders,
    )


def test_the_spark_helpers_import_only_themselves():
    offenders = []
    for name in sorted(n for n in MODULES if _within(n, ("airflow_jrs.spark",))):
        outside = sorted(m for m in _edges(name) if not _within(m, ("airflow_jrs.spark",)))
        if outside:
            offenders.append(f"{name} imports {outside}")
    _offenders(
        "airflow_jrs.spark imports nothing of airflow_jrs outside itself (a PySpark driver may lack it): "
        "copy the small part it needs into airflow_jrs.spark",
        offenders,
    )


def test_importing_the_spark_helpers_loads_no_redis_airflow_psutil_or_store():
    # A fresh interpreter: this one has imported everything already. The package root runs
    # first, so this proves its laziness too.
    helpers = sorted(n for n in MODULES if _within(n, ("airflow_jrs.spark",)))
    forbidden = ["redis", "airflow", "psutil", "airflow_jrs.store"]
    code = (
        "import importlib, json, sys\n"
        f"for name in {helpers!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(json.dumps(sorted(m for m in sys.modules "
        f"if any(m == f or m.startswith(f + '.') for f in {forbidden!r}))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stderr
    assert len(helpers) >= 6
    assert json.loads(done.stdout) == []


def test_the_checks_see_what_they_check():
    # A check that finds no modules, or no edges, proves nothing.
    assert len(MODULES) > 30
    assert "airflow_jrs.store.redis.results" in _edges("airflow_jrs.store")
    assert "airflow_jrs.store.redis.lease_scripts" in _edges("airflow_jrs.store.redis.leases")
    assert "airflow_jrs.operators.spark" in _edges("airflow_jrs.operators.start_in_triggerer")


#: redis-py's client and pool constructors: only ``store/redis/clients.py`` calls them, so the ``[jrs]``
#: timeouts and retry policy cannot be copied by hand (and drift) anywhere else.
CLIENT_CONSTRUCTORS = {
    "Redis", "RedisCluster", "ConnectionPool", "BlockingConnectionPool", "from_url", "from_pool",
    "Sentinel", "SentinelConnectionPool",  # a primary's client comes from a Sentinel: that is seen
}  # fmt: skip
CLIENT_BUILDER = "airflow_jrs.store.redis.clients"


def _redis_aliases(tree: ast.AST) -> tuple[set[str], set[str]]:
    """(names bound to a redis module, constructor names imported from one): what a call may
    reach redis-py's constructors through."""
    modules, constructors = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] == "redis"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "redis":
            for alias in node.names:
                if alias.name in CLIENT_CONSTRUCTORS:
                    constructors.add(alias.asname or alias.name)
                else:
                    modules.add(alias.asname or alias.name)  # ``from redis import asyncio as aioredis``
    return modules, constructors


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _client_constructions(tree: ast.AST) -> list[str]:
    modules, constructors = _redis_aliases(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in constructors:
            found.append(f"line {node.lineno}: {func.id}(...)")
        elif isinstance(func, ast.Attribute) and func.attr in CLIENT_CONSTRUCTORS:
            # redis.Redis(...), redis_lib.asyncio.RedisCluster(...), redis.Redis.from_url(...)
            if _root(func) in modules:
                found.append(f"line {node.lineno}: {ast.unparse(func)}(...)")
    return found


def test_only_store_clients_builds_a_redis_client():
    offenders = []
    for name in sorted(n for n in MODULES if n != CLIENT_BUILDER):
        found = _client_constructions(_tree(MODULES[name].read_text()))
        if found:
            offenders.append(f"{name} builds a redis-py client or pool itself: {found}")
    _offenders(
        f"only {CLIENT_BUILDER} builds a redis-py client or pool: build it through "
        "sync_client, bounded_client, async_client, client_from_url or fresh_client",
        offenders,
    )


def test_the_client_check_sees_a_construction():
    sample = (
        "import redis as r\nimport redis.asyncio as aio\nfrom redis import RedisCluster\n"
        "r.Redis(host='h')\naio.Redis()\nRedisCluster(host='h')\nr.Redis.from_url('redis://h')\nr.ConnectionPool()\n"
        "import redis.sentinel as s\ns.Sentinel([('h', 26379)]).master_for('m')\n"
    )
    assert len(_client_constructions(ast.parse(sample))) == 6
    assert len(_client_constructions(ast.parse(MODULES[CLIENT_BUILDER].read_text()))) >= 4


#: Where a ``.client`` attribute may be read outside the store (each says why). The check is by
#: name: an import of a ``...client`` module (``pyspark.sql.connect.client``) is no attribute read.
#: None is left: the namespace that builds every noun from its client moved into the store
#: (``store/redis/namespace.py``, issue 44 item 1).
CLIENT_READERS: dict[str, str] = {}


def _client_reads(tree: ast.AST) -> list[int]:
    """Lines reading an attribute ``client`` (imports of a ``...client`` module are no reads)."""
    return sorted({node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "client"})


def test_nothing_outside_the_store_reaches_for_a_raw_client():
    offenders, stale = [], []
    for name in sorted(n for n in MODULES if not _within(n, ("airflow_jrs.store",))):
        reads = _client_reads(_tree(MODULES[name].read_text()))
        if name in CLIENT_READERS:
            if not reads:
                stale.append(f"{name} no longer reads .client")
        elif reads:
            offenders.append(f"{name} reads a store's raw client (.client, lines {reads})")
    _offenders(
        "nothing outside store/ reads a store's raw .client: ask the store or "
        "airflow_jrs.store.namespace.JobNamespace (results, intents, heartbeats, lease, server_facts, ...) instead",
        offenders,
    )
    _offenders("CLIENT_READERS names only modules that read .client: drop these from it", stale)


def _key_spellings(tree: ast.AST) -> list[int]:
    """Lines reading a store part's key names (``.keys`` not called: ``dict.keys()`` is no read)
    or naming ``KeySpace``."""
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    return sorted(
        {
            node.lineno
            for node in ast.walk(tree)
            if (isinstance(node, ast.Attribute) and node.attr == "keys" and id(node) not in called)
            or (isinstance(node, ast.Name) and node.id == "KeySpace")
            or (isinstance(node, ast.alias) and node.name == "KeySpace")
        }
    )


def test_nothing_outside_the_store_spells_a_redis_key():
    offenders = [
        f"{name} spells a Redis key (lines {lines})"
        for name in sorted(n for n in MODULES if not _within(n, ("airflow_jrs.store",)))
        if (lines := _key_spellings(_tree(MODULES[name].read_text())))
    ]
    _offenders(
        "nothing outside store/ names a Redis key (a store part's .keys, KeySpace): the key layout is the "
        "store's (docs/architecture.md); ask the store part where it keeps a thing (StopRequests.location)",
        offenders,
    )


@pytest.mark.parametrize(
    "source",
    [
        "def f(jobs):\n    return jobs.stop_requests.keys.control('j')\n",
        "from airflow_jrs.store.redis.keys import KeySpace\n",
    ],
)
def test_the_key_rule_fails_on_a_planted_key(source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _assert_rule_catches(
        test_nothing_outside_the_store_spells_a_redis_key, "airflow_jrs.protocol.planted", source,
        "airflow_jrs.protocol.planted spells a Redis key", tmp_path, monkeypatch,
    )  # fmt: skip


#: TYPE_CHECKING edges still closing a circle, each a known knot to cut (not a precedent).
TYPE_CHECKING_KNOTS: set[tuple[str, str]] = set()


def test_the_type_checking_imports_make_no_circle_either():
    # A TYPE_CHECKING import is still a dependency a reader must follow (hooks/jrs.py and
    # hooks/store_failures.py were one such knot); only the package root's lazy re-exports differ.
    def edges(name: str) -> set[str]:
        out = set()
        for node in ast.walk(_tree(MODULES[name].read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.startswith("airflow_jrs"):
                    subs = {f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in MODULES}
                    out |= subs or ({node.module} if node.module in MODULES else set())
        return {m for m in out - {name} - set(ABOVE_LAYERS) if (name, m) not in TYPE_CHECKING_KNOTS}

    _offenders(
        "no import circle, TYPE_CHECKING imports included (type against a Protocol one layer down; "
        "TYPE_CHECKING_KNOTS lists the known ones)",
        _circles({name: edges(name) for name in MODULES if name not in ABOVE_LAYERS}),
    )


#: The one module that names an internal of the Spark provider (docs/architecture.md, "Layers"); every
#: name it uses is pinned per provider version by tests/unit/test_provider_adapter.py.
PROVIDER_ADAPTER = "airflow_jrs.launch.provider_adapter"
#: Modules outside this brief's reach that still touch one, each a known knot (not a precedent).
PROVIDER_INTERNAL_KNOTS: dict[str, set[str]] = {
    # module -> provider internals it may still name, each with its reason. Empty: only the
    # adapter names one.
}
_ACCESSORS = {"getattr", "setattr", "hasattr", "delattr"}


def _provider_internals() -> tuple[set[str], set[str]]:
    """(private names, class names) of the installed Spark provider, read from its source: every
    ``def _name`` and ``self._name`` of its classes (name-mangled ``__name`` left out)."""
    from importlib.metadata import distribution

    spark = distribution("apache-airflow-providers-apache-spark").locate_file("airflow/providers/apache/spark")
    root = Path(str(spark))
    names, classes = set(), set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                classes.add(node.name)
                for sub in ast.walk(node):
                    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        names.add(sub.name)
                    elif isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "self":
                        names.add(sub.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}, classes


def _provider_touches(
    sources: dict[str, str], internals: set[str], provider_classes: set[str]
) -> dict[str, list[tuple[str, str]]]:
    """Per module, each place that reads, writes or overrides a provider internal: ``x._name``,
    ``getattr(x, "_name")`` and friends, or ``def _name`` in a subclass of a provider class.
    ``self._name`` in a class that does not derive from the provider is the class's own.
    Each place is (the internal, where and how)."""
    trees = {name: ast.parse(text) for name, text in sources.items()}
    derived = set(provider_classes)
    while True:  # subclasses of subclasses (JrsSparkJDBCOperator of JrsSparkSubmitOperator)
        more = {
            c.name
            for tree in trees.values()
            for c in ast.walk(tree)
            if isinstance(c, ast.ClassDef)
            and any((b.id if isinstance(b, ast.Name) else getattr(b, "attr", None)) in derived for b in c.bases)
        }
        if more <= derived:
            break
        derived |= more
    found: dict[str, list[tuple[str, str]]] = {}

    def visit(name: str, node: ast.AST, in_provider_class: bool | None) -> None:
        where = f"line {getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.ClassDef):
            in_provider_class = node.name in derived
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and in_provider_class and node.name in internals:
            found.setdefault(name, []).append((node.name, f"{where}: overrides {node.name}"))
        elif isinstance(node, ast.Attribute) and node.attr in internals:
            own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls") and in_provider_class is False
            if not own:
                found.setdefault(name, []).append((node.attr, f"{where}: {ast.unparse(node)}"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _ACCESSORS:
            named = [a.value for a in node.args[1:2] if isinstance(a, ast.Constant) and a.value in internals]
            if named:
                found.setdefault(name, []).append((named[0], f"{where}: {node.func.id}(..., {named[0]!r})"))
        for child in ast.iter_child_nodes(node):
            visit(name, child, in_provider_class)

    for name, tree in trees.items():
        visit(name, tree, None)
    return found


def test_only_the_provider_adapter_names_a_spark_provider_internal():
    internals, provider_classes = _provider_internals()
    sources = {name: path.read_text() for name, path in MODULES.items() if name != PROVIDER_ADAPTER}
    found = _provider_touches(sources, internals, provider_classes)
    offenders = {
        name: [place for internal, place in places if internal not in PROVIDER_INTERNAL_KNOTS.get(name, ())]
        for name, places in found.items()
    }
    offenders = {name: places for name, places in offenders.items() if places}
    assert not offenders, (
        "only airflow_jrs/launch/provider_adapter.py may name a Spark provider internal (a provider release "
        "renames them without notice; the adapter's are pinned per version by tests/unit/test_provider_adapter.py). "
        "Call or add an adapter function instead:\n"
        + "\n".join(f"  {name}: {'; '.join(places)}" for name, places in sorted(offenders.items()))
    )
    for name, names in PROVIDER_INTERNAL_KNOTS.items():
        assert name in found, f"{name} no longer touches {sorted(names)}: drop it from PROVIDER_INTERNAL_KNOTS"


def test_the_provider_internal_check_sees_a_touch():
    internals, classes = _provider_internals()
    assert {"_submit_sp", "_build_spark_submit_command", "_get_hook", "_hook"} <= internals
    assert {"SparkSubmitHook", "SparkSubmitOperator"} <= classes
    sample = (
        "class Own:\n    def f(self):\n        return self._hook\n"  # its own attribute: no touch
        "class Op(SparkSubmitOperator):\n    def _get_hook(self):\n        return self._hook\n"
        "def g(h):\n    getattr(h, '_submit_sp', None)\n    h._driver_id\n"
    )
    found = [place for _, place in _provider_touches({"m": sample}, internals, classes)["m"]]
    assert found == [
        "line 5: overrides _get_hook", "line 6: self._hook", "line 8: getattr(..., '_submit_sp')",
        "line 9: h._driver_id",
    ], found  # fmt: skip


#: The Spark provider's package: a path into its files is as private as a name of its classes.
PROVIDER_PACKAGE = "airflow.providers.apache.spark"


def _provider_file_paths(tree: ast.AST) -> list[str]:
    """Where ``tree`` builds a path into the provider's package: ``<module>.__file__`` (or
    ``__path__``) of a module imported from it, or its package's resources by name."""
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.startswith(PROVIDER_PACKAGE)}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PROVIDER_PACKAGE):
            modules |= {a.asname or a.name for a in node.names}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("__file__", "__path__"):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and (
                base.id in modules or ast.unparse(node.value).startswith(PROVIDER_PACKAGE)
            ):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(PROVIDER_PACKAGE):
            parent_call = any(
                isinstance(c, ast.Call)
                and node in c.args
                and getattr(c.func, "attr", getattr(c.func, "id", ""))
                in ("files", "find_spec", "resource_filename", "as_file")
                for c in ast.walk(tree)
            )
            if parent_call:
                found.append(f"line {node.lineno}: the files of {node.value!r}")
    return found


def test_only_the_provider_adapter_builds_a_path_into_the_spark_providers_files():
    offenders = [
        f"{name}: {place}"
        for name, path in sorted(MODULES.items())
        if name != PROVIDER_ADAPTER
        for place in _provider_file_paths(ast.parse(path.read_text()))
    ]
    _offenders(
        "only airflow_jrs/launch/provider_adapter.py may build a path into the Spark provider's package (a "
        "release moves its files without notice; the adapter's PINNED_FILES are checked by "
        "tests/unit/test_provider_adapter.py): call or add an adapter function instead",
        offenders,
    )


@pytest.mark.parametrize(
    "source",
    [
        "from airflow.providers.apache.spark.hooks import spark_jdbc as j\nP = j.__file__\n",
        "import airflow.providers.apache.spark.hooks\nP = airflow.providers.apache.spark.hooks.__file__\n",
        "from importlib.resources import files\nP = files('airflow.providers.apache.spark.hooks')\n",
    ],
)
def test_the_provider_file_rule_fails_on_a_planted_path(source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    _assert_rule_catches(
        test_only_the_provider_adapter_builds_a_path_into_the_spark_providers_files, "airflow_jrs.operators.planted",
        source, "airflow_jrs.operators.planted: line 2", tmp_path, monkeypatch,
    )  # fmt: skip


#: The result writes of :class:`~airflow_jrs.store.results.base.JobResultStore` (its public write methods).
RESULT_WRITES = {
    "create_dirty_result", "mark_result_as_clean", "forget_result", "release_quarantine", "purge_clean_entries",
}  # fmt: skip


#: Where a result is written outside protocol/, each on a person's request (docs/architecture.md,
#: "Layers": actions/ holds every write a person makes); each says why.
RESULT_WRITERS = {
    "airflow_jrs.actions.writes": "forget, mark clean, purge and release from quarantine, for the CLI and the page",
    "airflow_jrs.actions.recompute": "forgets what a person previewed for recompute, before clearing its tasks",
}
#: Modules that still write a result outside protocol/ and actions/, each a known violation to
#: move into actions/ (not a precedent).
RESULT_WRITE_KNOTS: dict[str, str] = {}
#: Where the writes are defined, and the writer (docs/architecture.md, "Layers").
RESULT_WRITE_HOMES = ("airflow_jrs.store", "airflow_jrs.protocol")


def _action_modules(tree: ast.AST) -> set[str]:
    """Names bound to a module of ``airflow_jrs.actions`` (``from airflow_jrs.actions import writes``):
    ``writes.release_quarantine(...)`` calls the action, which guards the write, not the store."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full in MODULES and _within(full, ("airflow_jrs.actions",)):
                    bound.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            bound |= {a.asname for a in node.names if a.asname and _within(a.name, ("airflow_jrs.actions",))}
    return bound


def _result_writes(tree: ast.AST) -> list[str]:
    """Lines calling a result write, by method name (whatever store object it is called on), but not
    an action of the same name."""
    actions = _action_modules(tree)
    return [
        f"line {node.lineno}: {ast.unparse(node.func)}(...)"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in RESULT_WRITES
        and not (isinstance(node.func.value, ast.Name) and node.func.value.id in actions)
    ]


def test_only_the_protocol_and_the_actions_write_a_result():
    offenders, stale = [], []
    for name in sorted(n for n in MODULES if not _within(n, RESULT_WRITE_HOMES)):
        found = _result_writes(_tree(MODULES[name].read_text()))
        if name in RESULT_WRITERS or name in RESULT_WRITE_KNOTS:
            if not found:
                stale.append(f"{name} no longer writes a result")
        elif found:
            offenders.append(f"{name} writes a result: {found}")
    _offenders(
        "results are written only by protocol/ (docs/architecture.md, Layers), or on a person's request by the "
        "actions of RESULT_WRITERS: a launcher returns facts and the protocol decides and writes (call or add a "
        "function of airflow_jrs.protocol, e.g. stopping.record_unless_succeeded); the CLI and the page call "
        "airflow_jrs.actions.writes",
        offenders,
    )
    _offenders("RESULT_WRITERS and RESULT_WRITE_KNOTS name only modules that write a result: drop these", stale)


def test_the_result_write_check_sees_a_write():
    base = ast.parse((PACKAGE / "store" / "results" / "base.py").read_text())
    store = next(n for n in ast.walk(base) if isinstance(n, ast.ClassDef) and n.name == "JobResultStore")
    public = {f.name for f in store.body if isinstance(f, ast.FunctionDef) and not f.name.startswith("_")}
    assert RESULT_WRITES <= public, RESULT_WRITES - public
    sample = (
        "from airflow_jrs.actions import writes\n"
        "jobs.results.create_dirty_result(r, fence=1)\nstore.forget_result('j')\nstore.get_entry('j')\n"
        "writes.release_quarantine(store, 'j', actor, where)\n"  # the action, not the store
    )
    assert _result_writes(ast.parse(sample)) == [
        "line 2: jobs.results.create_dirty_result(...)", "line 3: store.forget_result(...)",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "planted", ["airflow_jrs.launch.planted", "airflow_jrs.views.planted", "airflow_jrs.plugins.routes.planted"]
)
def test_the_result_write_rule_fails_on_a_planted_writer(
    planted: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _assert_rule_catches(
        test_only_the_protocol_and_the_actions_write_a_result, planted,
        "def f(store, job_id):\n    store.forget_result(job_id)\n", planted, tmp_path, monkeypatch,
    )  # fmt: skip


#: The one home of the deploy modes (a module per mode and one registry, docs/architecture.md, "Layers").
DEPLOY_MODES = "airflow_jrs.launch.deploy_modes"
_PREFIX_CALLS = {"startswith", "removeprefix"}
#: A shape's literal head, then its first regex token (an escape or a class).
_HEAD_AND_TOKEN = re.compile(r"([A-Za-z0-9_-]+)(\\.|\[[^\]]*\])")


def _id_stems(patterns: list[str]) -> dict[str, str]:
    """Per id-shape pattern with a literal head, its stem (``application_\\d``, ``spark-[0-9a-f]``:
    how a copied regex shows) and its head (``driver-``: how an id is told by its start). A shape
    with no literal head (a Kubernetes ``<pod>-driver``) has nothing distinctive to search for."""
    return {m[0]: m[1] for p in patterns if (m := _HEAD_AND_TOKEN.match(p))}


def _mode_spellings(tree: ast.AST, prefixes: set[str], stems: dict[str, str]) -> list[str]:
    """Where ``tree`` spells an id shape (a string that is no docstring holding a stem of
    ``stems``, or a head tested with ``x.startswith("driver-")``) or tests a master prefix
    (``x.startswith("yarn")``, a ``"k8s://"`` constant)."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    heads = set(stems.values())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if any(stem in node.value for stem in stems):
                found.append(f"line {node.lineno}: id shape {node.value!r}")
            elif "://" in node.value and node.value in prefixes:
                found.append(f"line {node.lineno}: master prefix {node.value!r}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _PREFIX_CALLS:
            args = [e for a in node.args for e in (a.elts if isinstance(a, ast.Tuple) else [a])]
            named = [a.value for a in args if isinstance(a, ast.Constant) and a.value in prefixes]
            if named and "://" not in "".join(named):
                found.append(f"line {node.lineno}: master prefix {named} in {ast.unparse(node.func)}(...)")
            ids = [a.value for a in args if isinstance(a, ast.Constant) and a.value in heads]
            if ids:
                found.append(f"line {node.lineno}: id head {ids} in {ast.unparse(node.func)}(...)")
    return found


def _mode_stems() -> dict[str, str]:
    """The stems of every id shape of the deploy modes (docs/architecture.md, "Layers"): a new
    mode's shapes are checked the day it joins ``registry.MODES``."""
    from airflow_jrs.launch.deploy_modes.registry import MODES

    return _id_stems([shape.pattern for mode in MODES for shape in mode.ids])


def _master_prefixes() -> set[str]:
    from airflow_jrs.launch.deploy_modes.registry import MODES

    return {prefix for mode in MODES for prefix in mode.master_prefixes}


def test_only_the_deploy_modes_spell_an_application_id_or_a_master_prefix():
    prefixes, stems = _master_prefixes(), _mode_stems()
    offenders = []
    for name in sorted(n for n in MODULES if not _within(n, (DEPLOY_MODES,))):
        found = _mode_spellings(_tree(MODULES[name].read_text()), prefixes, stems)
        if found:
            offenders.append(f"{name}: {'; '.join(found)}")
    _offenders(
        "only launch/deploy_modes/ spells an application-id shape or a master prefix (a new deploy mode is "
        "a module there plus its line in registry.MODES): ask the registry (application_id_of, "
        "names_cluster_driver, printed_id_pattern, kind_of) or the mode (DeployMode.application_id) instead",
        offenders,
    )


def test_the_deploy_mode_check_sees_a_spelling():
    prefixes, stems = _master_prefixes(), _mode_stems()
    assert {"local", "spark://", "yarn", "k8s://"} <= prefixes
    assert {r"application_\d", r"driver-\d", r"app-\d", r"local-\d", "spark-[0-9a-f]"} <= set(stems), stems
    sample = (
        '"""A docstring may say application_\\d+ and spark://."""\n'
        'ID = r"application_\\d+_\\d+"\nPOD = r"spark-[0-9a-f]{32}"\nK8S = "k8s://"\n'
        'def f(m):\n    return m.startswith("yarn") or m.startswith(("sc://", "local"))\n'
        'def g(i):\n    return i.startswith("driver-")\n'
    )
    found = _mode_spellings(ast.parse(sample), prefixes, stems)
    assert sorted(int(f.split(":")[0].removeprefix("line ")) for f in found) == [2, 3, 4, 6, 6, 8], found
    modes = [n for n in MODULES if _within(n, (DEPLOY_MODES,))]
    assert sum(len(_mode_spellings(ast.parse(MODULES[n].read_text()), prefixes, stems)) for n in modes) >= 4


def test_the_deploy_mode_check_reads_the_shapes_of_a_new_mode():
    # The shapes come from the modes, not from this file: a mode added tomorrow is checked too.
    stems = _id_stems([r"mesos-\d{8}", r"[a-z]+-driver"])
    assert stems == {r"mesos-\d": "mesos-"}
    sample = 'MESOS = r"mesos-\\d{8}"\nok = "mesos-\\d"[0]\n'
    assert [f.split(":")[0] for f in _mode_spellings(ast.parse(sample), set(), stems)] == ["line 1", "line 2"]


@pytest.mark.parametrize(
    "source", ['POD = r"spark-[0-9a-f]{32}"\n', 'def f(i):\n    return i.startswith("app-")\n', 'Y = "k8s://"\n']
)
def test_the_deploy_mode_rule_fails_on_a_planted_spelling(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _assert_rule_catches(
        test_only_the_deploy_modes_spell_an_application_id_or_a_master_prefix, "airflow_jrs.protocol.planted",
        source, "airflow_jrs.protocol.planted", tmp_path, monkeypatch,
    )  # fmt: skip


#: The store's Redis backend (docs/architecture.md, "A new store backend").
REDIS_BACKEND = "airflow_jrs.store.redis"
#: Outside the store, who may import the Redis backend, each saying why: where a backend is chosen
#: from an Airflow connection or a URL, rebuilt from handed-on settings, or adapted (an async read,
#: its error words). Everything else gets a :class:`~airflow_jrs.store.namespace.JobNamespace`.
REDIS_BACKEND_USERS = {
    "airflow_jrs.hooks.jrs": "picks the backend for an Airflow connection (clients, Sentinel extras)",
    "airflow_jrs.cli.common": "picks the backend for --redis-url, and words an unreachable server",
    "airflow_jrs.launch.supervisor": "rebuilds the namespace from the kwargs the task handed on",
    "airflow_jrs.triggers.job_result": "the triggerer's async reads and wake-ups",
    "airflow_jrs.hooks.store_failures": "words an unreachable server in a task's error",
    "airflow_jrs.plugins.security": "masks a password in a connection the page names",
    "airflow_jrs.observability.metrics": "the error kinds a metric counts, and durability's 'none'",
    "airflow_jrs.operators.guarded": "durability's 'none' (a setting's value, spelled by the backend)",
    "airflow_jrs.actions.backfill": "the batch size the backend reads in",
}


def test_the_store_contracts_import_nothing_of_the_redis_backend():
    # A second backend implements the contracts; a contract that imported Redis would drag it in.
    offenders = []
    for name in sorted(n for n in MODULES if _within(n, ("airflow_jrs.store",)) and not _within(n, (REDIS_BACKEND,))):
        if name == "airflow_jrs.store":
            continue  # the package front re-exports the Redis store for DAG authors
        tree = _tree(MODULES[name].read_text())
        bad = sorted(
            {m for m, _ in _imports(tree) if m == "redis" or m.startswith("redis.") or _within(m, (REDIS_BACKEND,))}
        )
        if bad:
            offenders.append(f"{name} imports {bad}")
    _offenders(
        "a store contract (store/*.py, store/results/, store/leases/) imports neither redis nor store/redis/: "
        "move the Redis part into airflow_jrs/store/redis/",
        offenders,
    )


def test_only_the_backend_choosers_import_the_redis_backend():
    offenders, stale = [], []
    for name in sorted(n for n in MODULES if not _within(n, ("airflow_jrs.store",))):
        uses = sorted({m for m, _ in _imports(_tree(MODULES[name].read_text())) if _within(m, (REDIS_BACKEND,))})
        if uses and name not in REDIS_BACKEND_USERS:
            offenders.append(f"{name} imports {uses}")
        elif not uses and name in REDIS_BACKEND_USERS:
            stale.append(f"{name} no longer imports the Redis backend")
    _offenders(
        "outside the store only REDIS_BACKEND_USERS import airflow_jrs.store.redis: take a JobNamespace "
        "(airflow_jrs.store.namespace) instead",
        offenders,
    )
    _offenders("REDIS_BACKEND_USERS names only importers of the Redis backend: drop these", stale)


def test_the_backend_rules_fail_on_planted_violations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _assert_rule_catches(
        test_the_store_contracts_import_nothing_of_the_redis_backend, "airflow_jrs.store.planted",
        "import redis\n", "airflow_jrs.store.planted imports ['redis']", tmp_path, monkeypatch,
    )  # fmt: skip
    _assert_rule_catches(
        test_only_the_backend_choosers_import_the_redis_backend, "airflow_jrs.views.planted",
        "from airflow_jrs.store.redis.leases import RedisJobLease\n", "airflow_jrs.views.planted imports", tmp_path,
        monkeypatch,
    )  # fmt: skip
