"""Reference pages rendered from the code at build time, so that they cannot drift from it.

MkDocs loads this file as a hook (``hooks:`` in ``mkdocs.yml``; hooks need no plugin). A page
asks for generated text with an HTML comment on a line of its own::

    <!-- jrs-reference: cli -->                       the airflow-jrs CLI, from its argparse parser
    <!-- jrs-reference: config -->                    [jrs], from get_provider_info()["config"]
    <!-- jrs-reference: params MODULE.CLASS -->       a class's parameters, from its source
    <!-- jrs-reference: api -->                       the UI plugin's JSON routes, from its source

and the hook replaces the comment before the page is rendered. Nothing generated is written to
``docs/``; ``python scripts/mkdocs_hooks.py cli|config|api|params MODULE.CLASS`` prints a block.

Why each source is read the way it is:

* the CLI and ``[jrs]`` are *imported*: ``airflow_jrs.cli`` and ``get_provider_info`` do no I/O
  and import no Airflow at import time (a rule of the package), so the text is exactly what a
  user's ``--help`` and Airflow's config show;
* operators, sensors, triggers and the plugin are *parsed* (``ast``), not imported: importing them
  imports Airflow, which reads (and may create) ``$AIRFLOW_HOME/airflow.cfg`` and takes seconds;
  a docs build must not touch a user's Airflow home. Their parameters come from the
  ``__init__`` signature (names, types, defaults) and the ``:param name:`` lines of the class
  docstring (meaning);
* the CLI's parser is found tolerantly: a builder function (``build_parser`` and friends) if the
  module has one, else the parser that the ``airflow-jrs`` entry point builds, caught at its
  ``parse_args`` call. A CLI reshaped into a package or with a builder keeps rendering.

What cannot be rendered is a warning, and ``mkdocs build --strict`` (run by ``./dev test``) fails
on warnings: a reference that silently went stale is worse than a failed build.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import io
import json
import logging
import os
import re
import sys
import tomllib
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "airflow_jrs"
if str(ROOT) not in sys.path:  # the working tree's package, even without an editable install
    sys.path.insert(0, str(ROOT))

log = logging.getLogger("mkdocs.hooks.jrs_reference")  # under "mkdocs": --strict counts its warnings

MARKER = re.compile(r"^<!--\s*jrs-reference:\s*([\w-]+)(?:\s+([^>]*?))?\s*-->\s*$", re.MULTILINE)
#: Where the UI plugin may live (another part of the project builds it; either name is fine).
PLUGIN_DIRS = ("plugins", "ui")
HTTP_METHODS = ("get", "post", "put", "patch", "delete")


class ReferenceError_(Exception):
    """A block that cannot be rendered; becomes a warning naming the page."""


# -- text helpers --------------------------------------------------------------------------------
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


# -- the CLI -------------------------------------------------------------------------------------
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


# -- [jrs] ---------------------------------------------------------------------------------------
def render_config(_: str = "") -> str:
    from airflow_jrs.get_provider_info import get_provider_info

    sections = get_provider_info().get("config") or {}
    if not sections:
        raise ReferenceError_("get_provider_info() has no config section")
    out = []
    for section, body in sections.items():
        out += [f"## `[{section}]`", "", rst_to_md(body.get("description", "")), ""]
        out += ["| option | type | default | environment variable | meaning |", "| --- | --- | --- | --- | --- |"]
        for name, opt in body["options"].items():
            default = opt.get("default")
            env = f"AIRFLOW__{section.upper()}__{name.upper()}"
            out.append(
                f"| `{name}` | {opt.get('type', '')} | {code(cell(default)) if default else '(empty)'} "
                f"| `{env}` | {cell(rst_to_md(opt.get('description', '')))} |"
            )
        out.append("")
    return "\n".join(out)


# -- classes, from their source ------------------------------------------------------------------
_PARAM = re.compile(r"^:param\s+([^:]+):\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """``(prose, {param: text})`` from a reST docstring with ``:param name:`` lines.

    A param's text runs on over the lines indented below it; ``:param a, b, c:`` documents
    several at once. Everything else is prose, kept in order.
    """
    prose: list[str] = []
    found: list[tuple[list[str], list[str]]] = []  # (names, lines of text)
    current: list[str] | None = None
    for line in doc.splitlines():
        match = None if line.startswith(" ") else _PARAM.match(line.strip())
        if match:
            current = [match.group(2)]
            found.append(([n.strip() for n in match.group(1).split(",")], current))
        elif current is not None and line.startswith(" ") and line.strip():
            current.append(line.strip())
        else:
            current = None
            prose.append(line)
    params = {name: " ".join(lines) for names, lines in found for name in names}
    return "\n".join(prose).strip(), params


def _module_path(module: str) -> Path:
    parts = module.split(".")
    if parts[0] != "airflow_jrs":
        raise ReferenceError_(f"{module}: only airflow_jrs modules are documented here")
    base = PACKAGE.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    raise ReferenceError_(f"no source file for module {module}")


def _class_node(module: str, name: str) -> ast.ClassDef:
    tree = ast.parse(_module_path(module).read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise ReferenceError_(f"class {name} not found in {module}")


def _constant_value(module: str, name: str, hops: int = 2) -> str | None:
    """The literal value of a module-level constant, following ``from airflow_jrs... import``.

    Signatures name constants (``stop_timeout=DEFAULT_STOP_TIMEOUT``); the reader wants the value.
    """
    try:
        tree = ast.parse(_module_path(module).read_text())
    except (ReferenceError_, SyntaxError):
        return None
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        if isinstance(node, ast.AnnAssign):
            target = node.target
        if isinstance(target, ast.Name) and target.id == name and getattr(node, "value", None) is not None:
            try:
                return repr(ast.literal_eval(node.value))  # type: ignore[attr-defined]
            except ValueError:
                return None
        if isinstance(node, ast.ImportFrom) and hops and (node.module or "").startswith("airflow_jrs"):
            if any((alias.asname or alias.name) == name for alias in node.names):
                original = next(a.name for a in node.names if (a.asname or a.name) == name)
                return _constant_value(node.module or "", original, hops - 1)
    return None


def _default_text(module: str, default: ast.expr) -> str:
    text = ast.unparse(default)
    if isinstance(default, ast.Name):
        value = _constant_value(module, default.id)
        if value is not None:
            return f"{value} ({text})"
    return text


def _init(node: ast.ClassDef) -> ast.FunctionDef | None:
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
            return item
    return None


def _template_fields(node: ast.ClassDef) -> list[str]:
    for item in node.body:
        target = item.target if isinstance(item, ast.AnnAssign) else None
        if isinstance(item, ast.Assign) and len(item.targets) == 1:
            target = item.targets[0]
        value = getattr(item, "value", None)
        if isinstance(target, ast.Name) and target.id == "template_fields" and value is not None:
            fields = []
            for elt in getattr(value, "elts", []):
                if isinstance(elt, ast.Constant):
                    fields.append(str(elt.value))
                elif isinstance(elt, ast.Starred):
                    fields.append(f"every template field of `{ast.unparse(elt.value).rsplit('.', 1)[0]}`")
            return fields
    return []


_SHARED_DOCS: dict[str, tuple[str, str]] | None = None


def _shared_param_docs() -> dict[str, tuple[str, str]]:
    """``{param: (text, class)}`` over every documented class of the Airflow-facing modules.

    A parameter that several classes share (``jrs_conn_id``) is often documented once.
    """
    global _SHARED_DOCS
    if _SHARED_DOCS is None:
        _SHARED_DOCS = {}
        for sub in ("operators", "sensors", "triggers"):
            for path in sorted((PACKAGE / sub).glob("*.py")):
                for node in ast.parse(path.read_text()).body:
                    if isinstance(node, ast.ClassDef):
                        _, params = parse_docstring(ast.get_docstring(node) or "")
                        for name, text in params.items():
                            _SHARED_DOCS.setdefault(name, (text, node.name))
    return _SHARED_DOCS


def render_params(target: str) -> str:
    module, _, name = target.strip().rpartition(".")
    if not module:
        raise ReferenceError_(f"params needs MODULE.CLASS, got {target!r}")
    node = _class_node(module, name)
    prose, documented = parse_docstring(ast.get_docstring(node) or "")
    init = _init(node)
    out = [f"### `{name}`", "", f"`from {module} import {name}`", ""]
    if prose:
        out += [rst_to_md(prose), ""]
    bases = [ast.unparse(b) for b in node.bases if not ast.unparse(b).endswith("Mixin")]
    if init is None:
        out += [f"Takes the parameters of {', '.join(f'`{b}`' for b in bases)}.", ""]
        return "\n".join(out)
    args = init.args
    positional = args.posonlyargs + args.args
    pos_defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    pairs = list(zip(positional, pos_defaults, strict=True)) + list(zip(args.kwonlyargs, args.kw_defaults, strict=True))
    rows = []
    missing = []
    shared = _shared_param_docs()
    for arg, default in pairs:
        if arg.arg in ("self", "cls"):
            continue
        text = documented.get(arg.arg, "")
        if not text and arg.arg in shared:
            text, owner = shared[arg.arg]
            text = f"{text} (as for `{owner}`)" if owner != name else text
        if not text:
            missing.append(arg.arg)
        annotation = ast.unparse(arg.annotation) if arg.annotation is not None else ""
        shown = "required" if default is None else _default_text(module, default)
        rows.append(
            f"| `{arg.arg}` | {code(cell(annotation))} | {code(cell(shown)) if default is not None else shown} "
            f"| {cell(rst_to_md(text))} |"
        )
    if rows:
        out += ["| parameter | type | default | meaning |", "| --- | --- | --- | --- |", *rows, ""]
    if args.kwarg is not None and bases:
        out += [f"Every other keyword argument goes to {', '.join(f'`{b}`' for b in bases)}.", ""]
    fields = _template_fields(node)
    if fields:
        out += [f"Templated (Jinja): {', '.join(f if f.startswith('every') else f'`{f}`' for f in fields)}.", ""]
    if missing:
        log.warning("reference: %s.%s: parameters without a :param: line: %s", module, name, ", ".join(missing))
    return "\n".join(out)


# -- the UI plugin's JSON API --------------------------------------------------------------------
def _plugin_files() -> list[Path]:
    files: list[Path] = []
    for sub in PLUGIN_DIRS:
        folder = PACKAGE / sub
        if folder.is_dir():
            files += sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)
    return files


def _const(node: ast.AST | None, names: dict[str, str] | None = None) -> str | None:
    """A string literal, or a module-level string constant it names (``URL_PREFIX``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and names:
        return names.get(node.id)
    return None


def _string_constants(trees: list[ast.Module]) -> dict[str, str]:
    found: dict[str, str] = {}
    for tree in trees:
        for node in tree.body:
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
            if isinstance(node, ast.AnnAssign):
                target = node.target
            value = _const(getattr(node, "value", None))
            if isinstance(target, ast.Name) and value is not None:
                found[target.id] = value
    return found


def _keyword(call: ast.AST | None, name: str) -> ast.expr | None:
    if isinstance(call, ast.Call):
        for kw in call.keywords:
            if kw.arg == name:
                return kw.value
    return None


def _type_aliases(trees: list[ast.Module]) -> dict[str, ast.expr]:
    """Module-level ``Name = Annotated[...]`` aliases (``ConfirmBody``), to see through them."""
    found: dict[str, ast.expr] = {}
    for tree in trees:
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                if isinstance(node.value, ast.Subscript) and ast.unparse(node.value.value).endswith("Annotated"):
                    found[node.targets[0].id] = node.value
    return found


def _route_param(
    arg: ast.arg, default: ast.expr | None, path: str, aliases: dict[str, ast.expr]
) -> dict[str, str] | None:
    """One request parameter of a handler, or ``None`` for what FastAPI injects (user, request)."""
    annotation = arg.annotation
    if isinstance(annotation, ast.Name) and annotation.id in aliases:
        annotation = aliases[annotation.id]
    marker: ast.AST | None = None
    if isinstance(annotation, ast.Subscript) and ast.unparse(annotation.value).endswith("Annotated"):
        parts = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
        annotation, marker = parts[0], parts[1] if len(parts) > 1 else None
    kind_of = ast.unparse(marker.func) if isinstance(marker, ast.Call) else ""
    text = ast.unparse(annotation) if annotation is not None else ""
    if arg.arg in ("self", "request", "response") or "Request" in text or "Dep" in text or kind_of == "Depends":
        return None
    name = _const(_keyword(marker, "alias")) or arg.arg
    where = "body" if kind_of == "Body" else "path" if "{" + arg.arg in path else "query"
    return {
        "name": name,
        "in": where,
        "type": text,
        "default": "required" if default is None else ast.unparse(default),
        "meaning": _const(_keyword(marker, "description")) or _example(marker),
    }


def _example(marker: ast.AST | None) -> str:
    examples = _keyword(marker, "examples")
    if isinstance(examples, ast.List) and examples.elts:
        try:
            return f"e.g. `{json.dumps(ast.literal_eval(examples.elts[0]))}`"
        except ValueError:
            return f"e.g. `{ast.unparse(examples.elts[0])}`"
    return ""


def _returned_keys(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """Keys of a handler's ``return {...}`` literal: the JSON answer's top-level members."""
    for node in ast.walk(func):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Dict):
            return [k for k in (_const(key) for key in node.value.keys) if k]
    return []


def _routes(files: list[Path]) -> tuple[list[dict[str, Any]], list[str], str]:
    """JSON routes declared as ``@<app or router>.<method>("/path")``, the plugin's url_prefix,
    and the docstring of the module that declares them. Routes with ``include_in_schema=False``
    (the plugin's pages and assets) are left out: they are not an API."""
    trees = [ast.parse(path.read_text()) for path in files]
    names = _string_constants(trees)
    aliases = _type_aliases(trees)
    routes: list[dict[str, Any]] = []
    prefixes: list[str] = []
    module_doc = ""
    for path, tree in zip(files, trees, strict=True):
        router_prefix: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if _const(key) == "url_prefix" and _const(value, names):
                        prefixes.append(_const(value, names) or "")
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                prefix = _const(_keyword(node.value, "prefix"), names)
                if prefix:
                    router_prefix[node.targets[0].id] = prefix
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for deco in node.decorator_list:
                if not (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute)):
                    continue
                method, route = deco.func.attr, _const(deco.args[0], names) if deco.args else None
                hidden = _keyword(deco, "include_in_schema")
                if method not in HTTP_METHODS or route is None:
                    continue
                if isinstance(hidden, ast.Constant) and hidden.value is False:
                    continue
                owner = deco.func.value.id if isinstance(deco.func.value, ast.Name) else ""
                args = node.args.args + node.args.kwonlyargs
                defaults: list[ast.expr | None] = [None] * (len(node.args.args) - len(node.args.defaults))
                defaults += list(node.args.defaults) + list(node.args.kw_defaults)
                full = router_prefix.get(owner, "") + route
                params = [p for a, d in zip(args, defaults, strict=True) if (p := _route_param(a, d, full, aliases))]
                routes.append(
                    {
                        "method": method.upper(),
                        "path": full,
                        "doc": ast.get_docstring(node) or "",
                        "params": params,
                        "keys": _returned_keys(node),
                        "handler": node.name,
                        "source": path.relative_to(ROOT).as_posix(),
                    }
                )
                module_doc = module_doc or ast.get_docstring(tree) or ""
    return routes, prefixes, module_doc


