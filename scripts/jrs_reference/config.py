"""The [jrs] settings, from get_provider_info()["config"] (imported: it does no I/O)."""

from __future__ import annotations

from jrs_reference.text import ReferenceError_, cell, code, rst_to_md


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
