"""The UI plugin's JSON routes, parsed from its source (``ast``): importing it would import Airflow."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from jrs_reference.text import PACKAGE, ROOT, cell, code, log, rst_to_md

#: Where the UI plugin may live (another part of the project builds it; either name is fine).
PLUGIN_DIRS = ("plugins", "ui")
HTTP_METHODS = ("get", "post", "put", "patch", "delete")


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
    # the app module (api.py) says how requests are handled, when its routes are in routers
    app_doc = next((ast.get_docstring(t) for p, t in zip(files, trees, strict=True) if p.name == "api.py"), None)
    return routes, prefixes, app_doc or module_doc


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