def render_api(_: str = "") -> str:
    files = _plugin_files()
    if not files:
        return (
            "!!! note\n    The UI plugin is not part of this build of the package: no "
            f"`airflow_jrs/{'` or `airflow_jrs/'.join(PLUGIN_DIRS)}` folder. Its routes appear here once it is."
        )
    routes, prefixes, module_doc = _routes(files)
    if not routes:
        log.info("reference: no @<router>.<method>(...) routes found in %s", [str(f) for f in files])
        return (
            '!!! note\n    No routes declared as `@<app>.<method>("/path")` were found in the '
            "plugin's source; read the plugin module for its endpoints."
        )
    base = prefixes[0] if prefixes else ""
    out = ["| method | path | handler | what |", "| --- | --- | --- | --- |"]
    for r in routes:
        first = rst_to_md(r["doc"].split("\n\n")[0]) if r["doc"] else ""
        out.append(f"| {r['method']} | `{cell(base + r['path'])}` | `{r['handler']}` | {cell(first)} |")
    out.append("")
    if module_doc:
        out += ["## How requests are handled", "", "From the plugin's source:", "", rst_to_md(module_doc), ""]
    out += ["## Endpoints", ""]
    for r in routes:
        out += [f"### `{r['method']} {base}{r['path']}`", ""]
        if r["doc"]:
            out += [rst_to_md(r["doc"]), ""]
        if r["params"]:
            out += ["| parameter | in | type | default | meaning |", "| --- | --- | --- | --- | --- |"]
            for p in r["params"]:
                default = p["default"] if p["default"] == "required" else code(cell(p["default"]))
                out.append(
                    f"| `{p['name']}` | {p['in']} | {code(cell(p['type']))} | {default} | {cell(p['meaning'])} |"
                )
            out.append("")
        if r["keys"]:
            out += [f"Answer: a JSON object with {', '.join(f'`{k}`' for k in r['keys'])}.", ""]
        out += [f"Source: `{r['source']}`, `{r['handler']}`.", ""]
    return "\n".join(out)


