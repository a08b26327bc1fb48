"""The airflow-jrs CLI, from its argparse parser (imported: airflow_jrs.cli does no I/O at import)."""

from __future__ import annotations

import argparse
import importlib
import io
import os
import tomllib
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

from jrs_reference.text import ROOT, ReferenceError_, cell, code, rst_to_md


class _Captured(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__("parser captured")
        self.parser = parser


def _entry_point() -> tuple[str, str]:
    """``(module, function)`` of the ``airflow-jrs`` script, from pyproject.toml."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"].get("scripts", {})
    target = scripts.get("airflow-jrs", "airflow_jrs.cli:main")
    module, _, func = target.partition(":")
    return module, func or "main"


def cli_parser() -> argparse.ArgumentParser:
    """The parser ``airflow-jrs`` uses: a builder if there is one, else caught from its entry point."""
    module_name, func_name = _entry_point()
    module = importlib.import_module(module_name)
    builders = [
        n for n in ("build_parser", "make_parser", "get_parser", "create_parser", "parser") if hasattr(module, n)
    ]
    builders += sorted(n for n in vars(module) if "parser" in n.lower() and n not in builders)
    for name in builders:
        obj = getattr(module, name)
        if isinstance(obj, argparse.ArgumentParser):
            return obj
        if callable(obj) and not isinstance(obj, type):
            try:
                built = obj()
            except Exception:  # a helper that needs arguments: not a builder
                continue
            if isinstance(built, argparse.ArgumentParser):
                return built
    # No builder: run the entry point until it parses, and take the parser it built.
    saved = argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args

    def capture(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        raise _Captured(self)

    argparse.ArgumentParser.parse_args = capture  # type: ignore[method-assign,assignment]
    argparse.ArgumentParser.parse_known_args = capture  # type: ignore[method-assign,assignment]
    try:
        entry = getattr(module, func_name)
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            try:
                entry(["--help"])
            except TypeError:
                entry()
    except _Captured as caught:
        return caught.parser
    except SystemExit:
        pass
    finally:
        argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args = saved  # type: ignore[method-assign]
    raise ReferenceError_(f"could not find the argparse parser of {module_name}:{func_name}")


def _usage(parser: argparse.ArgumentParser) -> str:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: fix the width for stable pages
    try:
        return parser.format_usage().strip()
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def _argument_rows(parser: argparse.ArgumentParser) -> list[str]:
    formatter = parser._get_formatter()
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        name = ", ".join(action.option_strings) or (action.metavar or action.dest)
        if action.option_strings and action.nargs != 0:
            name += f" {action.metavar or action.dest.upper()}"
        if action.nargs in ("+", "*"):
            name += " ..."
        default = action.default
        shown = "" if default in (None, False, argparse.SUPPRESS) or action.nargs == 0 else repr(default)
        try:
            helptext = formatter._expand_help(action) if action.help else ""
        except Exception:
            helptext = action.help or ""
        helptext = rst_to_md(helptext)
        positional = not action.option_strings and action.nargs not in ("*", "?")
        required = "yes" if action.required or positional else ""
        rows.append(f"| {code(cell(name))} | {required} | {code(cell(shown))} | {cell(helptext)} |")
    return rows


def _render_parser(
    parser: argparse.ArgumentParser, title: str, summary: str, level: int, parent_epilog: str | None = None
) -> list[str]:
    out = [f"{'#' * level} `{title}`", ""]
    if summary:
        out += [rst_to_md(summary), ""]
    if parser.description and parser.description.strip() != summary.strip():
        out += [rst_to_md(parser.description), ""]
    out += ["```text", _usage(parser), "```", ""]
    rows = _argument_rows(parser)
    if rows:
        out += ["| argument | required | default | meaning |", "| --- | --- | --- | --- |", *rows, ""]
    if parser.epilog and parser.epilog != parent_epilog:  # e.g. exit codes; shown once, not per command
        out += ["```text", parser.epilog.strip("\n"), "```", ""]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                summary = helps.get(name) or ""
                out += _render_parser(sub, f"{title} {name}", summary, level + 1, parser.epilog)
    return out


def render_cli(_: str = "") -> str:
    parser = cli_parser()
    prog = parser.prog or "airflow-jrs"
    return "\n".join(_render_parser(parser, prog, parser.description or "", 2))
