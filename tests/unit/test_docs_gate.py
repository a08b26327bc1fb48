"""The docs gate fails on every warning, and passes on the tree.

``./dev test`` runs ``scripts/docs_gate`` (``mkdocs build --strict`` without ``--quiet``: with
``--quiet`` MkDocs never emits its warnings, so ``--strict`` has none to count and a broken anchor
passed). These tests run that very script: on a copy of the docs with a planted fault it must fail
and name the fault; on the repository's docs it must pass. Each build takes about 2 s.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GATE = ROOT / "scripts" / "docs_gate"
MKDOCS = str(Path(sys.executable).parent / "mkdocs")


def _gate(project: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(GATE), str(project), str(site)],
        env={**os.environ, "MKDOCS": MKDOCS},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _copy_of_the_docs(into: Path) -> Path:
    """What the build reads: its config, ``docs/``, the hook and its renderers, the package."""
    project = into / "project"
    (project / "scripts").mkdir(parents=True)
    for name in ("mkdocs.yml", "pyproject.toml"):  # the CLI reference names the console script from the latter
        shutil.copy2(ROOT / name, project / name)
    shutil.copytree(ROOT / "docs", project / "docs")
    shutil.copy2(ROOT / "scripts" / "mkdocs_hooks.py", project / "scripts" / "mkdocs_hooks.py")
    shutil.copytree(ROOT / "scripts" / "jrs_reference", project / "scripts" / "jrs_reference")
    (project / "airflow_jrs").symlink_to(ROOT / "airflow_jrs")  # the reference pages read its source
    return project


def test_dev_test_runs_the_gate():
    """``./dev test`` runs the script these tests run, and no other mkdocs command."""
    dev = (ROOT / "dev").read_text(encoding="utf-8")
    test = re.search(r"^\s*test\)\n(.*?)^\s*;;", dev, re.MULTILINE | re.DOTALL)
    assert test and re.search(r"^\s*gate$", test.group(1), re.MULTILINE), "./dev test runs no gate()"
    case = re.search(r"^gate\(\) \{\n(.*?)^\}", dev, re.MULTILINE | re.DOTALL)  # the stages of the gate
    assert case, "./dev has no gate() function"
    stages = case.group(1)
    assert re.search(r"^\s*(stage|beside) \S+ (env )?(\S+=\S+\s+)?scripts/docs_gate\b", stages, re.MULTILINE), stages
    assert not re.search(r"^\s*\S*mkdocs\"?\s+build", stages, re.MULTILINE), "a second, ungated mkdocs build"


def test_the_gate_passes_on_the_tree(tmp_path: Path):
    done = _gate(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and done.stdout == ""  # quiet when all is well
    # A generated page: the source's note for readers of the file is gone, the generated text is there.
    source = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    built = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "jrs-source-only" in source and "Reading this file" in source
    assert "Reading this file" not in built and "jrs-source-only" not in built and "--redis-url" in built


def test_the_gate_passes_on_an_unchanged_copy(tmp_path: Path):
    """The copy below builds clean, so what fails there is the planted fault."""
    done = _gate(_copy_of_the_docs(tmp_path), tmp_path / "site")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("plant", "named"),
    [
        ("See [the trials](benchmarks.md#no-such-anchor-here).", "#no-such-anchor-here"),
        ("See [a page](no-such-page.md).", "no-such-page.md"),
        ("<!-- jrs-reference: params airflow_jrs.no_such_module.NoSuchOperator -->", "NoSuchOperator"),
    ],
    ids=["broken-anchor", "missing-page", "unrenderable-reference"],
)
def test_the_gate_fails_on_a_planted_warning(tmp_path: Path, plant: str, named: str):
    project = _copy_of_the_docs(tmp_path)
    index = project / "docs" / "index.md"
    index.write_text(index.read_text(encoding="utf-8") + f"\n\n{plant}\n", encoding="utf-8")
    done = _gate(project, tmp_path / "site")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "WARNING" in done.stderr and named in done.stderr and "docs gate:" in done.stderr