RENDERERS: dict[str, Callable[[str], str]] = {
    "cli": render_cli,
    "config": render_config,
    "params": render_params,
    "api": render_api,
}


def expand(markdown: str, where: str = "") -> str:
    """``markdown`` with every ``<!-- jrs-reference: ... -->`` line replaced by its block."""

    def one(match: re.Match[str]) -> str:
        kind, argument = match.group(1), match.group(2) or ""
        renderer = RENDERERS.get(kind)
        if renderer is None:
            log.warning("reference: %s: unknown block %r (known: %s)", where, kind, ", ".join(RENDERERS))
            return match.group(0)
        try:
            return renderer(argument)
        except Exception as exc:  # the page still builds; --strict fails the build on the warning
            log.warning("reference: %s: cannot render %s %s: %s: %s", where, kind, argument, type(exc).__name__, exc)
            return f"!!! warning\n    This reference could not be generated ({type(exc).__name__}: {cell(exc)})."

    return MARKER.sub(one, markdown)


def on_page_markdown(markdown: str, page: Any = None, **_: Any) -> str:
    """MkDocs event: expand the reference blocks of one page."""
    where = getattr(getattr(page, "file", None), "src_uri", "") or "page"
    return expand(markdown, where)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    kind, *rest = sys.argv[1:] or ["cli"]
    print(expand(f"<!-- jrs-reference: {kind} {' '.join(rest)} -->".replace("  ", " "), "command line"))
