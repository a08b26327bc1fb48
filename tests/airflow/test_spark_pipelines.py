"""JrsSparkPipelinesOperator with the real ``spark-pipelines`` CLI of pyspark's distribution and a real Redis.

What is counted, not mocked: Spark applications (event log files: one per ``spark-pipelines``
run), the datasets on disk, the processes on this host (psutil), the store's entries. Spark
costs four CLI starts: the example DAG's run through ``dag.test()`` (its second run starts
none), a run whose definition fails analysis, and two runs of a pipeline that sleeps while its
graph is registered, ended by ``on_kill`` and by killing the supervisor.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil
import pyarrow.parquet as pq
import pytest

from airflow_jrs.domain.pipeline_spec import pipeline_fingerprint
from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.launch.pipelines_launcher import TEMP_PREFIX, PipelineRunError, PipelinesLauncher
from airflow_jrs.operators.spark_pipelines import JrsSparkPipelinesOperator
from airflow_jrs.protocol.guarded_task import planned_fingerprint
from airflow_jrs.protocol.processes import find_job_processes
from jrs_testbench.invariants import assert_clean_outputs_exist

pytestmark = [pytest.mark.airflow]

DAY = datetime(2013, 1, 1, tzinfo=UTC)
JOB = "d.t.2013-01-01"
#: The example DAG (two tasks: counts >> counts_cleanup) and its pipeline: two materialized views.
EXAMPLE = Path(__file__).resolve().parents[2] / "dags" / "daily_counts_pipeline.py"
EXAMPLE_JOB = "daily_counts_pipeline.counts.2013-01-01"
SPEC = EXAMPLE.parent / "pipelines" / "daily_counts" / "spark-pipeline.yml"
_loads = itertools.count()


def context(day: datetime = DAY, try_number: int = 1) -> dict[str, Any]:
    ti = SimpleNamespace(dag_id="d", task_id="t", try_number=try_number, map_index=-1, xcom_push=lambda **kw: None)
    return {"ti": ti, "run_id": f"scheduled__{day.date()}", "data_interval_start": day, "logical_date": day}


def operator(jrs_env: Any, spec: Path = SPEC, **kwargs: Any) -> JrsSparkPipelinesOperator:
    return JrsSparkPipelinesOperator(
        task_id="t", pipeline_spec=str(spec), conf=jrs_env.spark_conf(), outputs={"daily": "warehouse/daily"}, **kwargs
    )


@pytest.fixture
def quiet_spec(tmp_path: Path) -> Path:
    """The example pipeline plus a definition file that sleeps while the graph is registered: the
    CLI's Python then prints nothing (a write to a closed pipe cannot end it) and the Connect
    server idles, so a kill proves what it proves without a pipeline run's CPU."""
    project = tmp_path / "quiet"
    shutil.copytree(SPEC.parent, project)
    flag = tmp_path / "registering"
    (project / "transformations" / "quiet.py").write_text(
        f"import pathlib, time\n\npathlib.Path({str(flag)!r}).touch()\ntime.sleep(900)\n"
    )
    return project / SPEC.name


@pytest.fixture(autouse=True)
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """The test's own working directory (nothing may be written into the repository's) and its own
    temporary folder, where each attempt's folder (``jrs-pipeline-*``) is made: this test's
    processes are the ones naming it, whatever runs beside it on the host."""
    cwd, attempts = tmp_path / "cwd", tmp_path / "attempts"
    cwd.mkdir()
    attempts.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(tempfile, "tempdir", str(attempts))
    return SimpleNamespace(cwd=cwd, attempts=attempts)


