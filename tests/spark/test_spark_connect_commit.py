"""``commit_output``: data to the fenced folder, the commit marker LAST, on both session kinds.

A classic SparkSession runs under real ``spark-submit`` (the marker goes through the driver
JVM's Hadoop FileSystem); a Spark Connect session talks to the real server of the
``connect_server`` fixture (the server writes the data, the client the marker). Both must leave
a marker that recovery accepts as this attempt's (``names_attempt``) beside complete data.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from airflow_jrs.protocol.markers import names_attempt
from airflow_jrs.spark import MARKER_NAME, commit_output, is_connect_session, read_commit_marker, write_commit_marker
from airflow_jrs.spark.conf import job_conf
from jrs_testbench.helpers import pyspark_env
from jrs_testbench.spark_connect import SparkConnectServer

pytestmark = pytest.mark.spark

JOB = "flights.ingest.2013-01-01"
FENCE = 7
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"

#: The classic application: the operator's conf names the job, fence and folder; one call commits.
CLASSIC_APP = """
import json
from pyspark.sql import SparkSession
from airflow_jrs.spark import commit_output, is_connect_session
spark = SparkSession.builder.appName("jrs-commit-classic").getOrCreate()
assert not is_connect_session(spark)
doc = commit_output(spark.range(10), metrics={"rows": 10})
print("MARKER " + json.dumps(doc), flush=True)
spark.stop()
"""


@contextmanager
def connect_session(server: SparkConnectServer, output_dir: str | None = None) -> Iterator[Any]:
    """A Connect session carrying the attempt's ``spark.jrs.*`` conf, as the launcher will set it."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(server.url).create()
    try:
        for key, value in job_conf(job_id=JOB, namespace="test", fence=FENCE, output_dir=output_dir or "").items():
            if value:
                spark.conf.set(key, value)
        yield spark
    finally:
        spark.stop()


def assert_committed_last(output: Path, rows: int) -> dict[str, Any]:
    """The marker names this attempt, and sits beside complete data written before it."""
    marker = read_commit_marker(str(output))
    assert marker is not None, f"no {MARKER_NAME} in {output}"
    assert names_attempt(marker, JOB, FENCE) and marker["fence"] == FENCE
    assert pq.read_table(output / "data").num_rows == rows
    data_files = [p for p in (output / "data").rglob("*") if p.is_file()]
    assert data_files and (output / "data" / "_SUCCESS").exists()
    assert max(p.stat().st_mtime_ns for p in data_files) <= (output / MARKER_NAME).stat().st_mtime_ns
    return marker


def test_commit_output_on_a_classic_session_writes_the_data_then_the_marker(tmp_path: Path) -> None:
    output = tmp_path / "out"
    app = tmp_path / "classic_app.py"
    app.write_text(CLASSIC_APP)
    cmd = [str(SPARK_SUBMIT), "--master", "local[1]", "--conf", "spark.ui.enabled=false"]
    for key, value in job_conf(job_id=JOB, namespace="test", fence=FENCE, output_dir=str(output)).items():
        cmd += ["--conf", f"{key}={value}"]
    done = subprocess.run(
        [*cmd, str(app)], env=pyspark_env() | {"PATH": pyspark_env()["PATH"]}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-4000:]
    printed = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("MARKER "))[7:])
    marker = assert_committed_last(output, 10)
    assert marker == printed
    assert marker["application_id"].startswith("local-") and "session_id" not in marker
    assert marker["metrics"] == {"rows": 10}


def test_commit_output_on_a_connect_session_writes_the_data_then_the_marker(
    connect_server: SparkConnectServer, tmp_path: Path
) -> None:
    output = tmp_path / "out"
    with connect_session(connect_server, str(output)) as spark:
        assert is_connect_session(spark)
        doc = commit_output(spark.range(12), metrics={"rows": 12})  # folder from spark.jrs.output_dir
        assert spark.read.parquet(str(output / "data")).count() == 12  # the server reads what it wrote
        session_id = spark.session_id
    marker = assert_committed_last(output, 12)
    assert marker == doc
    assert marker["session_id"] == session_id
    assert marker["application_id"] == connect_server.application_id()
    assert marker["metrics"] == {"rows": 12}
    assert not [p.name for p in output.iterdir() if p.name.startswith(".jrs-commit-")], "temporary marker left"


def test_a_failed_write_on_a_connect_session_leaves_no_marker(
    connect_server: SparkConnectServer, tmp_path: Path
) -> None:
    from pyspark.errors import AnalysisException

    output = tmp_path / "out"
    (output / "data").mkdir(parents=True)
    (output / "data" / "someone-elses.txt").write_text("x")
    with connect_session(connect_server, str(output)) as spark:
        with pytest.raises(AnalysisException, match="PATH_ALREADY_EXISTS"):
            commit_output(spark.range(3), str(output), mode="error")  # Connect refuses "errorifexists"
    assert read_commit_marker(str(output)) is None


def test_a_connect_client_refuses_a_marker_url_it_cannot_write_before_any_spark_work(
    connect_server: SparkConnectServer,
) -> None:
    with connect_session(connect_server) as spark:
        with pytest.raises(ValueError, match=r"opener=fsspec\.open"):
            commit_output(spark.range(3), "s3a://bucket/jobs/out")
        assert spark.range(2).count() == 2  # a barrier: the event log is ordered
        session_id = spark.session_id
    deadline = time.monotonic() + 120
    while not connect_server.operations(session_id):
        assert time.monotonic() < deadline, "the barrier operation never reached the event log"
        time.sleep(0.05)
    statements = [o["statement"] for o in connect_server.operations(session_id)]
    assert not [s for s in statements if "write_operation" in s], statements


def test_a_connect_client_writes_the_marker_through_an_opener(connect_server: SparkConnectServer) -> None:
    import fsspec

    url = f"memory://jrs-{uuid.uuid4().hex}/out"
    with connect_session(connect_server) as spark:
        doc = write_commit_marker(spark, url, {"rows": 0}, opener=fsspec.open)
        session_id = spark.session_id
    assert read_commit_marker(url) == doc
    assert doc["session_id"] == session_id and names_attempt(doc, JOB, FENCE)
