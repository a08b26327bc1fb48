"""What scripts/older_airflow runs on each older minor (tests/airflow_reach.py) misses no Airflow.

The rule reads imports from the source; these tests hold it to what really happens: the files it
leaves out load no Airflow when imported, and every package an older lock pins differently is
one the rule looks for.
"""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

from airflow_reach import MINOR_IMPORTS, ROOT, airflow_chain, reaches_airflow

FAST_TIER = (ROOT / "tests" / "unit", ROOT / "tests" / "contract")

# One interpreter imports the left-out files one by one and names the first after which a module
# an Airflow minor changes is loaded (the conftests' own imports are loaded first: every run has them).
SCRIPT = """
import importlib.util, os, sys
sys.path[:0] = [".", "tests"]  # as pytest has it: pythonpath ".", the root conftest's folder
watched = set(sys.argv[1].split(","))
def loaded():
    return sorted({name.split(".")[0] for name in sys.modules} & watched)
for path in sys.argv[2:]:
    sys.path.insert(0, os.path.dirname(path))  # prepend import mode: a test file's own folder
    spec = importlib.util.spec_from_file_location("left_out_" + path.replace("/", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if loaded():
        print(f"{path} loads {loaded()}")
        break
"""


def _test_files() -> list[Path]:
    return sorted(path for folder in FAST_TIER for path in folder.glob("test_*.py"))


def test_the_left_out_test_files_load_nothing_an_airflow_minor_changes() -> None:
    left_out = [path for path in _test_files() if not reaches_airflow(path)]
    conftests = [str(ROOT / "tests" / "conftest.py")] + [str(folder / "conftest.py") for folder in FAST_TIER]
    paths = [*conftests, *map(str, left_out)]
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, ",".join(sorted(MINOR_IMPORTS)), *paths],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "", (
        f"{done.stdout.strip()}: tests/airflow_reach.py missed how (an import it cannot read? "
        "teach it), so scripts/older_airflow would not run this file on the older Airflow minors"
    )


def test_what_the_older_locks_pin_differently_is_among_the_imports_watched() -> None:
    def pins(lock: Path) -> set[str]:
        return {line.strip().lower() for line in lock.read_text().splitlines() if "==" in line and line[0] != "#"}

    default = pins(ROOT / "requirements.lock")
    by_distribution: dict[str, set[str]] = {}
    for top, distributions in importlib.metadata.packages_distributions().items():
        for distribution in distributions:
            by_distribution.setdefault(re.sub(r"[-_.]+", "-", distribution.lower()), set()).add(top)
    unwatched = {}
    for lock in sorted((ROOT / "locks").glob("airflow-*.lock")):
        for pin in pins(lock) ^ default:
            name = re.sub(r"[-_.]+", "-", pin.split("==")[0])
            if name.startswith("apache-airflow"):
                continue  # Airflow itself: "airflow"
            tops = by_distribution.get(name, {name.replace("-", "_")})  # an older lock's own: its name
            if not tops & MINOR_IMPORTS:
                unwatched[name] = (lock.name, sorted(tops))
    assert not unwatched, f"add their import names to MINOR_IMPORTS in tests/airflow_reach.py: {unwatched}"


def test_the_rule_on_files_whose_answer_is_known() -> None:
    chain = airflow_chain(ROOT / "tests" / "unit" / "test_hook.py")
    assert chain is not None and chain[-1] == "airflow", chain  # the hook adapts the store to Airflow
    # The store knows nothing of Airflow (docs/architecture.md invariant 8): its contract runs once, on 3.3.
    assert not reaches_airflow(ROOT / "tests" / "contract" / "test_store_contract.py")
    assert all(reaches_airflow(path) for path in (ROOT / "tests" / "airflow").glob("test_*.py"))
