"""Where a plan's DAG comes from: Airflow's serialized DAG, for the page and the CLI alike.

The page's API server reads the serialized DAG from Airflow's metadata DB (:func:`find_dag`,
and :func:`version_dag` for the version a run used): the API server never imports a DAG file
(Airflow 3's security model; docs/threat-model.md). The CLI parses ``--dags-folder`` (default
``[core] dags_folder``) with Airflow's DagBag where the DAG files are, then plans from the
serialized form of what it parsed (:func:`load_dag`), through the same adapter
(:mod:`.serialized`) as the page, so the two answer alike.

Deserializing runs no DAG-author code. Each deserialized version is kept by its version id and
its content's hash (Airflow may rewrite a version in place until a task ran with it), and
nothing holds a lock across a DB read or a deserialization: two requests for one version may
both read it, and one wins the cache.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Any

from airflow_jrs.actions import NOT_FOUND, USAGE, ActionError

#: How many deserialized DAG versions an API server keeps (each a few hundred KB at most).
_KEPT_VERSIONS = 64
_versions: dict[tuple[str, str], Any] = {}


def load_dag(dag_id: str, dags_folder: str | None) -> Any:
    """The DAG ``dag_id`` parsed from ``dags_folder`` (a folder or a file; default ``[core]
    dags_folder``), in its serialized form: what the dag-processor would store for it."""
    from airflow.configuration import conf

    from airflow_jrs.compat import dag_bag, serialized_form

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
    return serialized_form(dag)


def find_dag(dag_id: str) -> Any:
    """The latest serialized version of ``dag_id`` in Airflow's metadata DB, as the scheduler
    and the API server's own views read it. A DAG the dag-processor never serialized is not
    found, naming no other DAG (the user may not read them)."""
    return find_dag_version(dag_id)[1]


def find_dag_version(dag_id: str) -> tuple[tuple[str, str], Any]:
    """:func:`find_dag`, with the version's key (its id and content hash): what a page that
    keeps what it planned compares to know the DAG did not change."""
    from airflow.models.serialized_dag import SerializedDagModel
    from airflow.utils.session import create_session

    with create_session() as session:
        # The latest version's key first (Airflow's own "latest" query, two columns): a version
        # deserialized before is not read from the DB again, which a page asked every few
        # seconds would otherwise pay for in full (its JSON is the largest row Airflow keeps).
        latest = SerializedDagModel.latest_item_select_object(dag_id)
        columns = (SerializedDagModel.dag_version_id, SerializedDagModel.dag_hash)
        found = session.execute(latest.with_only_columns(*columns))
        row = found.first()
        key = (str(row.dag_version_id), row.dag_hash) if row is not None else ("", "")
        dag = _versions.get(key) if row is not None else None
        if dag is None and row is not None:
            model = SerializedDagModel.get(dag_id, session=session)
            if model is not None:
                key, dag = (str(model.dag_version_id), model.dag_hash), _kept(model)
    if dag is None:
        raise ActionError(
            f"Airflow knows no DAG {dag_id!r} (not parsed yet, or deleted)", NOT_FOUND, cli="check the DAG id",
            ui="check the DAG id",
        )  # fmt: skip
    return key, dag


def version_dag(version_id: str) -> Any | None:
    """The serialized DAG of one DAG version (the one a run used); ``None`` when the metadata DB
    no longer has it (versions are pruned with their runs)."""
    from airflow.models.serialized_dag import SerializedDagModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        where = SerializedDagModel.dag_version_id == version_id
        found = session.execute(select(SerializedDagModel.dag_hash).where(where)).first()
        if found is None:
            return None
        kept = _versions.get((version_id, found.dag_hash))
        if kept is not None:
            return kept
        model = session.scalar(select(SerializedDagModel).where(where))
        return _kept(model) if model is not None else None


def _kept(model: Any) -> Any:
    """``model``'s DAG, deserialized once per version and content: Airflow rewrites a version in
    place (same id, new hash) while no task ran with it, so the id alone would keep a stale DAG."""
    key = (str(model.dag_version_id), model.dag_hash)
    dag = _versions.get(key)
    if dag is None:
        dag = model.dag  # deserializes: Airflow's own classes, no DAG-author module
        if len(_versions) >= _KEPT_VERSIONS:
            _versions.pop(next(iter(_versions)), None)
        _versions[key] = dag
    return dag
