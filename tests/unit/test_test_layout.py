"""The test folders are not packages: two test modules with one basename stop the whole suite."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).parents[1]


def test_no_two_test_modules_share_a_basename() -> None:
    # pytest imports each test file by its basename (rootdir-relative, no __init__.py), so the
    # second file of a name fails collection with "import file mismatch" and nothing runs.
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        by_name[path.name].append(str(path.relative_to(TESTS)))
    shared = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert not shared, f"rename one of each: {shared}"
