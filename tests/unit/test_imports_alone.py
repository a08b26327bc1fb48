"""Every module of the package imports on its own, whatever was imported before.

A circle between two packages (``actions`` read planning helpers from ``cli``, whose
``__init__`` imported the commands, which import the actions) only shows when a module is
imported first: the UI's routes happened to work because the app imported ``cli`` earlier.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_jrs"

# One interpreter: third-party packages stay imported (seconds), ours are dropped before each.
# Each of our files is compiled once and its code object kept: every import still runs a fresh
# module's code with none of ours loaded, as an import from a .pyc does (without bytecode files,
# PYTHONDONTWRITEBYTECODE, compiling the package again per module was half of this test's time).
SCRIPT = """
import importlib, importlib.machinery, sys, traceback
compiled = {}
to_code = importlib.machinery.SourceFileLoader.source_to_code
def source_to_code(self, data, path, *, _optimize=-1):
    key = (path, bytes(data))
    if key not in compiled:
        compiled[key] = to_code(self, data, path, _optimize=_optimize)
    return compiled[key]
importlib.machinery.SourceFileLoader.source_to_code = source_to_code
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m == "airflow_jrs" or m.startswith("airflow_jrs.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {type(exc).__name__}: {exc}")
# A line per failure, after a marker: Airflow 3.2 logs alembic's plugin setup on stdout at import.
print("FAILED-IMPORTS\\n" + "\\n".join(failed))
"""


def _modules() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names.append(".".join(parts).removesuffix(".__init__"))
    return names


def test_every_module_imports_first() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT, *_modules()], capture_output=True, text=True, check=True)
    failed = out.stdout.split("FAILED-IMPORTS\n", 1)[1].strip()
    assert failed == "", f"modules that fail to import on their own:\n{failed}"
