"""One planning rule: the page and the CLI plan from the serialized DAG, and agree with a run.

The page's API server reads the serialized DAG from the metadata DB (stored as JSON); the CLI
plans from the serialized form of the DAG it parsed (:func:`airflow_jrs.compat.serialized_form`).
Both go through :mod:`airflow_jrs.actions.planning.serialized` and render ``job_id`` templates in
a sandbox. This suite plans every example and test DAG of the repository, plus one DAG of edge
cases, both ways, and checks each job id against the one the task computes at run time (its
``job_id`` rendered with the parsed DAG's own Jinja environment, user macros included, then the
operators' own rule). What the serialized DAG cannot answer must be named "needs the DAG file",
and is listed here by task (``NEEDS_DAG_FILE``); anything else must agree exactly.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pendulum
import pytest

from airflow_jrs.actions.planning.job_ids import intervals, job_ids
from airflow_jrs.actions.planning.serialized import NEEDS_DAG_FILE, literal_length
from airflow_jrs.compat import dag_bag, serialized_form
from airflow_jrs.domain.identity import job_id_for
from airflow_jrs.protocol.guarded_task import guarded_kind, is_templated

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = [
    ROOT / "dags",
    ROOT / "tests" / "airflow" / "dags",
    ROOT / "tests" / "airflow" / "mapped_dags",
    ROOT / "tests" / "airflow" / "identity_dags",
    ROOT / "tests" / "airflow" / "missing_only_dags",
    ROOT / "tests" / "airflow" / "no_dag_code_dags",
    ROOT / "tests" / "e2e" / "dags",
]
START, END = datetime(2013, 1, 1, tzinfo=UTC), datetime(2013, 1, 3, 23, 59, tzinfo=UTC)

EDGES = """
from datetime import UTC, datetime, timedelta
from airflow.sdk import DAG, task
from airflow.sdk import TaskGroup
from airflow_jrs.operators import JrsSparkSubmitOperator, JrsSparkSqlOperator, jrs_spark_job

START = datetime(2013, 1, 1, tzinfo=UTC)

with DAG("jrs_edges_cron", schedule="0 6 * * *", start_date=START, catchup=False,
         user_defined_macros={"region": lambda: "eu"}):
    JrsSparkSubmitOperator(task_id="plain", application="/nowhere/a.py", conn_id="spark_local")
    JrsSparkSubmitOperator(task_id="ds_add", application="/nowhere/a.py", conn_id="spark_local",
                           job_id="e.{{ macros.ds_add(ds, -1) }}.{{ ts_nodash }}")
    JrsSparkSubmitOperator(task_id="filtered", application="/nowhere/a.py", conn_id="spark_local",
                           job_id="f.{{ logical_date | ds_nodash }}.{{ data_interval_end | ts }}")
    JrsSparkSubmitOperator(task_id="user_macro", application="/nowhere/a.py", conn_id="spark_local",
                           job_id="u.{{ region() }}.{{ ds }}")
    JrsSparkSubmitOperator(task_id="long", application="/nowhere/a.py", conn_id="spark_local",
                           application_args=["x" * 5000])  # past max_templated_field_length
    with TaskGroup("grp"):
        JrsSparkSqlOperator(task_id="sql", sql="SELECT 1", conn_id="spark_local", job_id="sql.{{ ds_nodash }}")
    jrs_spark_job("factory", application="/nowhere/b.py", conn_id="spark_local")

    @task.jrs_pyspark(job_id="py.{{ ds }}.{{ ti.task_id }}")
    def py(spark=None, jrs=None):
        return 1

    py()
    JrsSparkSubmitOperator.partial(task_id="mapped", application="/nowhere/a.py", conn_id="spark_local").expand(
        application_args=[["a"], ["b"], ["c"]]
    )

import pendulum
from airflow.timetables.events import EventsTimetable

