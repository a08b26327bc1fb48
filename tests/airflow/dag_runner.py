"""Run the test DAG through Airflow's dag.test() with environment-driven shape."""

from __future__ import annotations

import importlib.util
import itertools
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

DAG_FILE = Path(__file__).parent / "dags" / "jrs_test_dags.py"
DATE = datetime(2013, 1, 1, tzinfo=UTC)
_counter = itertools.count()


def load_dag(dag_id: str = "jrs_tiny") -> Any:
    """Parse the DAG file again, so environment changes since the last run take effect."""
    spec = importlib.util.spec_from_file_location(f"jrs_test_dags_{next(_counter)}", DAG_FILE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from airflow.sdk import DAG

    dags = [v for v in vars(module).values() if isinstance(v, DAG)]
    return next(d for d in dags if d.dag_id == dag_id) if dags else module.dag


def run_dag(
    logical_date: datetime = DATE, dag_id: str = "jrs_tiny", run_conf: dict[str, Any] | None = None
) -> dict[str, str | None]:
    """dag.test() one run (``run_conf``: the run's conf, as "Trigger DAG w/ config" sets it);
    returns task id -> final state."""
    dag = load_dag(dag_id)
    dr = dag.test(logical_date=logical_date, run_conf=run_conf)
    return {ti.task_id: (str(ti.state) if ti.state else None) for ti in dr.get_task_instances()}
