"""The demo: the flights pipeline through Airflow, twice; the second pass starts no Spark.

Run by ``./dev demo`` (which installs everything first). Uses embedded defaults: a real local
redis-server with append-only persistence in ``data/redis`` (stopped at the end), an Airflow
home in ``data/airflow`` (SQLite), Spark in local mode. Options: ``--dates N`` (default 3),
``--redis-url URL`` to use an existing Redis instead, ``--fresh`` to forget earlier results.
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


def print_ontime(store, day: datetime) -> None:
    entry = store.get_entry(f"flights_daily.ontime.submit.{day.date().isoformat()}")
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
    args = parser.parse_args()
    dates = [datetime(2013, 1, 1, tzinfo=UTC) + timedelta(days=i) for i in range(args.dates)]

    import warnings

    warnings.filterwarnings("ignore")  # Airflow's own deprecation chatter hides the demo's output
    from jrs_testbench.redis_server import EmbeddedRedis

    server = None
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
        import flights_daily

        warnings.filterwarnings("ignore", category=DeprecationWarning)  # again: importing Airflow reset it
        run_pass(flights_daily.dag, dates, spark, "First pass (computes what the store does not have)")
        print_store(store)
        run_pass(flights_daily.dag, dates, spark, "Second pass (same dates: every job is committed)")
        print_ontime(store, dates[0])
        print(f"\nSpark applications launched in total (event logs in data/spark-events): {spark.count()}")
        print("Run it again: nothing recomputes. `./dev demo --fresh` forgets the results first.")
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
