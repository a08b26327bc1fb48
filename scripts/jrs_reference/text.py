"""What every renderer shares: where the package is, the warning logger, and text helpers."""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "airflow_jrs"
if str(ROOT) not in sys.path:  # the working tree's package, even without an editable install
    sys.path.insert(0, str(ROOT))

log = logging.getLogger("mkdocs.hooks.jrs_reference")  # under "mkdocs": --strict counts its warnings


class ReferenceError_(Exception):
    """A block that cannot be rendered; becomes a warning naming the page."""


_ROLE = re.compile(r":[\w:]+:`~?([^`]+)`")


def rst_to_md(text: str) -> str:
    """The reST of our docstrings as Markdown: ``code`` -> `code`, :class:`~a.B` -> `B`."""

    def role(match: re.Match[str]) -> str:
        target = match.group(1)
        short = match.group(0).split("`")[1].startswith("~")
        return f"`{target.rsplit('.', 1)[-1] if short else target}`"

    text = _ROLE.sub(role, text)
    # ``\[`` is rich-argparse's escape of a literal ``[`` (the CLI's help is rich markup).
    return text.replace("``", "`").replace("\\[", "[")


def cell(text: str) -> str:
    """One Markdown table cell: no newlines, no unescaped pipes."""
    return " ".join(str(text).split()).replace("|", "\\|")


def code(text: str) -> str:
    return f"`{text}`" if text else ""
