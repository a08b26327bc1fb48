"""What differs between the Airflow minors this provider supports (3.1, 3.2, 3.3), in one place.

The Airflow adapters import Airflow's public names through the common-compat provider
(``airflow.providers.common.compat.sdk``), which already knows where each one lives in each
Airflow 3 minor. This module holds only what common-compat does not cover:

* the version flags (common-compat asks providers to keep their own copy, not to import its);
* ``AirflowTaskTerminated`` (``airflow.exceptions`` before 3.2, ``airflow.sdk.exceptions`` after);
* the DagBag and the timetable call the planner needs (``next_dagrun_info_v2`` and
  ``coerce_to_core_timetable`` arrived in 3.2; 3.1 has ``next_dagrun_info``);
* removing an empty folder on both universal-pathlib lines (Airflow 3.1 pins ``<0.3``, whose
  ``rmdir(recursive=False)`` raises ``StopIteration`` on an empty folder);
* the features that need a newer Airflow, named with the version they need, so the adapters can
  say so instead of silently doing something else.

The planner and the adapters call these; nothing below the adapters' layer imports this module
(the architecture test places it with them).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AIRFLOW_VERSION",
    "AIRFLOW_VERSION_TEXT",
    "AIRFLOW_V_3_2_PLUS",
    "AIRFLOW_V_3_3_PLUS",
    "AirflowTaskTerminated",
    "core_timetable",
    "dag_bag",
    "needs_airflow_3_3",
    "next_dagrun_info",
    "remove_empty_folder",
    "serialized_form",
]


def _airflow_version() -> tuple[int, int, int]:
    from airflow import __version__
    from packaging.version import Version

    version = Version(__version__)
    return version.major, version.minor, version.micro


AIRFLOW_VERSION: tuple[int, int, int] = _airflow_version()
AIRFLOW_VERSION_TEXT = ".".join(map(str, AIRFLOW_VERSION))
AIRFLOW_V_3_2_PLUS = AIRFLOW_VERSION >= (3, 2, 0)
AIRFLOW_V_3_3_PLUS = AIRFLOW_VERSION >= (3, 3, 0)

try:  # Airflow 3.2+
    from airflow.sdk.exceptions import AirflowTaskTerminated
except ImportError:  # Airflow 3.1
    from airflow.exceptions import AirflowTaskTerminated  # type: ignore[no-redef,attr-defined]


def needs_airflow_3_3(feature: str) -> str | None:
    """Why ``feature`` cannot work on this Airflow, or ``None`` when it can (3.3 and later).

    Starting a task in the triggerer (``start_from_trigger``) is disabled in Airflow 3.1 and 3.2
    (``models/dagrun.py``), and the trigger's templating (``BaseTrigger`` as a ``Templater``) and
    ``XCom.aset`` arrived in 3.3 with it.
    """
    if AIRFLOW_V_3_3_PLUS:
        return None
    return (
        f"{feature} needs Airflow 3.3 or later, and this is Airflow {AIRFLOW_VERSION_TEXT}: "
        "Airflow 3.1 and 3.2 cannot start a task in the triggerer"
    )


def dag_bag(dag_folder: str) -> Any:
    """A ``DagBag`` of ``dag_folder`` (``airflow.dag_processing.dagbag`` from 3.2, ``airflow.models`` in 3.1)."""
    try:
        from airflow.dag_processing.dagbag import DagBag
    except ImportError:  # Airflow 3.1
        from airflow.models.dagbag import DagBag  # type: ignore[no-redef,attr-defined]
    return DagBag(dag_folder=dag_folder)


def serialized_form(dag: Any) -> Any:
    """``dag`` (a parsed SDK DAG) as the dag-processor stores it and the API server reads it:
    serialized, then deserialized (``DagSerialization`` from 3.3, ``SerializedDAG`` before)."""
    try:
        from airflow.serialization.serialized_objects import DagSerialization as codec
    except ImportError:  # Airflow 3.1, 3.2
        from airflow.serialization.serialized_objects import SerializedDAG as codec  # type: ignore[attr-defined,no-redef,assignment]
    return codec.from_dict(codec.to_dict(dag))


def core_timetable(dag: Any) -> Any:
    """The DAG's timetable as the scheduler's core class: 3.2 split SDK and core timetables."""
    try:
        from airflow.serialization.encoders import coerce_to_core_timetable
    except ImportError:  # Airflow 3.1: the DAG holds a core timetable already
        return dag.timetable
    return coerce_to_core_timetable(dag.timetable)


def next_dagrun_info(timetable: Any, last: Any, restriction: Any) -> Any:
    """The run after ``last`` (a ``DagRunInfo`` or ``None``): ``next_dagrun_info_v2`` from 3.2,
    ``next_dagrun_info`` with the last run's data interval in 3.1."""
    if hasattr(timetable, "next_dagrun_info_v2"):
        return timetable.next_dagrun_info_v2(last_dagrun_info=last, restriction=restriction)
    return timetable.next_dagrun_info(
        last_automated_data_interval=last.data_interval if last is not None else None, restriction=restriction
    )


def remove_empty_folder(path: Any) -> None:
    """Remove the empty folder ``path`` (an ``ObjectStoragePath``), on universal-pathlib 0.2 and 0.3.

    universal-pathlib 0.2 (Airflow 3.1 pins ``<0.3``) checks emptiness with ``next(iterdir())`` and
    lets the ``StopIteration`` of an empty folder escape; its filesystem's own ``rmdir`` does the
    removal. A folder that is not empty still raises, as ``rmdir(recursive=False)`` does on 0.3.
    """
    try:
        path.rmdir(recursive=False)
    except StopIteration:
        if any(True for _ in path.iterdir()):
            raise OSError(f"folder {path} is not empty") from None
        path.fs.rmdir(path.path)
