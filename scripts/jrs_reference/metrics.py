"""The Airflow metrics, from ``METRICS`` of airflow_jrs/observability/metrics.py (imported: it
imports no Airflow and does no I/O)."""

from __future__ import annotations

from jrs_reference.text import ReferenceError_, cell


def render_metrics(_: str = "") -> str:
    from airflow_jrs.observability import metrics

    if not metrics.METRICS:
        raise ReferenceError_("airflow_jrs.observability.metrics.METRICS is empty")
    tags = ", ".join(f"`{t}`" for t in metrics.TAGS)
    out = [
        "| metric | adds | sent by | counts | tags |",
        "| --- | --- | --- | --- | --- |",
    ]
    for m in metrics.METRICS:
        out.append(f"| `{m.name}` | {cell(m.unit)} | {', '.join(m.where)} | {cell(m.meaning)} | {tags} |")
    kinds = ", ".join(f"`{k}`" for k in metrics.STORE_ERROR_KINDS)
    out += ["", f"`{{kind}}` in `{metrics.STORE_ERROR}` is one of {kinds}.", ""]
    return "\n".join(out)