AMSTERDAM = pendulum.timezone("Europe/Amsterdam")
with DAG("jrs_edges_events", start_date=datetime(2013, 1, 1, tzinfo=AMSTERDAM), catchup=False,
         schedule=EventsTimetable([pendulum.datetime(2013, 1, d, 0, 30, tz=AMSTERDAM) for d in (1, 2, 3)])):
    JrsSparkSubmitOperator(task_id="event", application="/nowhere/a.py", conn_id="spark_local",
                           job_id="ev.{{ ds }}.{{ ts_nodash }}")

with DAG("jrs_edges_delta", schedule=timedelta(hours=12), start_date=START, catchup=False):
    JrsSparkSubmitOperator(task_id="half_day", application="/nowhere/a.py", conn_id="spark_local",
                           job_id="h.{{ ts_nodash }}")
"""

#: (dag_id, task_id): the tasks the serialized DAG cannot plan, by design.
NEEDS = {("jrs_edges_cron", "user_macro")}


def _live_ids(dag: Any, leave_out: set[str] = frozenset()) -> dict[tuple[datetime | None, str, int], str]:
    """Each guarded task's job id per interval as its run computes it: the task's own ``job_id``
    rendered with the parsed DAG's Jinja environment (user macros included)."""
    import jinja2
    from airflow.sdk.execution_time import macros

    env = dag.get_template_env().overlay(undefined=jinja2.StrictUndefined)
    out = {}
    for info in intervals(serialized_form(dag), START, END):
        logical = pendulum.instance(info.logical_date).in_timezone("UTC")  # a run's logical date is UTC
        for task in dag.tasks:
            mapped = getattr(task, "is_mapped", False)
            if not guarded_kind(task.operator_class if mapped else task) or task.task_id in leave_out:
                continue
            template = task.partial_kwargs.get("job_id") if mapped else task.job_id
            for index in range(literal_length(task) or 0) if mapped else [-1]:
                ti = SimpleNamespace(dag_id=dag.dag_id, task_id=task.task_id, map_index=index)
                interval = info.data_interval
                context = {
                    "dag": dag, "task": task, "ti": ti, "dag_id": dag.dag_id, "task_id": task.task_id,
                    "logical_date": logical, "ds": logical.strftime("%Y-%m-%d"),
                    "ds_nodash": logical.strftime("%Y%m%d"), "ts": logical.isoformat(),
                    "ts_nodash": logical.strftime("%Y%m%dT%H%M%S"), "macros": macros,
                    "data_interval_start": interval.start, "data_interval_end": interval.end,
                }  # fmt: skip
                rendered = env.from_string(template).render(**context) if is_templated(template) else template
                key = {"ti": ti, "logical_date": logical, "data_interval_start": interval.start,
                       "partition_key": None, "run_id": "r"}  # fmt: skip
                out[(logical, task.task_id, index)] = job_id_for(rendered, key)
    return out


def _page_form(dag: Any) -> Any:
    """What the API server reads: the serialized DAG as the metadata DB stores it (JSON)."""
    try:
        from airflow.serialization.serialized_objects import DagSerialization as codec
    except ImportError:  # Airflow 3.1
        from airflow.serialization.serialized_objects import SerializedDAG as codec  # type: ignore[attr-defined,no-redef]
    return codec.from_dict(json.loads(json.dumps(codec.to_dict(dag))))


def _planned(dag: Any) -> tuple[dict[tuple[datetime | None, str, int], str], list[str]]:
    found, notes = job_ids(dag, START, END, runs=None, versions=None)
    utc = {info.logical_date: pendulum.instance(info.logical_date).in_timezone("UTC") for info, _, _ in found}
    return {(utc[info.logical_date], task.task_id, task.map_index): job_id for info, task, job_id in found}, notes


def _dags(folder: str) -> dict[str, Any]:
    bag = dag_bag(folder)
    assert not bag.import_errors, bag.import_errors
    return {d: dag for d, dag in bag.dags.items() if any(
        guarded_kind(t.operator_class if getattr(t, "is_mapped", False) else t) for t in dag.tasks)}  # fmt: skip


