"""The built wheel ships the provider, ``airflow_jrs``, and nothing of the repository around it.

The test bench (``jrs_testbench``: redis-server launcher, local deployment, fault injection),
the tests and the example DAGs stay in the repository. The wheel is built as pip builds it
(``pip wheel --no-build-isolation``, with the venv's setuptools) from a copy of the working
tree: a build in the tree itself would leave ``build/`` there, and setuptools ships whatever
stale files an earlier build left in ``build/lib``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Top-level folders not copied: the venv, git, earlier build output, local data.
NOT_COPIED = {".git", ".venv", "build", "dist", "data"}
DIST_INFO = re.compile(r"airflow_jrs-[^/]+\.dist-info/")
#: Folders and file names of what only the repository has (the last two lived in airflow_jrs once).
REPOSITORY_ONLY = {"jrs_testbench", "tests", "deployment"}
REPOSITORY_FILES = {"conftest.py", "faults.py", "embedded_redis.py"}


def _not_copied(directory: str, names: list[str]) -> set[str]:
    top = Path(directory) == ROOT
    return {
        name
        for name in names
        if (top and name in NOT_COPIED) or name == "__pycache__" or name.endswith((".egg-info", "_cache"))
    }


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the working tree, built from (and compared against) instead of the tree itself."""
    copy = tmp_path_factory.mktemp("wheel") / "source"
    shutil.copytree(ROOT, copy, ignore=_not_copied)
    return copy


@pytest.fixture(scope="module")
def wheel(source: Path) -> Iterator[zipfile.ZipFile]:
    dist = source.parent / "dist"
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--disable-pip-version-check"]
    proc = subprocess.run([*cmd, "-w", str(dist), str(source)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (built,) = dist.glob("airflow_jrs-*.whl")
    with zipfile.ZipFile(built) as zf:
        yield zf


def test_wheel_holds_only_the_package_and_its_metadata(wheel: zipfile.ZipFile) -> None:
    names = wheel.namelist()
    assert "airflow_jrs/__init__.py" in names
    assert [n for n in names if not (n.startswith("airflow_jrs/") or DIST_INFO.match(n))] == []


def test_wheel_ships_nothing_of_the_test_bench_tests_or_dags(wheel: zipfile.ZipFile) -> None:
    offenders = [
        name
        for name in wheel.namelist()
        if REPOSITORY_ONLY & set(name.split("/")[:-1]) or name.rsplit("/", 1)[-1] in REPOSITORY_FILES
    ]
    assert offenders == []


def test_wheel_ships_every_module_of_the_package(wheel: zipfile.ZipFile, source: Path) -> None:
    """A subpackage that package discovery missed would import in the repository and fail installed."""
    in_tree = {p.relative_to(source).as_posix() for p in (source / "airflow_jrs").rglob("*.py")}
    assert in_tree - set(wheel.namelist()) == set()


def test_no_shipped_module_names_a_repository_path(wheel: zipfile.ZipFile, source: Path) -> None:
    """Installed, the repository is not there: a path into it works only on the machine that built it."""
    needles = (str(ROOT), str(source), "dags/flights", "tests/")
    offenders = [
        f"{name}: {needle}"
        for name in wheel.namelist()
        if name.endswith(".py")
        for needle in needles
        if needle in wheel.read(name).decode()
    ]
    assert offenders == []


def test_wheel_ships_the_typing_marker(wheel: zipfile.ZipFile, source: Path) -> None:
    if not (source / "airflow_jrs" / "py.typed").exists():
        pytest.skip("airflow_jrs has no py.typed marker")
    assert "airflow_jrs/py.typed" in wheel.namelist()
