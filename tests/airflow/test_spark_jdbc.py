"""JrsSparkJDBCOperator on real spark-submit, a real Derby database and a real Redis.

The JDBC database is Apache Derby, embedded (Spark ships its jars in pyspark's ``jars/``): the
source table is created and filled by Derby's own ``ij`` tool in a small JVM, then copied by the
provider's JDBC script under the guard. What is counted, not mocked: Spark applications (event
log files), the files the copy wrote, the store's entries.
"""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pyspark
import pytest

from airflow_jrs.domain.paths import fence_token_of
from airflow_jrs.operators.cleanup import JrsCleanupOperator
from airflow_jrs.operators.spark_jdbc import JrsSparkJDBCOperator
from airflow_jrs.protocol.guarded_task import planned_fingerprint

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

DAY = datetime(2013, 1, 1, tzinfo=UTC)
JOB = "d.copy.2013-01-01"
JARS = Path(pyspark.__file__).parent / "jars"
ROWS = [(1, "UA", 5), (2, "AA", -3), (3, "UA", 12), (4, "B6", 0)]


def context() -> dict[str, Any]:
    ti = SimpleNamespace(dag_id="d", task_id="copy", try_number=1, map_index=-1, xcom_push=lambda **kw: None)
    return {"ti": ti, "run_id": "scheduled__2013-01-01", "data_interval_start": DAY, "logical_date": DAY}


def derby(sql: str, home: Path) -> str:
    """Run ``sql`` with Derby's ``ij`` in a JVM of its own (it exits: the database is free for Spark)."""
    classpath = ":".join(str(next(JARS.glob(f"{name}-[0-9]*.jar"))) for name in ("derby", "derbytools", "derbyshared"))
    script = home / "setup.sql"
    script.write_text(sql)
    proc = subprocess.run(
        ["java", f"-Dderby.system.home={home}", "-cp", classpath, "org.apache.derby.tools.ij", str(script)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0 and "ERROR" not in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture
def source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Derby database ``<tmp>/derby/src`` with ``APP.FLIGHTS``, and the ``derby_src`` connection to it."""
    (tmp_path / "derby").mkdir()
    url = f"jdbc:derby:{tmp_path}/derby/src"
    values = ", ".join(f"({i}, '{c}', {d})" for i, c, d in ROWS)
    derby(
        f"CONNECT '{url};create=true;user=app;password=derby-pass';\n"
        "CREATE TABLE APP.FLIGHTS (ID INT, CARRIER VARCHAR(8), DELAY INT);\n"
        f"INSERT INTO APP.FLIGHTS VALUES {values};\nEXIT;\n",
        tmp_path,
    )
    # the provider's hook builds the URL as conn_prefix + host + "/" + schema
    conn = {"conn_type": "jdbc", "host": "derby", "schema": "src", "login": "app", "password": "derby-pass",
            "extra": {"conn_prefix": f"jdbc:derby:{tmp_path}/"}}  # fmt: skip
    monkeypatch.setenv("AIRFLOW_CONN_DERBY_SRC", json.dumps(conn))
    return tmp_path


def operator(jrs_env: Any, home: Path, conf: dict[str, str] | None = None, **kwargs: Any) -> JrsSparkJDBCOperator:
    spark_conf = jrs_env.spark_conf(
        **{"spark.driver.extraJavaOptions": f"-Dderby.stream.error.file={home}/derby.log"}, **(conf or {})
    )
    args = {"cmd_type": "jdbc_to_spark", "jdbc_table": "APP.FLIGHTS", "metastore_table": "flights",
            "save_format": "parquet", **kwargs}  # fmt: skip
    return JrsSparkJDBCOperator(
        task_id="copy", jdbc_conn_id="derby_src", jdbc_driver="org.apache.derby.jdbc.EmbeddedDriver",
        spark_conn_id="spark_local", spark_conf=spark_conf, **args,
    )  # fmt: skip


def test_jdbc_to_spark_copies_into_the_fence_folder_once_and_a_committed_date_launches_nothing(
    jrs_env, source, monkeypatch
):
    cwd = source / "cwd"  # spark-submit's working directory, where Hive would put its defaults
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    payload = operator(jrs_env, source).execute(context())
    assert payload["status"] == "SUCCEEDED" and payload["reused"] is False
    assert jrs_env.launches() == 1
    result = jrs_env.store.get_entry(JOB).result
    table = Path(result.outputs["table"])
    # the table's files are in the attempt's own folder: <output_root>/<namespace>/<job>/fence-<token>-<nonce>
    fence_folder = table.parent.parent
    assert fence_folder.parent == jrs_env.output_root / jrs_env.namespace / JOB
    assert fence_token_of(fence_folder.name) == result.fence and table == fence_folder / "warehouse" / "flights"
    copied = pq.read_table(str(table)).to_pydict()
    assert sorted(zip(copied["ID"], copied["CARRIER"], copied["DELAY"], strict=True)) == ROWS
    assert result.metrics == {"cmd_type": "jdbc_to_spark", "jdbc_table": "APP.FLIGHTS", "metastore_table": "flights"}
    assert planned_fingerprint(operator(jrs_env, source)) == result.fingerprint  # airflow-jrs plan agrees
    assert list(cwd.iterdir()) == []  # no metastore_db, no spark-warehouse: nothing outside the fence

    JrsCleanupOperator(task_id="cleanup", jobs=[JOB]).execute({"ti": context()["ti"], "outlet_events": {}})
    entry = jrs_env.store.get_entry(JOB)
    assert entry.is_clean and entry.result == result
    assert [p.name for p in fence_folder.parent.iterdir()] == [fence_folder.name]  # the winner's copy is kept
    assert pq.read_table(str(table)).num_rows == len(ROWS)

    again = operator(jrs_env, source).execute(context())  # another run of the same date: the same job
    assert again["reused"] is True and again["outputs"] == payload["outputs"]
    assert jrs_env.launches() == 1, "spark-submit ran again for a committed copy"


def test_spark_to_jdbc_writes_the_database_table_once_and_records_the_copy_without_a_folder(jrs_env, source):
    parquet = source / "landing"
    parquet.mkdir()
    pq.write_table(pa.table({"ID": [i for i, _, _ in ROWS], "CARRIER": [c for _, c, _ in ROWS]}), parquet / "p.parquet")
    # the session's metastore is the user's to configure: an in-memory one here (nothing left in the cwd)
    conf = {"spark.hadoop.javax.jdo.option.ConnectionURL": "jdbc:derby:memory:;databaseName=m;create=true"}

    def to_jdbc() -> JrsSparkJDBCOperator:
        return operator(
            jrs_env, source, cmd_type="spark_to_jdbc", metastore_table=f"parquet.`{parquet}`",
            jdbc_table="APP.CARRIERS", save_mode="overwrite", save_format=None, conf=conf,
        )  # fmt: skip

    payload = to_jdbc().execute(context())
    assert payload["status"] == "SUCCEEDED" and not payload.get("outputs")  # no folder to name
    assert payload["metrics"]["save_mode"] == "overwrite" and payload["metrics"]["jdbc_table"] == "APP.CARRIERS"
    assert jrs_env.launches() == 1
    out = derby(f"CONNECT 'jdbc:derby:{source}/derby/src;user=app';\nSELECT COUNT(*) FROM APP.CARRIERS;\n", source)
    assert f"\n{len(ROWS)}" in out.replace(" ", "")

    again = to_jdbc().execute(context())  # another run of the same date writes nothing
    assert again["reused"] is True and jrs_env.launches() == 1