@pytest.fixture(scope="module")
def every_dag(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    edges = tmp_path_factory.mktemp("edges")
    (edges / "jrs_edges.py").write_text(EDGES)
    found: dict[str, Any] = {}
    for folder in [*FOLDERS, edges]:
        found |= _dags(str(folder))
    return found


def test_the_page_and_the_cli_plan_every_dag_as_its_runs_name_their_jobs(every_dag: dict[str, Any]) -> None:
    assert {"jrs_edges_cron", "jrs_edges_delta", "jrs_probe", "jrs_mapped_regions"} <= set(every_dag)
    checked = 0
    for dag_id, dag in sorted(every_dag.items()):
        if getattr(dag.timetable, "partitioned", False) or not list(intervals(serialized_form(dag), START, END)):
            continue  # no run in the window (no schedule): nothing to compare
        cli, cli_notes = _planned(serialized_form(dag))
        page, page_notes = _planned(_page_form(dag))
        assert cli == page and cli_notes == page_notes, dag_id
        needs = {t for d, t in NEEDS if d == dag_id}
        for task_id in needs:
            assert any(f"task {task_id!r}" in n and NEEDS_DAG_FILE in n for n in page_notes), page_notes
            assert not any(key[1] == task_id for key in page), "a job id the sandbox cannot know was guessed"
        assert page == _live_ids(dag, needs), dag_id
        checked += 1
    assert checked >= 10


def test_a_long_argument_is_fingerprinted_untruncated(every_dag: dict[str, Any]) -> None:
    """Airflow truncates a template field past ``[core] max_templated_field_length`` in the
    serialized DAG; the fingerprint the dag-processor serializes is computed before that."""
    from airflow_jrs.actions.planning.serialized import plan_tasks
    from airflow_jrs.domain.identity import application_fingerprint

    tasks, _, _ = plan_tasks(_page_form(every_dag["jrs_edges_cron"]))
    long = next(t for t in tasks if t.task_id == "long")
    assert long.fingerprint == application_fingerprint("/nowhere/a.py", ["x" * 5000], None)


ESCAPES = {
    "internals": "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "os_by_uuid": "x.{{ macros.uuid.os.system('touch MARK') }}",
    "exec_by_sys": "x.{{ macros.uuid.sys.modules['builtins'].exec('open(\\'MARK\\', \\'w\\')') }}",
    "codecs_open": "x.{{ macros.json.codecs.open('MARK', 'w').write('x') }}",
    "sleep": "x.{{ macros.time.sleep(3) }}",
    "loop": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}x",
    "huge": "x.{{ ('a' * 10000000000) | length }}",
    "statement": "{% set y = 1 %}x.{{ ds }}",
    "unparsable": "x.{{ ds ",
    "division": "x.{{ 1 / 0 }}",
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_a_template_that_could_run_code_or_hang_is_not_planned(name, dag_folder, tmp_path, monkeypatch) -> None:
    """The API server renders only what a job id needs (actions/planning/templates.py): Airflow's
    ``macros`` module leads to ``os`` and ``sys``, and loops or arithmetic hang it. Such a task
    is named "needs the DAG file", and nothing of it runs."""
    monkeypatch.chdir(tmp_path)
    folder = dag_folder(
        "jrs_escape.py",
        f"""
from datetime import UTC, datetime
from airflow.sdk import DAG
from airflow_jrs.operators import JrsSparkSubmitOperator
with DAG("jrs_escape", schedule="@daily", start_date=datetime(2013, 1, 1, tzinfo=UTC), catchup=False):
    JrsSparkSubmitOperator(task_id="t", application="/nowhere/a.py", conn_id="spark_local", job_id={ESCAPES[name]!r})
    JrsSparkSubmitOperator(task_id="ok", application="/nowhere/a.py", conn_id="spark_local", job_id="ok.{{{{ ds }}}}")
""",
    )
    dag = dag_bag(folder).dags["jrs_escape"]
    page, notes = _planned(_page_form(dag))
    assert {task_id for _, task_id, _ in page} == {"ok"}, "the other task is still planned"
    assert any("task 't'" in n and NEEDS_DAG_FILE in n for n in notes), notes
    assert not (tmp_path / "MARK").exists(), "the template ran code in the planning process"
