"""Folders are tiers: ``./dev check`` runs tests/unit and tests/contract by folder, so a test there
that needs a JVM, an Airflow process or fault injection would slow (or break) the fast tier."""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).parents[1]
FAST_FOLDERS = ("unit", "contract")
#: The markers of the heavy tiers, each with its folder. ``cluster`` is no tier of its own: a local
#: Redis Cluster starts in seconds and the store contract runs against it in the fast tier.
HEAVY = {"spark": "tests/spark", "airflow": "tests/airflow", "chaos": "tests/chaos", "e2e": "tests/e2e"}
MARK = re.compile(r"pytest\.mark\.(" + "|".join(HEAVY) + r")\b")


def test_the_fast_folders_hold_no_test_of_a_heavy_tier() -> None:
    offenders = [
        f"{path.relative_to(TESTS.parent)}:{number}: pytest.mark.{found.group(1)} (move it to {HEAVY[found.group(1)]})"
        for folder in FAST_FOLDERS
        for path in sorted((TESTS / folder).rglob("*.py"))
        if path != Path(__file__)
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if (found := MARK.search(line))
    ]
    assert not offenders, "the fast tier is chosen by folder; these tests belong elsewhere:\n" + "\n".join(offenders)


def test_every_folder_of_tests_is_a_tier_the_gate_runs() -> None:
    # ./dev test runs the folders it names (FAST_TIER, HEAVY_TIERS): a new folder would run nowhere.
    dev = (TESTS.parent / "dev").read_text()
    tiers = " ".join(re.findall(r"^(?:FAST_TIER|HEAVY_TIERS)=\((.*?)\)$", dev, re.MULTILINE | re.DOTALL))
    folders = sorted(p.name for p in TESTS.iterdir() if p.is_dir() and any(p.glob("test_*.py")))
    missing = [f"tests/{f}" for f in folders if not re.search(rf"\btests/{f}\b", tiers)]
    assert len(folders) >= 6 and not missing, f"name these in ./dev's FAST_TIER or HEAVY_TIERS: {missing}"


def test_the_longest_first_files_exist_and_their_tiers_keep_that_order() -> None:
    # A renamed file would drop out of LONGEST_FIRST silently and go back to the tail of its tier;
    # and xdist's own reorder (most tests first) would undo the order unless ./dev turns it off.
    tree = ast.parse((TESTS / "conftest.py").read_text())
    listed = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "LONGEST_FIRST" for t in node.targets)
    )
    dev = (TESTS.parent / "dev").read_text()
    missing = [path for path in listed if not (TESTS.parent / path).is_file()]
    assert listed and not missing and len(set(listed)) == len(listed), missing
    for folder in sorted({path.split("/")[1] for path in listed}):
        entry = re.search(rf'"tests/{folder}\|([^"]*)"', dev)
        assert entry and "--no-loadscope-reorder" in entry.group(1), f"tests/{folder}: {entry}"
