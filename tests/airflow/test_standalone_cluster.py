"""The flights DAG on a real Spark standalone cluster (a master and two workers from pyspark).

Client deploy mode (standalone cluster mode does not run Python applications): the driver is
spark-submit on the Airflow worker, executors run on the cluster's workers. The DAG file is
the example one, unedited; only its Spark connection points at the cluster. "Spark did not
run" is proven twice: no new event log, and no new application on the master.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_jrs.domain.paths import app_name
from airflow_jrs.launch.deploy_modes import StandaloneMode, deploy_mode_for, resolve_target
from jrs_testbench.helpers import ROOT, TINY_APP, pyspark_env
from jrs_testbench.spark_cluster import SparkStandaloneCluster, spark_home

pytestmark = [pytest.mark.spark, pytest.mark.airflow, pytest.mark.cluster]

DAY = datetime(2013, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory):
    with SparkStandaloneCluster(tmp_path_factory.mktemp("spark-standalone"), worker_memory="2g") as cluster:
        yield cluster


def _flights_dag():
    spec = importlib.util.spec_from_file_location(
        f"flights_daily_{time.monotonic_ns()}", ROOT / "dags" / "flights_daily.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def _apps(cluster: SparkStandaloneCluster) -> list[dict]:
    status = cluster.status()
    return status.get("activeapps", []) + status.get("completedapps", [])


def test_flights_dag_on_a_standalone_cluster_computes_once_then_skips_without_touching_it(
    jrs_env, spark_cluster, monkeypatch, tmp_path
):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_STANDALONE", spark_cluster.connection())
    monkeypatch.setenv("JRS_SPARK_CONN_ID", "spark_standalone")
    monkeypatch.setenv("JRS_SPARK_EVENT_LOG_DIR", jrs_env.spark.uri)
    monkeypatch.setenv("JRS_FLIGHTS_LANDING", str(tmp_path / "landing"))
    sys.path.insert(0, str(ROOT / "dags"))
    try:
        before = {a["id"] for a in _apps(spark_cluster)}
        run = _flights_dag().test(logical_date=DAY)
        states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
        assert set(states.values()) == {"success"}, states
        assert jrs_env.launches() == 2
        on_master = {a["id"] for a in _apps(spark_cluster)} - before
        assert len(on_master) == 2, on_master  # both applications ran on the cluster
        for job in ("flights_daily.ingest.submit.2013-01-01", "flights_daily.ontime.submit.2013-01-01"):
            entry = jrs_env.store.get_entry(job)
            assert entry is not None and entry.is_clean
            assert entry.result.application_id in on_master

        run = _flights_dag().test(logical_date=DAY)  # the same date again: every job is committed
        assert {str(ti.state) for ti in run.get_task_instances()} == {"success"}
        assert jrs_env.launches() == 2, "Spark ran again for committed jobs"
        assert len({a["id"] for a in _apps(spark_cluster)} - before) == 2, "the skip path reached the cluster"
    finally:
        sys.path.remove(str(ROOT / "dags"))


def test_the_spark_connection_selects_the_standalone_deploy_mode(spark_cluster, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_STANDALONE", spark_cluster.connection())
    mode = deploy_mode_for(resolve_target("spark_standalone"))
    assert isinstance(mode, StandaloneMode) and not mode.cluster and mode.webui_urls == [spark_cluster.webui_url]


def test_the_real_master_serves_what_the_driver_lookup_reads(spark_cluster):
    # The stand-in master of tests/unit/test_standalone_lookup.py serves this shape: keep them equal.
    status = spark_cluster.status()
    assert status["status"] == "ALIVE"
    assert {"activeapps", "activedrivers", "completeddrivers"} <= set(status)
    alive = StandaloneMode(["http://127.0.0.1:9", spark_cluster.webui_url], cluster=True)  # port 9: nobody
    assert alive.driver_state("driver-20130101000000-0000") is None


_UNNAMED_APP = """
import sys, time
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()  # keeps the name spark-submit gave it
spark.range(1).count()
time.sleep(300)
"""


def _orphan(cluster, tmp_path, name, app) -> tuple[subprocess.Popen, Path]:
    log = tmp_path / f"{name}.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [str(spark_home() / "bin" / "spark-submit"), "--master", cluster.master_url, "--name", name,
             "--conf", "spark.executor.memory=512m", *app],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **pyspark_env()},
        )  # fmt: skip
    return proc, log


def _found(mode, namespace, job_id, proc, log, known_ids=()):
    deadline = time.monotonic() + 120
    while not (found := mode.find_predecessors(None, namespace, job_id, "tag", known_ids)):
        assert proc.poll() is None, log.read_text()[-2000:]
        assert time.monotonic() < deadline, "the application never showed up on the master"
        time.sleep(0.5)
    return found


def _killed_through_the_master(found, proc) -> None:
    assert len(found) == 1 and found[0].alive()
    found[0].stop()
    deadline = time.monotonic() + 120
    while found[0].alive():
        assert time.monotonic() < deadline, "the master did not kill the application"
        time.sleep(0.5)
    assert proc.wait(timeout=120) is not None  # its driver ends with it


def test_a_dead_attempts_application_is_found_on_the_master_by_name_and_killed_there(
    spark_cluster, namespace, tmp_path
):
    # A spark-submit this host cannot recognise (no spark.jrs.* conf on its command line, as one
    # left on another worker): only the master knows it, by the attempt's deterministic name.
    job_id = "standalone.orphan.2013-01-01"
    (tmp_path / "unnamed.py").write_text(_UNNAMED_APP)
    proc, log = _orphan(spark_cluster, tmp_path, app_name(namespace, job_id, 7), [str(tmp_path / "unnamed.py")])
    try:
        mode = StandaloneMode(spark_cluster.webui_url)
        found = _found(mode, namespace, job_id, proc, log)
        assert app_name(namespace, job_id, 7) in found[0].description
        assert mode.find_predecessors(None, namespace, "standalone.orphan", "tag") == []  # a prefix is another job
        _killed_through_the_master(found, proc)
    finally:
        proc.kill()


def test_an_application_that_renames_itself_is_found_by_the_id_its_attempt_recorded(spark_cluster, namespace, tmp_path):
    # tiny_app calls appName("jrs-tiny"): the master never sees the operator's name. The attempt
    # read the id from spark-submit's output (StandaloneMode.prepare) into its intent.
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    job_id = "standalone.renamed.2013-01-01"
    mode = StandaloneMode(spark_cluster.webui_url)
    hook = SparkSubmitHook.__new__(SparkSubmitHook)  # only its log consumer is exercised
    seen: list[str] = []
    hook._process_spark_submit_log = lambda itr: seen.extend(itr)
    mode.prepare(hook)
    proc, log = _orphan(
        spark_cluster,
        tmp_path,
        app_name(namespace, job_id, 3),
        [TINY_APP, "--output", str(tmp_path / "o"), "--sleep", "300"],
    )
    try:
        deadline = time.monotonic() + 120
        while mode.submission(hook)[1] is None:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            hook._process_spark_submit_log(iter(log.read_text().splitlines()))
            time.sleep(0.5)
        app_id = mode.submission(hook)[1]
        assert app_id.startswith("app-") and seen
        assert mode.find_predecessors(None, namespace, job_id, "tag") == []  # not by name: it renamed itself
        found = _found(mode, namespace, job_id, proc, log, known_ids=[app_id])
        assert app_id in found[0].description
        _killed_through_the_master(found, proc)
    finally:
        proc.kill()
