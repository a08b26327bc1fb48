"""The flights DAG distributed: two Celery workers and a Spark standalone cluster vs one machine.

    .venv/bin/python benchmarks/distributed.py [--dates 30] [--skip-local] [--skip-takeover]

Two deployments, one after the other, each on a fresh PostgreSQL database (created and
dropped here; ``--postgres`` names the server), the same private store redis-server (one
namespace each), the same extracted landing data:

* **celery**: :class:`~jrs_testbench.deployment.celery.CeleryDeployment`, two Celery workers
  (concurrency 1 each, each on a "host" of its own), Spark on a
  :class:`~jrs_testbench.spark_cluster.SparkStandaloneCluster` (a master, two workers of one
  core each; client deploy mode; ``spark.cores.max=1`` per application through a
  ``spark-defaults.conf``, so two applications run side by side);
* **local**: :class:`~jrs_testbench.deployment.LocalDeployment`, LocalExecutor with 2 slots,
  Spark in ``local[1]``.

For each: a backfill of N dates that computes (2 Spark jobs per date), then a backfill of the
same dates with ``--reprocess-behavior completed`` that finds every job committed (the skip
path: no Spark; checked by the event log count). Figures: each backfill's wall time on the
server's clock and the median run duration; ratios celery / local. Then, on celery only
(``--skip-takeover`` leaves it out), a **takeover**: a fresh date's ``ingest`` runs on the
cluster, the Celery worker running it is SIGKILLed as a whole (its PID namespace dies: task,
supervisor, spark-submit); measured from the kill to the successor holding the job's lease
(Airflow's zombie detection, here ``task_instance_heartbeat_timeout = 20 s``, then the retry on
the other worker) and to the job's SUCCEEDED result.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from airflow_jrs.store import RedisJobResultStore  # noqa: E402
from airflow_jrs.store.redis.keys import KeySpace  # noqa: E402
from jrs_testbench.deployment import LocalDeployment  # noqa: E402
from jrs_testbench.deployment.celery import DEFAULT_POSTGRES, CeleryDeployment, PostgresDatabase  # noqa: E402
from jrs_testbench.helpers import SparkLaunches, jrs_env  # noqa: E402
from jrs_testbench.redis_server import EmbeddedRedis  # noqa: E402
from jrs_testbench.spark_cluster import SparkStandaloneCluster  # noqa: E402

DAG_ID = "flights_daily"
FIRST_DAY = date(2013, 1, 1)
#: Dates run on the takeover: after the benchmark's (never committed by it).
TAKEOVER_DAY = date(2013, 6, 1)
SPARK_DEFAULTS = "spark.cores.max 1\nspark.executor.memory 512m\n"


def _ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


class Variant:
    def __init__(self, name: str, airflow: LocalDeployment, launches: SparkLaunches) -> None:
        self.name = name
        self.airflow = airflow
        self.launches = launches
        self.figures: dict[str, dict[str, float]] = {}

    def backfill(self, phase: str, dates: list[date], reprocess: str, expected_launches: int) -> None:
        before = self.launches.count()
        result = self.airflow.backfills.run(
            DAG_ID, dates[0], dates[-1], reprocess, max_active_runs=2, via="rest", timeout=4 * 3600
        )
        bad = {d: s for d, s in result.runs.items() if s != "success"}
        if len(result.runs) != len(dates) or bad:
            raise SystemExit(
                f"{self.name} {phase}: runs {result.runs} (not success: {bad})\n{self.airflow.logs_tail()}"
            )
        launched = self.launches.count() - before
        if launched != expected_launches:
            raise SystemExit(f"{self.name} {phase}: {launched} Spark applications, expected {expected_launches}")
        runs = {r["dag_run_id"]: r for r in self.airflow.client.dag_runs(DAG_ID)}
        durations = [
            (_ts(runs[rid]["end_date"]) - _ts(runs[rid]["start_date"])).total_seconds()
            for rid in result.run_ids.values()
            if runs.get(rid, {}).get("start_date") and runs[rid].get("end_date")
        ]
        self.figures[phase] = {
            "wall_s": result.wall_seconds,
            "per_date_s": result.wall_seconds / len(dates),
            "median_run_s": statistics.median(durations),
            "launches": launched,
        }
        print(
            f"  {self.name:6} {phase:9} {len(dates):3} dates: {result.wall_seconds:7.1f} s wall "
            f"({result.wall_seconds / len(dates):.2f} s/date), median run {statistics.median(durations):.1f} s, "
            f"Spark launches {launched}",
            flush=True,
        )


def run_variant(variant: Variant, dates: list[date]) -> None:
    """Unpause, compute the dates, then run them again: every job is committed (the deployment runs)."""
    variant.airflow.wait_for_dag(DAG_ID)
    variant.airflow.client.unpause(DAG_ID)
    variant.backfill("compute", dates, "none", 2 * len(dates))
    variant.backfill("skip", dates, "completed", 0)


def takeover(
    airflow: CeleryDeployment, cluster: SparkStandaloneCluster, store: RedisJobResultStore
) -> dict[str, float | str]:
    """Kill the Celery worker running ``ingest`` of a fresh date while its application runs."""
    day = TAKEOVER_DAY.isoformat()
    job = f"{DAG_ID}.ingest.submit.{day}"
    lease_key = KeySpace(store.namespace).lease(job)
    known = {a["id"] for a in cluster.status().get("completedapps", [])}
    run_id = airflow.client.trigger(DAG_ID, day)["dag_run_id"]
    deadline = time.monotonic() + 600
    while True:
        tis = {t["task_id"]: t for t in airflow.client.task_instances(DAG_ID, run_id)}
        ti = tis.get("ingest.submit") or {}
        apps = [a for a in cluster.active_applications() if a["id"] not in known and a["state"] == "RUNNING"]
        if ti.get("state") == "running" and ti.get("hostname") and apps:
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"takeover: ingest never ran on the cluster: {ti}")
        time.sleep(0.2)
    victim, first_fence = ti["hostname"], int(store.client.hget(lease_key, "token") or 0)
    died = airflow.kill_worker(victim)
    lease_at = result_at = None
    while result_at is None:
        now = time.time()
        if lease_at is None and int(store.client.hget(lease_key, "token") or 0) > first_fence:
            lease_at = now
        if store.get_entry(job) is not None:
            result_at = now
            lease_at = lease_at or now
        if time.monotonic() > deadline + 600:
            raise SystemExit(f"takeover: no result for {job}\n{airflow.logs_tail()}")
        time.sleep(0.1)
    run = airflow.client.wait_for_run(DAG_ID, run_id, timeout=900)
    entry = store.get_entry(job)
    survivor = {t["task_id"]: t for t in airflow.client.task_instances(DAG_ID, run_id)}["ingest.submit"]
    if run["state"] != "success" or entry is None or survivor["hostname"] == victim:
        raise SystemExit(f"takeover: run {run['state']}, entry {entry}, ran on {survivor['hostname']}")
    figures: dict[str, float | str] = {
        "killed": victim,
        "successor": survivor["hostname"],
        "to_lease_s": lease_at - died,
        "to_result_s": result_at - died,
    }
    print(
        f"  takeover: killed {victim}; successor on {survivor['hostname']} held the lease "
        f"{figures['to_lease_s']:.1f} s after the kill, result {figures['to_result_s']:.1f} s after",
        flush=True,
    )
    return figures


def report(variants: dict[str, Variant], take: dict[str, Any] | None) -> dict[str, Any]:
    print("\n| deployment | phase | dates | wall | per date | median run |")
    print("|---|---|---|---|---|---|")
    for v in variants.values():
        for phase, f in v.figures.items():
            print(
                f"| {v.name} | {phase} | {f['wall_s'] / f['per_date_s']:.0f} | {f['wall_s']:.1f} s "
                f"| {f['per_date_s']:.2f} s | {f['median_run_s']:.1f} s |"
            )
    summary: dict[str, Any] = {name: v.figures for name, v in variants.items()}
    if {"celery", "local"} <= set(variants):
        c, lo = variants["celery"].figures, variants["local"].figures
        ratios = {
            f"{phase}_{what}": c[phase][what] / lo[phase][what]
            for phase in ("compute", "skip")
            for what in ("wall_s", "median_run_s")
        }
        summary["celery_vs_local"] = ratios
        print("\ncelery / local: " + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items()))
    for name, v in variants.items():
        ratio = v.figures["skip"]["wall_s"] / v.figures["compute"]["wall_s"]
        summary[f"{name}_skip_vs_compute"] = ratio
        print(f"{name}: skip / compute wall {ratio:.3f}")
    if take:
        summary["takeover"] = take
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dates", type=int, default=30, help="dates per backfill (default 30)")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="PostgreSQL server URL, no database name")
    parser.add_argument("--skip-local", action="store_true", help="leave out the LocalExecutor deployment")
    parser.add_argument("--skip-takeover", action="store_true", help="leave out the worker SIGKILL")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs, Airflow homes)")
    args = parser.parse_args()
    # A SIGTERM (timeout, a CI job's end) unwinds like Ctrl-C: deployments, cluster, databases stop.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = Path(tempfile.mkdtemp(prefix="jrs-bench-distributed-"))
    dates = [FIRST_DAY + timedelta(days=i) for i in range(args.dates)]
    if TAKEOVER_DAY in dates:
        raise SystemExit(f"--dates {args.dates} reaches the takeover's date {TAKEOVER_DAY}")
    print(f"Work folder {work}; {args.dates} dates", flush=True)
    sys.path.insert(0, str(ROOT / "dags"))
    from flights.data import ensure_landing

    variants: dict[str, Variant] = {}
    take = None
    with EmbeddedRedis(work / "store-redis") as server:
        landing = work / "data" / "landing"
        ensure_landing(str(landing))  # once, untimed; the DAG's prepare_landing then finds it
        conf_dir = work / "spark-conf"
        conf_dir.mkdir()
        (conf_dir / "spark-defaults.conf").write_text(SPARK_DEFAULTS)
        with SparkStandaloneCluster(work / "spark", worker_memory="1g") as cluster:
            ns = f"celery-{uuid.uuid4().hex[:6]}"
            launches = SparkLaunches(work / "events-celery")
            env = {
                **jrs_env(server.url, ns, data_dir=work / "data", event_log_dir=launches.dir),
                "AIRFLOW_CONN_SPARK_STANDALONE": cluster.connection(),
                "JRS_SPARK_CONN_ID": "spark_standalone",
                "SPARK_CONF_DIR": str(conf_dir),
                "AIRFLOW__JRS__LEASE_TTL": "10",
                "AIRFLOW__JRS__READ_TIMEOUT": "3",
                # The flights DAG sets no retries: the dead worker's task must be retried at once.
                "AIRFLOW__CORE__DEFAULT_TASK_RETRIES": "2",
                "AIRFLOW__CORE__DEFAULT_TASK_RETRY_DELAY": "0",
            }
            airflow = CeleryDeployment(
                work / "airflow-celery", bundles={"dags-folder": ROOT / "dags"}, env=env, log_level="WARNING",
                postgres_url=args.postgres,
            )  # fmt: skip
            print("celery: 2 Celery workers, Spark standalone (2 workers x 1 core), client mode", flush=True)
            variants["celery"] = Variant("celery", airflow, launches)
            with airflow:
                run_variant(variants["celery"], dates)
                if not args.skip_takeover:
                    store = RedisJobResultStore(server.url, ns)
                    take = takeover(airflow, cluster, store)
                    store.client.close()
        if not args.skip_local:
            ns = f"local-{uuid.uuid4().hex[:6]}"
            launches = SparkLaunches(work / "events-local")
            env = jrs_env(server.url, ns, data_dir=work / "data", event_log_dir=launches.dir, spark_master="local[1]")
            with PostgresDatabase(args.postgres, prefix="jrs_bench_local_") as database:
                local = LocalDeployment(
                    work / "airflow-local", bundles={"dags-folder": ROOT / "dags"}, env=env, parallelism=2,
                    log_level="WARNING", sql_alchemy_conn=database.url,
                )  # fmt: skip
                print("local: LocalExecutor (2 slots), Spark local[1]", flush=True)
                variants["local"] = Variant("local", local, launches)
                with local:
                    run_variant(variants["local"], dates)
    summary = report(variants, take)
    summary["dates"] = args.dates
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2, default=str))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
