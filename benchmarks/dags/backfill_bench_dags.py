"""The flights DAG's shape five times, for ``benchmarks/backfill_skip.py``.

Each DAG is ``ingest.submit >> ingest.cleanup >> ontime.submit >> ontime.cleanup`` over the
real flights applications (``dags/flights/apps``), one run per day; ``prepare_landing`` is left
out (the benchmark extracts the landing data once before timing: it is not a Spark job).

============================  ===================================================================
``bench_jrs``                 ``JrsSparkSubmitOperator`` + ``JrsCleanupOperator`` (worker slots)
``bench_jrs_triggerer``       the same with ``start_in_triggerer`` (committed jobs: no worker)
``bench_plain``               the Spark provider's ``SparkSubmitOperator``; no-op cleanups (a)
``bench_python``              no-op ``PythonOperator`` in place of every task (b)
``bench_python_xcom``         (b) plus the JRS DAG's XCom traffic: submits return a result dict
                              (ontime's template pulls ingest's) and write one more XCom (the
                              JRS operator's job page link); cleanups use no XCom
``bench_empty``               ``EmptyOperator`` in place of every task (c)
``bench_busy``                two tasks that hold the worker slots for ``conf["seconds"]``
============================  ===================================================================

Both JRS DAGs use the job ids ``bench.ingest.<ds>`` / ``bench.ontime.<ds>`` (a templated
``job_id``), so one set of committed results serves both. Environment: ``JRS_FLIGHTS_LANDING``,
``JRS_SPARK_CONN_ID`` (default ``spark_local``), ``JRS_SPARK_EVENT_LOG_DIR`` (event logs: one
file per application), ``JRS_BENCH_PLAIN_OUTPUT`` (where the plain variant writes).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG, TaskGroup

from airflow_jrs.operators import jrs_spark_job

ROOT = Path(__file__).resolve().parents[2]
APPS = ROOT / "dags" / "flights" / "apps"
INGEST_APP = str(APPS / "ingest_flights.py")
ONTIME_APP = str(APPS / "carrier_ontime.py")
HOME = os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow"))
LANDING = os.environ.get("JRS_FLIGHTS_LANDING") or os.path.join(HOME, "jrs", "landing")
PLAIN_OUTPUT = os.environ.get("JRS_BENCH_PLAIN_OUTPUT") or os.path.join(HOME, "bench-plain")
SPARK_CONN_ID = os.environ.get("JRS_SPARK_CONN_ID", "spark_local")
SPARK_CONF = {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false", "spark.driver.memory": "1g"}
if os.environ.get("JRS_SPARK_EVENT_LOG_DIR"):
    SPARK_CONF |= {"spark.eventLog.enabled": "true", "spark.eventLog.dir": os.environ["JRS_SPARK_EVENT_LOG_DIR"]}
SPARK_ENV = {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}

INGEST_ARGS = ["--date", "{{ ds }}", "--landing", LANDING, "--output", "{jrs_output}"]
ONTIME_ARGS = [
    "--date", "{{ ds }}", "--landing", LANDING,
    "--flights", "{{ ti.xcom_pull(task_ids='ingest.submit')['outputs']['flights'] }}",
    "--output", "{jrs_output}",
]  # fmt: skip
DAG_ARGS = {
    "schedule": "@daily",
    "start_date": datetime(2013, 1, 1, tzinfo=UTC),
    # Room for several disjoint date ranges (no flights after 2013: only the plain variant
    # computes, and it stays in 2013). An end date keeps unpausing from scheduling "today".
    "end_date": datetime(2016, 12, 31, tzinfo=UTC),
    "catchup": False,
    "max_active_runs": 2,
    "tags": ["jrs", "benchmark"],
}


def noop() -> None:
    """Does nothing: the cost of a worker slot and nothing else."""


def busy(seconds: str) -> None:
    """Hold a worker slot, as a long Spark job of another DAG would."""
    time.sleep(float(seconds))


def _jrs(factory: Callable[..., Any], dag_id: str) -> DAG:
    with DAG(dag_id, **DAG_ARGS) as dag:
        spark = {"conn_id": SPARK_CONN_ID, "conf": SPARK_CONF, "env_vars": SPARK_ENV}
        ingest = factory(
            "ingest", job_id="bench.ingest.{{ ds }}", application=INGEST_APP, application_args=INGEST_ARGS,
            outputs={"flights": "flights"}, **spark,
        )  # fmt: skip
        ontime = factory(
            "ontime", job_id="bench.ontime.{{ ds }}", application=ONTIME_APP, application_args=ONTIME_ARGS,
            outputs={"ontime": "ontime"}, **spark,
        )  # fmt: skip
        ingest >> ontime
    return dag


def _pairs(dag_id: str, submit: Callable[[str, str], Any], cleanup: Callable[[str], Any]) -> DAG:
    with DAG(dag_id, **DAG_ARGS) as dag:
        groups = []
        for name in ("ingest", "ontime"):
            with TaskGroup(name) as group:
                submit(name, "submit") >> cleanup("cleanup")
            groups.append(group)
        groups[0] >> groups[1]
    return dag


def _plain_submit(name: str, task_id: str) -> SparkSubmitOperator:
    out = f"{PLAIN_OUTPUT}/{{{{ ds }}}}"
    args = {
        "ingest": ["--date", "{{ ds }}", "--landing", LANDING, "--output", f"{out}/ingest"],
        "ontime": ["--date", "{{ ds }}", "--landing", LANDING, "--flights", f"{out}/ingest/flights",
                   "--output", f"{out}/ontime"],
    }[name]  # fmt: skip
    return SparkSubmitOperator(
        task_id=task_id,
        application=INGEST_APP if name == "ingest" else ONTIME_APP,
        application_args=args,
        name=f"bench-plain-{name}",
        conn_id=SPARK_CONN_ID,
        conf=SPARK_CONF,
        env_vars=SPARK_ENV,
    )


bench_jrs = _jrs(jrs_spark_job, "bench_jrs")
bench_jrs_triggerer = _jrs(partial(jrs_spark_job, start_in_triggerer=True), "bench_jrs_triggerer")
bench_plain = _pairs("bench_plain", _plain_submit, lambda t: PythonOperator(task_id=t, python_callable=noop))
bench_python = _pairs(
    "bench_python",
    lambda _name, t: PythonOperator(task_id=t, python_callable=noop),
    lambda t: PythonOperator(task_id=t, python_callable=noop),
)


def _result(name: str, day: str, upstream: str = "", ti: Any = None) -> dict[str, Any]:
    """What a skipping JRS submit writes (a result dict of about the same size, and Airflow's
    extra-link XCom), without the store."""
    ti.xcom_push(key="_link_JobResultLink", value="")  # the Spark UI link only with [jrs] spark_ui_url
    return {"job_id": f"bench.{name}.{day}", "status": "SUCCEEDED", "outputs": {name: f"/out/{name}/{day}"},
            "fingerprint": "0" * 64, "upstream": upstream, "state": "clean", "skipped": True}  # fmt: skip


def _xcom_submit(name: str, task_id: str) -> PythonOperator:
    upstream = "{{ ti.xcom_pull(task_ids='ingest.submit')['outputs']['ingest'] }}" if name == "ontime" else ""
    return PythonOperator(task_id=task_id, python_callable=_result, op_args=[name, "{{ ds }}", upstream])


bench_python_xcom = _pairs(
    "bench_python_xcom",
    _xcom_submit,
    lambda t: PythonOperator(task_id=t, python_callable=noop),  # a JRS cleanup derives its job ids: no XCom
)
bench_empty = _pairs("bench_empty", lambda _name, t: EmptyOperator(task_id=t), lambda t: EmptyOperator(task_id=t))

with DAG("bench_busy", schedule=None, start_date=datetime(2013, 1, 1, tzinfo=UTC), tags=["benchmark"]) as bench_busy:
    for i in range(2):
        PythonOperator(
            task_id=f"hold_slot_{i}",
            python_callable=busy,
            op_kwargs={"seconds": "{{ dag_run.conf.get('seconds', 60) }}"},
        )