def pipeline_processes(attempts: Path) -> list[psutil.Process]:
    """spark-pipelines processes of this test's guarded attempts (the JVM, the CLI's Python, the
    supervisor): each names its attempt's temporary project copy, under ``attempts``, on its
    command line."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info.get("cmdline") or [])
        if f"{attempts}/{TEMP_PREFIX}" in cmdline and "--spec" in cmdline:
            found.append(proc)
    return [proc for proc in found if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE]


def load_example() -> Any:
    """The example DAG, parsed again (its event log setting is read from the environment)."""
    spec = importlib.util.spec_from_file_location(f"daily_counts_pipeline_{next(_loads)}", EXAMPLE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


@pytest.mark.spark
def test_a_date_is_computed_once_under_its_fence_committed_by_the_cleanup_and_then_starts_no_pipeline(
    jrs_env, monkeypatch, workdir
):
    monkeypatch.setenv("JRS_SPARK_EVENT_LOG_DIR", jrs_env.spark.uri)  # one event log per pipeline run
    # the provider's OpenLineage parent injection, honoured at launch (docs/how-to/lineage.md)
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__SPARK_INJECT_PARENT_JOB_INFO", "true")
    dr = load_example().test(logical_date=DAY)
    states = {ti.task_id: str(ti.state) for ti in dr.get_task_instances()}
    assert states == {"counts": "success", "counts_cleanup": "success"}
    assert jrs_env.launches() == 1
    (received,) = jrs_env.spark.properties()
    assert received["spark.openlineage.parentJobName"] == "daily_counts_pipeline.counts", received
    entry = jrs_env.store.get_entry(EXAMPLE_JOB)
    assert entry.state.value == "clean" and entry.result.metrics == {"datasets": ["daily", "numbers"]}
    assert len(assert_clean_outputs_exist(jrs_env.store)) == 1
    # the datasets are under the winner's fenced folder, not in a shared warehouse
    daily = Path(entry.result.outputs["daily"])
    assert daily.parent.name == "warehouse" and daily.parent.parent.name.startswith(f"fence-{entry.result.fence}-")
    table = pq.read_table(str(daily)).to_pydict()
    assert dict(zip(table["kind"], table["n"], strict=True)) == {"even": 13, "odd": 12}
    assert (daily.parent.parent / "_JRS_COMMIT.json").exists()
    assert not pipeline_processes(workdir.attempts)
    assert not (SPEC.parent / "spark-warehouse").exists()  # nothing written beside the project
    assert list(workdir.cwd.iterdir()) == []  # nor in the task's working directory
    assert list(workdir.attempts.iterdir()) == []  # the attempt's folder is gone

    # the same date again: the store answers, no pipeline runs (no application, no process)
    again = load_example().test(logical_date=DAY)
    assert {ti.task_id: str(ti.state) for ti in again.get_task_instances()} == states
    assert jrs_env.launches() == 1
    assert jrs_env.store.get_entry(EXAMPLE_JOB).result.fence == entry.result.fence


@pytest.mark.spark
def test_a_failing_definition_fails_the_task_with_the_pipelines_error_and_records_failed(jrs_env, tmp_path, workdir):
    project = tmp_path / "broken"
    shutil.copytree(SPEC.parent, project)
    (project / "transformations" / "daily.sql").write_text(
        "CREATE MATERIALIZED VIEW daily AS SELECT no_such_column, count(*) AS n FROM numbers GROUP BY 1;\n"
    )
    with pytest.raises(PipelineRunError) as failed:
        operator(jrs_env, project / SPEC.name).execute(context())
    message = str(failed.value)
    # what went wrong first, in the pipeline's own words; then the output's tail, without Java frames
    first, *rest = message.splitlines()
    assert first.startswith("spark-pipelines exited with code 1: pyspark.errors.")
    assert "AnalysisException: Failed to resolve flows in the pipeline." in first
    assert rest[:3] == [
        "What the pipeline reported:",
        "Failed to resolve flow: 'spark_catalog.default.daily'.",
        rest[2],
    ]
    assert rest[2].startswith("Error: [UNRESOLVED_COLUMN") and "no_such_column" in rest[2]
    assert "\tat org." not in message
    entry = jrs_env.store.get_entry(JOB)
    assert entry is not None and entry.result.status.value == "FAILED"  # the last try records FAILED
    assert "no_such_column" in (entry.result.error or "")
    assert not pipeline_processes(workdir.attempts)


def start_task(op: JrsSparkPipelinesOperator, day: datetime) -> tuple[threading.Thread, list[BaseException]]:
    """``op.execute`` in a thread, as a task runner would run it; what it raised lands in the list."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            op.execute(context(day))
        except BaseException as exc:
            failed.append(exc)

    task = threading.Thread(target=run, name="task")
    task.start()
    return task, failed


def running_tree(task: threading.Thread, quiet_spec: Path, attempts: Path) -> list[psutil.Process]:
    """Once the whole tree runs and the CLI registers the quiet definition: the supervisor, the
    spark-pipelines JVM, the CLI's Python (its child) and the local Spark Connect server that
    Python started (a JVM, its child)."""
    deadline = time.monotonic() + 300
    flag = quiet_spec.parent.parent / "registering"
    while time.monotonic() < deadline and task.is_alive():
        if not flag.exists():
            time.sleep(0.2)
            continue
        for proc in pipeline_processes(attempts):
            with contextlib.suppress(psutil.Error):
                if proc.name().startswith("python") and "pipelines/cli.py" in " ".join(proc.cmdline()):
                    servers = [c for c in proc.children() if c.name() == "java"]
                    if servers:
                        return [*pipeline_processes(attempts), *servers]
        time.sleep(0.2)
    raise AssertionError("spark-pipelines never started its Connect server")


