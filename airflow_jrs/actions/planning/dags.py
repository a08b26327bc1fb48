"""Where a plan's DAG comes from: a DAG folder parsed for the CLI, the DAG processor's file for the page.

The CLI parses ``--dags-folder`` (default ``[core] dags_folder``) with Airflow's DagBag
(:func:`load_dag`). The page's API server finds the DAG through Airflow's metadata DB
(:func:`find_dag`): its DAG file where the DAG processor last parsed it, which may be in a
bundle outside ``[core] dags_folder``.

Parsing a DAG file runs it: the API server keeps each parse for as long as the file's
modification time stays the same (:class:`_ParsedDags`), so paging a calendar does not run the
file per request. A change in a module the file imports is seen once the file itself changes
(or the API server restarts). Planning from the serialized DAG instead would not run the file at
all; it lacks the operators' job id templates today, hence the parse.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from typing import Any

from airflow_jrs.actions import NOT_FOUND, USAGE, ActionError


def load_dag(dag_id: str, dags_folder: str | None) -> Any:
    """The DAG ``dag_id`` parsed from ``dags_folder`` (a folder or a file; default ``[core] dags_folder``)."""
    from airflow.configuration import conf

    from airflow_jrs.compat import dag_bag

    folder = dags_folder or conf.get("core", "dags_folder")
    if not folder or not os.path.exists(folder):
        raise ActionError(f"dags folder {folder!r} does not exist", USAGE, cli="pass --dags-folder PATH")
    # Airflow logs "Filling up the DagBag" to stdout, where it would corrupt --json: only warnings, on stderr.
    quiet = logging.getLogger("airflow.dag_processing.dagbag")
    level = quiet.level
    quiet.setLevel(logging.WARNING)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            bag = dag_bag(folder)
    finally:
        quiet.setLevel(level)
    dag = bag.dags.get(dag_id)
    if dag is None:
        known = ", ".join(sorted(bag.dags)[:10]) or "none"
        errors = f"; {len(bag.import_errors)} files failed to import" if bag.import_errors else ""
        raise ActionError(
            f"DAG {dag_id!r} is not in {folder} (found: {known}{errors})", NOT_FOUND, cli="check --dag-id"
        )
    return dag


class _ParsedDags:
    """DAGs parsed in this process, each kept with its file's modification time: a parse runs the
    file's code, seconds for a large one, and the calendar asks for a DAG on every page."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # one parse at a time: DagBag imports modules
        self._dags: dict[tuple[str, str], tuple[float, Any]] = {}

    def get(self, dag_id: str, fileloc: str) -> Any:
        try:
            mtime = os.stat(fileloc).st_mtime
        except OSError:
            raise ActionError(
                f"DAG {dag_id!r}: its DAG file is not on the host of Airflow's API server",
                USAGE,
                cli=f"its file {fileloc} (where the DAG processor parsed it) is missing here; run this where the "
                "DAG files are, or pass --dags-folder",
                ui="dates (calendar, backfill, recompute) need the DAG files where the API server runs: give it "
                "the same DAG bundle as the DAG processor, or ask an operator to use the airflow-jrs command "
                "where the DAG files are",
            ) from None
        key = (dag_id, fileloc)
        with self._lock:
            kept = self._dags.get(key)
            if kept is not None and kept[0] == mtime:
                return kept[1]
            try:
                dag = load_dag(dag_id, fileloc)
            except ActionError as exc:
                # its words name a host path and other DAGs' ids: none for the page
                raise ActionError(
                    f"DAG {dag_id!r} is not in its DAG file as the API server parses it (it fails to import "
                    "here, or it was renamed)",
                    NOT_FOUND,
                    cli=str(exc),
                    ui="see the DAG's import errors in Airflow, and reload once it parses",
                ) from None
            self._dags[key] = (mtime, dag)
            return dag

    def clear(self) -> None:
        with self._lock:
            self._dags.clear()


_PARSED = _ParsedDags()


def find_dag(dag_id: str) -> Any:
    """``dag_id`` parsed from the file Airflow's DAG processor last parsed it from (its
    ``fileloc`` in the metadata DB): the API server reads the same file the scheduler runs.
    A DAG the DAG processor never parsed is not found, naming no other DAG (the user may not
    read them)."""
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session

    with create_session() as session:
        model = session.get(DagModel, dag_id)
        fileloc = model.fileloc if model is not None else None
    if fileloc is None:
        raise ActionError(
            f"Airflow knows no DAG {dag_id!r} (not parsed yet, or deleted)", NOT_FOUND, cli="check the DAG id",
            ui="check the DAG id",
        )  # fmt: skip
    return _PARSED.get(dag_id, fileloc)
