"""docs/architecture.md, "Where a change goes": the map names files that exist, and it is the only map.

Code and tests cite docs/architecture.md for why a rule holds and where a change goes. A file
moved or renamed after the table was written sends a reader to nothing, and no reader of the
code notices a stale page; so every backticked path of the table must exist, relative to the
repository's root or to the package (the table writes ``cli/reads.py`` as the package does).
The map had an earlier name that was never in the repository; no citation of it may come back.
Fast and file-only: no server, no Airflow.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "airflow_jrs"
SECTION = "Where a change goes"
#: Rows the issue asked the map for; a table that lost one of them lost a part of the map.
REQUIRED_ROWS = ("a new CLI read", "a new Redis setting", "a new store backend", "guard a new provider operator")
#: A backticked token is a path when it is plain path characters (not a call, a placeholder such
#: as ``operators/<name>.py``, or prose) and has a folder or a file suffix of the repository.
PATH_CHARS = re.compile(r"[\w.\-/]+")
SUFFIXES = (".py", ".ts", ".tsx", ".md", ".yml", ".yaml")
#: Spelled apart, so that this file is no citation of the old name.
OLD_MAP = "DESIGN" + ".md"
#: Where a citation of the old map would mislead: the code, its tests and tooling, the docs.
CITING = ("airflow_jrs", "jrs_testbench", "tests", "docs", "scripts", "README.md")
SKIPPED_DIRS = {"__pycache__", "node_modules"}


def _rows() -> dict[str, str]:
    """The table's rows: the change (first cell) -> the row's whole text."""
    text = PAGE.read_text(encoding="utf-8")
    heading = f"\n## {SECTION}\n"
    assert heading in text, f"{PAGE.relative_to(ROOT)} has no '## {SECTION}' section"
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    assert len(lines) > 2, f"'## {SECTION}' of {PAGE.relative_to(ROOT)} holds no table"
    header, rule, *body = lines
    assert header.replace(" ", "") == "|change|file|" and set(rule) <= set("|-: "), (header, rule)
    rows = {}
    for line in body:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == 2, f"a row of two cells (a '|' inside a cell splits it): {line[:120]}"
        rows[cells[0]] = line
    return rows


def _paths(row: str) -> list[str]:
    tokens = re.findall(r"`([^`]+)`", row)
    return [t for t in tokens if PATH_CHARS.fullmatch(t) and ("/" in t or t.endswith(SUFFIXES))]


def _exists(path: str) -> bool:
    return (ROOT / path).exists() or (PACKAGE / path).exists()


def test_the_map_has_its_rows_and_one_home() -> None:
    rows = _rows()
    missing = [r for r in REQUIRED_ROWS if not any(change.startswith(r) for change in rows)]
    assert not missing, f"rows missing from '{SECTION}': {missing}"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    # Two copies of the table drift apart; the README points to the one the tests check.
    assert "| change | file |" not in readme, f"README.md holds a copy of '{SECTION}'; link to the map instead"
    assert "docs/architecture.md#where-a-change-goes" in readme


def test_every_path_the_map_names_exists() -> None:
    stale = []
    for change, row in _rows().items():
        paths = _paths(row)
        # A row without a path would pass whatever moved: the parser or the row is wrong.
        assert paths, f"row {change!r} names no file"
        stale += [f"{change!r}: {p}" for p in paths if not _exists(p)]
    assert not stale, (
        f"docs/architecture.md, '{SECTION}', names paths that exist neither from the repository's root "
        "nor from airflow_jrs/ (moved or renamed? fix the row):\n  " + "\n  ".join(stale)
    )


def test_no_citation_of_the_old_map_remains() -> None:
    found = []
    for name in CITING:
        top = ROOT / name
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for path in files:
            if SKIPPED_DIRS & set(path.relative_to(ROOT).parts):
                continue
            if OLD_MAP.encode() in path.read_bytes():
                found.append(str(path.relative_to(ROOT)))
    assert not found, f"{OLD_MAP} is not in the repository; cite docs/architecture.md instead: {found}"
