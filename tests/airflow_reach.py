"""Which test files can behave differently under another Airflow minor: the ones that reach Airflow.

``scripts/older_airflow`` runs the suite's Airflow-facing part on each older minor, not all of it:
a test whose imports never reach Airflow, nor a package whose version an Airflow minor changes,
runs the same code on every minor (the store, the domain, the protocol, the Spark helpers), and
the default venv (Airflow 3.3) already runs it. ``pytest --reaches-airflow`` (tests/conftest.py)
collects only the files :func:`reaches_airflow` accepts.

The rule is read from the source, so a new test file is chosen by what it imports, not by a
list someone has to remember: tests/airflow is chosen whole, and a file elsewhere when an import
of its own leads, through ``airflow_jrs``, ``jrs_testbench`` or a helper module beside it, to a
module that imports one of :data:`MINOR_IMPORTS`. Imports inside functions count (the CLI
imports Airflow only when a command runs); ``if TYPE_CHECKING:`` imports do not (never run).
tests/unit/test_airflow_reach.py checks the rule against a real interpreter and the locks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The tier that drives Airflow by definition (dag.test, real processes): chosen whole.
AIRFLOW_TIER = ROOT / "tests" / "airflow"
#: First-party packages whose modules' imports are followed.
FIRST_PARTY = ("airflow_jrs", "jrs_testbench")
#: Top-level import names whose version an Airflow minor changes: Airflow itself and what the
#: locks/airflow-3.X.lock files pin differently from requirements.lock (the test keeps it so).
MINOR_IMPORTS = frozenset(
    {
        "airflow",
        "aiosqlite",
        "cadwyn",
        "fastapi",
        "sqlalchemy",
        "sqlalchemy_jsonfield",
        "sqlalchemy_utils",
        "starlette",
        "svcs",
        "upath",
    }
)


class _Imports(ast.NodeVisitor):
    """Absolute names a module imports (``from a import b`` gives ``a`` and ``a.b``)."""

    def __init__(self, module: str, is_package: bool) -> None:
        self.package = module if is_package else module.rpartition(".")[0]
        self.names: set[str] = set()

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        ):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.names.update(alias.name for alias in node.names)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            package = self.package
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{base}" if node.module else package
        self.names.add(base)
        self.names.update(f"{base}.{alias.name}" for alias in node.names)


def _imports(path: Path, module: str) -> set[str]:
    visitor = _Imports(module, path.name == "__init__.py")
    visitor.visit(ast.parse(path.read_text(), filename=str(path)))
    return visitor.names


@cache
def _modules() -> dict[str, Path]:
    modules = {}
    for package in FIRST_PARTY:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            modules[name] = path
    return modules


@cache
def _lazy_exports(package: str) -> dict[str, str]:
    """A package's PEP 562 re-exports (``_LAZY = {"Name": "module"}``, as ``airflow_jrs`` has)."""
    for node in ast.parse(_modules()[package].read_text()).body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Dict):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(target, ast.Name) and target.id == "_LAZY" for target in targets):
                return {
                    key.value: value.value
                    for key, value in zip(node.value.keys, node.value.values, strict=True)
                    if isinstance(key, ast.Constant) and isinstance(value, ast.Constant)
                }
    return {}


def _resolve(names: Iterable[str], local: dict[str, Path]) -> set[str]:
    """What importing ``names`` loads: first-party modules (parents too) and top-level names."""
    modules = _modules()
    loaded: set[str] = set()
    for name in names:
        parts = name.split(".")
        if parts[0] in local:
            loaded.add(f"local:{local[parts[0]]}")
            continue
        if parts[0] not in FIRST_PARTY:
            loaded.add(parts[0])
            continue
        for end in range(1, len(parts) + 1):
            prefix = ".".join(parts[:end])
            if prefix in modules:
                loaded.add(prefix)
            elif end == len(parts) and ".".join(parts[:-1]) in modules:
                target = _lazy_exports(".".join(parts[:-1])).get(parts[-1])
                if target:
                    loaded |= _resolve([target], local)
    return loaded


def _local_helpers(folder: Path) -> dict[str, Path]:
    """Helper modules a test file imports by bare name: beside it, or in tests/ (pytest's rootdir)."""
    helpers = {}
    for directory in (ROOT / "tests", folder):
        for path in directory.glob("*.py"):
            if not path.name.startswith(("test_", "conftest")):
                helpers[path.stem] = path
    return helpers


@cache
def _edges(node: str) -> frozenset[str]:
    if node.startswith("local:"):
        path = Path(node.removeprefix("local:"))
        return frozenset(_resolve(_imports(path, path.stem), _local_helpers(path.parent)))
    if node in _modules():
        return frozenset(_resolve(_imports(_modules()[node], node), {}))
    return frozenset()


def _path_to_minor_import(start: Iterable[str]) -> list[str] | None:
    """The first import chain from ``start`` to one of :data:`MINOR_IMPORTS` (breadth first)."""
    parents: dict[str, str | None] = dict.fromkeys(start)
    queue = list(parents)
    while queue:
        node = queue.pop(0)
        if node in MINOR_IMPORTS:
            chain = [node]
            while (parent := parents[chain[-1]]) is not None:
                chain.append(parent)
            return [step.removeprefix("local:") for step in reversed(chain)]
        for child in sorted(_edges(node)):
            if child not in parents:
                parents[child] = node
                queue.append(child)
    return None


def airflow_chain(test_file: Path) -> list[str] | None:
    """How ``test_file`` reaches Airflow (its first import chain), or None when it does not."""
    test_file = test_file.resolve()
    start = _resolve(_imports(test_file, test_file.stem), _local_helpers(test_file.parent))
    return _path_to_minor_import(start)


def reaches_airflow(test_file: Path) -> bool:
    """Whether ``test_file`` belongs to what ``scripts/older_airflow`` runs on each older minor:
    every file of the Airflow tier (some drive Airflow only as processes: the CLI, the docs'
    commands), and a file elsewhere whose imports reach Airflow."""
    test_file = test_file.resolve()
    return test_file.is_relative_to(AIRFLOW_TIER) or airflow_chain(test_file) is not None
