"""A class's parameters, parsed from its source (``ast``): importing it would import Airflow.

The job's parameters a guarded operator does not document itself read their text from the one
table, ``airflow_jrs/operators/job_params.py`` (imported: plain data).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from jrs_reference.text import PACKAGE, ReferenceError_, cell, code, log, rst_to_md

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
                elif isinstance(elt, ast.Starred) and ast.unparse(elt.value) == "JOB_TEMPLATE_FIELDS":
                    fields += _job_params().JOB_TEMPLATE_FIELDS
                elif isinstance(elt, ast.Starred):
                    fields.append(f"every template field of `{ast.unparse(elt.value).rsplit('.', 1)[0]}`")
            return fields
    return []


def _job_params() -> Any:
    """The guarded operators' one table of the job's parameters (imported: plain data, no Airflow)."""
    from airflow_jrs.operators import job_params

    return job_params


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
    job_docs = {p.name: p.doc for p in _job_params().JOB_PARAMS}
    for arg, default in pairs:
        if arg.arg in ("self", "cls"):
            continue
        text = documented.get(arg.arg, "") or job_docs.get(arg.arg, "")
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
