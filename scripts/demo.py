"""The demo: the flights pipeline through Airflow, twice; the second pass starts no Spark.

Run by ``./dev demo`` (which installs everything first). Uses embedded defaults: a real local
redis-server with append-only persistence in ``data/redis`` (stopped at the end), an Airflow
home in ``data/airflow`` (SQLite), Spark in local mode. Options: ``--dates N`` (default 3),
``--redis-url URL`` to use an existing Redis instead, ``--fresh`` to forget earlier results.

``--connect``: instead of ``flights_daily`` (spark-submit), run ``flights_pyspark_connect`` (the
``@task.jrs_pyspark`` pipeline of dags/flights_pyspark.py) on a Spark Connect server the demo
starts from pyspark's own distribution (``local[2]``, event log in ``data/spark-connect``,
stopped at the end; 30 to 50 s to start), and count on the server the sessions and
operations each pass opened.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
NAMESPACE = "jrs-demo"  # 5+ characters: Airflow warns about connection extras too short to mask
sys.path.insert(0, str(ROOT))  # the test bench is not installed: it lives in the repository

from jrs_testbench.helpers import SparkLaunches, jrs_env  # noqa: E402


def configure_environment(redis_url: str) -> SparkLaunches:
    """Everything Airflow reads at import time must be set before it is imported."""
    home = DATA / "airflow"
    home.mkdir(parents=True, exist_ok=True)
    events = DATA / "spark-events"
    os.environ.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": os.environ.get("JRS_DEMO_LOG_LEVEL", "WARNING"),
            **jrs_env(redis_url, NAMESPACE, data_dir=DATA, spark_master="local[2]", event_log_dir=events),
        }
    )
    if not (home / ".migrated").exists():
        print("Preparing the Airflow metadata database (once) ...", flush=True)
        subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True, stdout=subprocess.DEVNULL)
        (home / ".migrated").touch()
    return SparkLaunches(events)


def run_pass(dag, dates: list[datetime], spark: SparkLaunches, label: str) -> None:
    print(f"\n=== {label}: flights_daily for {', '.join(d.date().isoformat() for d in dates)}", flush=True)
    for day in dates:
        before, started = spark.count(), time.monotonic()
        dr = dag.test(logical_date=day)
        states = {ti.task_id: str(ti.state) for ti in dr.get_task_instances()}
        bad = {t: s for t, s in states.items() if s != "success"}
        took = time.monotonic() - started
        print(
            f"  {day.date()}  run {dr.state}  {took:5.1f}s  Spark applications started: "
            f"{spark.count() - before}" + (f"  NOT OK: {bad}" if bad else ""),
            flush=True,
        )


def print_store(store) -> None:
    print(f"\nJob result store (namespace {store.namespace!r}):")
    print(f"  {'job id':45} {'state':6} {'status':10} {'fence':5} outputs")
    for entry in sorted(store.list_entries(limit=1000), key=lambda e: e.job_id):
        r = entry.result
        outs = ", ".join(f"{k}=...{v[-40:]}" for k, v in r.outputs.items())
        print(f"  {r.job_id:45} {entry.state.value:6} {r.status.value:10} {r.fence!s:5} {outs}")


def run_connect_pass(dag, dates: list[datetime], server, label: str) -> None:
    """As :func:`run_pass`, counted on the Connect server: what each run opened there (its event
    log, read after a barrier so that nothing is counted late; the barriers are left out)."""
    print(f"\n=== {label}: {dag.dag_id} for {', '.join(d.date().isoformat() for d in dates)}", flush=True)
    barriers = [server.barrier()]
    for day in dates:
        before, started = server.activity(exclude_sessions=barriers), time.monotonic()
        dr = dag.test(logical_date=day)
        took = time.monotonic() - started
        barriers.append(server.barrier())
        after = server.activity(exclude_sessions=barriers)
        bad = {ti.task_id: str(ti.state) for ti in dr.get_task_instances() if str(ti.state) != "success"}
        print(
            f"  {day.date()}  run {dr.state}  {took:5.1f}s  on the server: "
            f"{after['sessions'] - before['sessions']} sessions, {after['operations'] - before['operations']} "
            f"operations, {after['jobs'] - before['jobs']} Spark jobs" + (f"  NOT OK: {bad}" if bad else ""),
            flush=True,
        )


def start_connect_server():
    """A Spark Connect server for ``--connect``, named by ``spark_connect_default`` (the DAG's)."""
    import json

    from jrs_testbench.spark_connect import SparkConnectServer

    print("Starting a Spark Connect server (pyspark's own, local[2]) ...", flush=True)
    server = SparkConnectServer(DATA / "spark-connect").start()
    print(f"Spark Connect at {server.url} (UI {server.ui_url}), up in {server.startup_seconds:.1f}s", flush=True)
    conn = {"conn_type": "spark_connect", "host": "127.0.0.1", "port": server.port, "login": "airflow"}
    os.environ["AIRFLOW_CONN_SPARK_CONNECT_DEFAULT"] = json.dumps(conn)
    os.environ.pop("JRS_SPARK_CONNECT_CONN_ID", None)
    return server


def print_ontime(store, day: datetime, job: str = "flights_daily.ontime.submit") -> None:
    entry = store.get_entry(f"{job}.{day.date().isoformat()}")
    if entry is None:
        return
    import pyarrow.parquet as pq

    table = pq.read_table(entry.result.outputs["ontime"]).to_pandas()
    top = table.sort_values(["flights"], ascending=False).head(8)
    cols = [c for c in ("carrier", "carrier_name", "origin", "flights", "on_time_rate", "avg_dep_delay") if c in top]
    print(f"\nOn-time performance, {day.date()} (busiest carrier/airport pairs):")
    print(top[cols].to_string(index=False, float_format=lambda v: f"{v:.2f}"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dates", type=int, default=3, help="how many days of 2013 to run (default 3)")
    parser.add_argument("--redis-url", default=os.environ.get("JRS_DEMO_REDIS_URL"))
    parser.add_argument("--fresh", action="store_true", help="forget earlier demo results first")
    parser.add_argument(
        "--connect", action="store_true", help="run flights_pyspark_connect on a Spark Connect server it starts"
    )
    args = parser.parse_args()
    dates = [datetime(2013, 1, 1, tzinfo=UTC) + timedelta(days=i) for i in range(args.dates)]

    import warnings

    warnings.filterwarnings("ignore")  # Airflow's own deprecation chatter hides the demo's output
    from jrs_testbench.redis_server import EmbeddedRedis

    server = connect = None
    if not args.redis_url:
        server = EmbeddedRedis(DATA / "redis").start()
        print(f"Started a local redis-server on port {server.port} (append-only, data in data/redis)")
    redis_url = args.redis_url or server.url  # type: ignore[union-attr]
    try:
        spark = configure_environment(redis_url)
        from airflow_jrs.store import RedisJobResultStore

        store = RedisJobResultStore(redis_url, NAMESPACE)
        if args.fresh:
            for entry in store.list_entries(limit=10000):
                store.forget_result(entry.job_id)
        sys.path.insert(0, str(ROOT / "dags"))
        if args.connect:
            connect = start_connect_server()
            import flights_pyspark

            warnings.filterwarnings("ignore", category=DeprecationWarning)
            dag = flights_pyspark.connect_dag
            run_connect_pass(dag, dates, connect, "First pass (computes what the store does not have)")
            print_store(store)
            run_connect_pass(dag, dates, connect, "Second pass (same dates: every job is committed)")
            print_ontime(store, dates[0], job="flights_pyspark_connect.ontime")
            print(f"\nThe server's event log (one SessionStarted per session opened): {connect.event_log_dir}")
            return 0
        import flights_daily

        warnings.filterwarnings("ignore", category=DeprecationWarning)  # again: importing Airflow reset it
        run_pass(flights_daily.dag, dates, spark, "First pass (computes what the store does not have)")
        print_store(store)
        run_pass(flights_daily.dag, dates, spark, "Second pass (same dates: every job is committed)")
        print_ontime(store, dates[0])
        print(f"\nSpark applications launched in total (event logs in data/spark-events): {spark.count()}")
        print("Run it again: nothing recomputes. `./dev demo --fresh` forgets the results first.")
    finally:
        if connect is not None:
            connect.stop()
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