def alive(procs: list[psutil.Process]) -> list[int]:
    return [proc.pid for proc in procs if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.spark
def test_a_killed_attempt_leaves_no_spark_pipelines_process_and_records_no_success(jrs_env, quiet_spec, workdir):
    op = operator(jrs_env, quiet_spec)
    task, failed = start_task(op, datetime(2013, 1, 2, tzinfo=UTC))
    tree = running_tree(task, quiet_spec, workdir.attempts)
    cwds = {proc.pid: Path(proc.cwd()) for proc in tree}
    op.on_kill()
    task.join(120)
    assert not task.is_alive() and failed, "execute must fail after on_kill"
    # every process of the run worked in the attempt's own folder, not in the task's (shared) one
    folder = Path(op._attempt.launcher._folder)
    assert all(cwd.is_relative_to(folder) for cwd in cwds.values()), cwds
    assert not pipeline_processes(workdir.attempts) and not alive(tree)
    assert not find_job_processes(jrs_env.namespace, "d.t.2013-01-02")
    entry = jrs_env.store.get_entry("d.t.2013-01-02")
    assert entry is None or entry.result.status.value != "SUCCEEDED"
    folder = op._attempt.launcher._folder
    assert folder is not None and not Path(folder).exists()  # the attempt's project copy is gone


@pytest.mark.spark
def test_when_the_supervisor_dies_every_process_of_the_pipeline_dies_with_it(jrs_env, quiet_spec, monkeypatch, workdir):
    """The chain of death signals alone (supervisor -> JVM -> the CLI's Python -> its Connect
    server), as when the supervisor fences itself or is killed: the launcher's own sweep after
    the run is switched off, so only the chain can have ended them."""
    monkeypatch.setattr(PipelinesLauncher, "_sweep", lambda self: None)
    op = operator(jrs_env, quiet_spec)
    task, failed = start_task(op, datetime(2013, 1, 3, tzinfo=UTC))
    tree = running_tree(task, quiet_spec, workdir.attempts)
    (supervisor,) = [proc for proc in tree if "airflow_jrs.launch.supervisor" in " ".join(proc.cmdline())]
    supervisor.kill()
    task.join(120)
    assert not task.is_alive() and failed
    psutil.wait_procs(tree, timeout=120)  # a bound for a failure, not a pass: the quiet CLI sleeps 900 s
    assert not alive(tree), [proc.cmdline()[:3] for proc in tree if proc.pid in alive(tree)]
    entry = jrs_env.store.get_entry("d.t.2013-01-03")
    assert entry is None or entry.result.status.value != "SUCCEEDED"


def test_the_fingerprint_follows_the_definitions_and_job_version_not_the_storage(tmp_path):
    project = tmp_path / "p"
    (project / "transformations").mkdir(parents=True)
    spec = project / "spark-pipeline.yml"
    spec.write_text("name: p\nstorage: file:///a\nlibraries:\n  - glob:\n      include: transformations/**\n")
    (project / "transformations" / "v.sql").write_text("CREATE MATERIALIZED VIEW v AS SELECT 1 AS x;\n")
    base = pipeline_fingerprint(str(spec), None)
    spec.write_text(spec.read_text().replace("file:///a", "file:///b"))
    assert pipeline_fingerprint(str(spec), None) == base  # storage is the guard's, per fence
    assert pipeline_fingerprint(str(spec), "2") != base
    (project / "transformations" / "v.sql").write_text("CREATE MATERIALIZED VIEW v AS SELECT 2 AS x;\n")
    assert pipeline_fingerprint(str(spec), None) != base
    with pytest.raises(JrsConfigError, match="does not exist on this worker"):
        pipeline_fingerprint(str(tmp_path / "missing.yml"), None)
    # airflow-jrs plan computes the one the task will record
    task = JrsSparkPipelinesOperator(task_id="t", pipeline_spec=str(spec), job_version="2")
    assert planned_fingerprint(task) == pipeline_fingerprint(str(spec), "2")


def test_what_cannot_be_fenced_is_refused_with_the_reason(monkeypatch):
    with pytest.raises(JrsConfigError, match="dry-run validates"):
        JrsSparkPipelinesOperator(task_id="t", pipeline_spec=str(SPEC), pipeline_command="dry-run")
    with pytest.raises(JrsConfigError, match=r"spark\.sql\.warehouse\.dir"):
        JrsSparkPipelinesOperator(
            task_id="t", pipeline_spec=str(SPEC), conf={"spark.sql.warehouse.dir": "/shared"}
        )._checked_conf()
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_YARN", '{"conn_type": "spark", "host": "yarn"}')
    with pytest.raises(JrsConfigError, match="is not supported"):
        JrsSparkPipelinesOperator(task_id="t", pipeline_spec=str(SPEC), conn_id="spark_yarn")._checked_conf()
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_L", '{"conn_type": "spark", "host": "local[1]"}')
    assert JrsSparkPipelinesOperator(task_id="t", pipeline_spec=str(SPEC), conn_id="spark_l")._checked_conf() == {}


#: A stand-in for ``spark-pipelines`` that exits 0 as a run whose datasets went elsewhere would:
#: it notes where it ran, and makes the fence's warehouse with the folders named in ``$STUB_DATASETS`` only.
_STUB = """\
import os, pathlib, sys
args = sys.argv[1:]
conf = dict(args[i + 1].split("=", 1) for i, arg in enumerate(args) if arg == "--conf")
pathlib.Path(os.environ["STUB_CWD"]).write_text(os.getcwd())
pathlib.Path(conf["spark.sql.warehouse.dir"]).mkdir(parents=True)  # empty, as the server leaves it
for name in filter(None, os.environ.get("STUB_DATASETS", "").split(",")):
    pathlib.Path(conf["spark.sql.warehouse.dir"], name).mkdir(parents=True)
"""


@pytest.mark.parametrize(
    ("datasets", "outputs", "missing"),
    [
        ("", None, "left no dataset under the attempt's fenced warehouse"),
        ("numbers", {"daily": "warehouse/daily"}, "the output(s) 'daily'"),
    ],
    ids=["no-dataset", "missing-output"],
)
def test_a_run_that_exits_0_without_its_datasets_under_the_fence_records_no_success(
    jrs_env, tmp_path, workdir, datasets, outputs, missing
):
    """The launcher and the supervisor as they run, the CLI replaced by a stand-in that ends well
    but writes nothing (or not what ``outputs`` names) in the fence's warehouse: what a catalog
    or metastore that slipped through the refusals would leave."""
    stub_dir = tmp_path / "bin"
    stub_dir.mkdir()
    stub = stub_dir / "spark-pipelines"
    stub.write_text(f"#!{sys.executable}\n{_STUB}")
    stub.chmod(0o755)
    ran_in = tmp_path / "ran-in"
    env = {"PATH": f"{stub_dir}:{os.environ['PATH']}", "STUB_CWD": str(ran_in), "STUB_DATASETS": datasets}
    op = JrsSparkPipelinesOperator(task_id="t", pipeline_spec=str(SPEC), outputs=outputs, env_vars=env)
    with pytest.raises(PipelineRunError, match=re.escape(missing)) as failed:
        op.execute(context())
    assert "nothing recorded" in str(failed.value)
    entry = jrs_env.store.get_entry(JOB)
    assert entry is None or entry.result.status.value != "SUCCEEDED"
    # the CLI ran in the attempt's own folder (removed since), not in the task's working directory
    assert Path(ran_in.read_text()).parent == workdir.attempts and Path(ran_in.read_text()).name.startswith(TEMP_PREFIX)
    assert list(workdir.cwd.iterdir()) == []


def test_a_catalog_or_metastore_that_would_move_the_datasets_off_the_fence_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    project = tmp_path / "p"
    shutil.copytree(SPEC.parent, project)
    spec = project / SPEC.name
    base = spec.read_text()

    def refusal(text: str = base, **kwargs: Any) -> str:
        spec.write_text(text)
        with pytest.raises(JrsConfigError) as refused:
            JrsSparkPipelinesOperator(task_id="t", pipeline_spec=str(spec), **kwargs)._checked_conf()
        return str(refused.value)

    assert "catalog 'lake' is not supported" in refusal(base + "catalog: lake\n")
    for key in ("spark.sql.catalog.lake", "spark.sql.catalogImplementation", "hive.metastore.uris",
                "javax.jdo.option.ConnectionURL", "spark.hadoop.hive.metastore.uris"):  # fmt: skip
        assert f"{key!r} in conf may not be set: it names a catalog or a metastore" in refusal(conf={key: "x"})
        message = refusal(base + f"configuration:\n  {key}: x\n")
        assert f"{key!r} in the pipeline spec's configuration may not be set" in message
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text("spark.eventLog.enabled true\nspark.sql.catalog.lake x\n")
    assert "'spark.sql.catalog.lake' in " + f"{conf_dir}/spark-defaults.conf" in refusal(
        env_vars={"SPARK_CONF_DIR": str(conf_dir)}
    )
    (conf_dir / "spark-defaults.conf").write_text("spark.eventLog.enabled true\n")
    (conf_dir / "hive-site.xml").write_text("<configuration/>\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    assert "has a hive-site.xml" in refusal()
    # the session catalog, named or not, in the fence's warehouse is what runs
    (conf_dir / "hive-site.xml").unlink()
    spec.write_text(base + "catalog: spark_catalog\n")
    assert JrsSparkPipelinesOperator(task_id="t", pipeline_spec=str(spec), conf={"a": "b"})._checked_conf() == {
        "a": "b"
    }
