"""The job's parameters every guarded operator takes: the one table everything that names them reads.

Airflow's operator metaclass applies ``default_args`` only to the parameters an ``__init__``
names, so each guarded operator still spells these out in its own signature; what it must not
do is disagree with this table, which says each one's name, annotation (as written), default,
whether Airflow renders it (:data:`JOB_TEMPLATE_FIELDS`) and what it means. An operator writes a
``:param:`` line for one of them only where the meaning is its own (what ``job_version`` or
``predecessor`` is about for it); every other line comes from here: in its ``__doc__``
(:func:`job_param_docs`, added by :class:`~airflow_jrs.operators.guarded.GuardedJob`) and in the
generated reference (``scripts/jrs_reference/params.py``). A test of the job parameters fails
when a signature, an annotation of ``GuardedJob`` or a ``template_fields`` drifts from it.

Plain data, no Airflow: the reference script and planning import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["JOB_PARAMS", "JOB_PARAM_NAMES", "JOB_TEMPLATE_FIELDS", "JobParam", "job_param_default", "job_param_docs"]


@dataclass(frozen=True)
class JobParam:
    """One parameter of the job: as a guarded operator's ``__init__`` must spell it, and its docs."""

    name: str
    annotation: str
    default: Any
    doc: str
    templated: bool = False


JOB_PARAMS: tuple[JobParam, ...] = (
    JobParam(
        "job_id",
        "str | None",
        None,
        "the job's id (templated). Default: ``{dag_id}.{task_id}.{date or partition}``, stable across "
        "scheduled, backfill and cleared runs of one data interval",
        templated=True,
    ),
    JobParam(
        "job_version",
        "str | None",
        None,
        "bump it to recompute although what the fingerprint covers is unchanged",
        templated=True,
    ),
    JobParam(
        "outputs",
        "dict[str, str] | None",
        None,
        "logical output name -> sub-path of the attempt's fenced output folder recorded in the result "
        '(default ``{"output": ""}``: the folder itself)',
        templated=True,
    ),
    JobParam("skip_when_done", "bool", False, "raise ``AirflowSkipException`` instead of succeeding when skipping"),
    JobParam(
        "jrs_conn_id",
        "str | None",
        None,
        "the job result store connection (default ``[jrs] conn_id``, ``jrs_default``)",
    ),
    JobParam("jrs_namespace", "str | None", None, "overrides the connection's/config's namespace"),
    JobParam("lease_ttl", "float | None", None, "seconds (default ``[jrs] lease_ttl``)"),
    JobParam(
        "lease_wait_timeout", "float", 0.0, "how long to wait for another attempt's lease before failing (seconds)"
    ),
    JobParam(
        "accept_changed_fingerprint",
        "bool",
        False,
        "skip on any SUCCEEDED result, even one recorded for other code or arguments (another fingerprint)",
    ),
    JobParam(
        "output_root",
        "str | None",
        None,
        "where fenced output folders live (default ``[jrs] output_root``)",
        templated=True,
    ),
    JobParam(
        "predecessor",
        "str",
        "wait",
        'what to do with a predecessor\'s Spark that still runs: ``"wait"`` (default: its work may finish '
        'and be adopted) or ``"stop"``',
    ),
)

#: The names, in the order the operators keep them.
JOB_PARAM_NAMES: tuple[str, ...] = tuple(p.name for p in JOB_PARAMS)
#: What every guarded operator adds to its parent's ``template_fields``.
JOB_TEMPLATE_FIELDS: tuple[str, ...] = tuple(p.name for p in JOB_PARAMS if p.templated)
_BY_NAME = {p.name: p for p in JOB_PARAMS}


def job_param_default(name: str) -> Any:
    """The default of job parameter ``name``: what a task that does not set it runs with."""
    return _BY_NAME[name].default


def job_param_docs(documented: set[str] | frozenset[str] = frozenset()) -> str:
    """The ``:param:`` lines of the job parameters not in ``documented`` (an operator's own)."""
    return "\n".join(f"    :param {p.name}: {p.doc}" for p in JOB_PARAMS if p.name not in documented)
