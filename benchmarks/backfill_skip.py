"""Backfills of committed dates on a real scheduler: what does skipping cost?

    .venv/bin/python benchmarks/backfill_skip.py [--dates 30] [--reps 2] [--plain-dates 5] [--skip-plain]
    .venv/bin/python benchmarks/backfill_skip.py --dates 365 --reps 1 --skip-plain
    ... --busy-seconds 90 --postgres postgresql+psycopg://postgres@127.0.0.1:5432/postgres

``--postgres`` (psycopg 3 is in requirements.lock) puts the metadata DB in a fresh
PostgreSQL database, created and dropped by the script; figures belong there (on SQLite,
Airflow 3.3.2's scheduler can die on a lock race at backfill creation; it is restarted, but
the restart lands in a timed backfill).

One :class:`~jrs_testbench.deployment.LocalDeployment` (api-server, scheduler, dag-processor,
triggerer; LocalExecutor, 2 slots, SQLite) with the DAGs of ``benchmarks/dags`` (the flights
shape: ``ingest.submit >> ingest.cleanup >> ontime.submit >> ontime.cleanup``), a private
redis-server, real spark-submit (``local[1]``). Each timed backfill is created through
``POST /api/v2/backfills`` over N fresh dates (``--max-active-runs 2``) and timed on the
server's clock: backfill created -> end of its last run.

* ``bench_jrs`` / ``bench_jrs_triggerer``: every job of the N dates is already committed.
  The results are written beforehand through the store API (``create_dirty_result`` +
  ``mark_result_as_clean``) with the job ids and fingerprints the DAG computes (application
  file content, rendered arguments; ontime's ``--flights`` is ingest's stored output), so no
  Spark runs before or during timing; the script checks that (event log count unchanged,
  every submit's XCom says ``skipped``) and stops if a JVM started.
* ``bench_plain`` (a): the Spark provider's operator recomputes every date; it runs
  ``--plain-dates`` dates (default 5: 2 Spark jobs per date) and is compared per date.
* ``bench_python`` (b) and ``bench_empty`` (c): no-op ``PythonOperator`` / ``EmptyOperator``.

Variants alternate within each repetition (``--reps``, disjoint date ranges) after an untimed
warm-up backfill of 2 dates each. Targets: ``bench_jrs`` <= 1.05 x (b); ``bench_jrs_triggerer``
<= 1.2 x (c). Printed: each repetition's ratio with median, quartiles and range, and the median
task-instance duration per task (read back untimed): the provider's own cost per task, which
the backfill wall (scheduler loops, executor queues) cannot resolve at a few per cent. The DAG
file is parsed once (``--parse-interval``), so re-parses do not land inside timed backfills.

``--busy-seconds S`` adds a second scenario: before each backfill, a ``bench_busy`` run takes
both worker slots for S seconds (as long Spark jobs of other DAGs would); the backfill of
``--busy-dates`` committed dates then competes for slots (workers) or does not need any
(triggerer).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from airflow_jrs.domain.identity import fingerprint  # noqa: E402
from airflow_jrs.store import JobResult, JobStatus, RedisJobResultStore  # noqa: E402
from jrs_testbench.deployment import LocalDeployment  # noqa: E402
from jrs_testbench.helpers import SparkLaunches, jrs_env  # noqa: E402
from jrs_testbench.redis_server import EmbeddedRedis  # noqa: E402

APPS = ROOT / "dags" / "flights" / "apps"
INGEST_APP = str(APPS / "ingest_flights.py")
ONTIME_APP = str(APPS / "carrier_ontime.py")
FIRST_DAY = date(2013, 1, 1)
SKIPPING = ("bench_python", "bench_python_xcom", "bench_empty", "bench_jrs", "bench_jrs_triggerer")
TASKS = ("ingest.submit", "ingest.cleanup", "ontime.submit", "ontime.cleanup")
LABELS = {
    "bench_plain": "(a) plain SparkSubmitOperator (recomputes)",
    "bench_python": "(b) no-op PythonOperator",
    "bench_python_xcom": "(b') PythonOperator with the JRS DAG's XCom traffic",
    "bench_empty": "(c) EmptyOperator",
    "bench_jrs": "JrsSparkSubmitOperator, committed (worker slots)",
    "bench_jrs_triggerer": "JrsSparkSubmitOperator, committed, start_in_triggerer",
}


def days(start: date, n: int) -> list[date]:
    return [start + timedelta(days=i) for i in range(n)]


def precommit(store: RedisJobResultStore, dates: list[date], landing: str, output_root: str) -> None:
    """Write committed results with exactly the job ids and fingerprints the JRS DAGs compute."""
    ingest_code, ontime_code = Path(INGEST_APP).read_bytes(), Path(ONTIME_APP).read_bytes()
    for day in dates:
        ds = day.isoformat()
        ingest_id, ontime_id = f"bench.ingest.{ds}", f"bench.ontime.{ds}"
        flights = f"{output_root}/{store.namespace}/{ingest_id}/fence-1/flights"
        ingest_args = ["--date", ds, "--landing", landing, "--output", "{jrs_output}"]
        ontime_args = ["--date", ds, "--landing", landing, "--flights", flights, "--output", "{jrs_output}"]
        for job_id, code, app, args, outputs in (
            (ingest_id, ingest_code, INGEST_APP, ingest_args, {"flights": flights}),
            (ontime_id, ontime_code, ONTIME_APP, ontime_args, {"ontime": flights.replace("ingest", "ontime")}),
        ):
            fp = fingerprint(application_bytes=code, application=app, application_args=args, job_version=None)
            result = JobResult(job_id=job_id, status=JobStatus.SUCCEEDED, outputs=outputs, fingerprint=fp)
            store.create_dirty_result(result)  # no fence: written by hand, as an operator tool would
            store.mark_result_as_clean(job_id)


class Bench:
    def __init__(self, airflow: LocalDeployment, spark: SparkLaunches, max_active_runs: int) -> None:
        self.airflow = airflow
        self.spark = spark
        self.max_active_runs = max_active_runs
        self.walls: dict[str, list[tuple[int, float]]] = {}
        #: Per variant and task: each task instance's duration (its start to its end on the worker
        #: or triggerer, as the REST API reports it). Scheduler loops are not in it, so it shows
        #: the work a task adds with far less noise than the backfill's wall.
        self.durations: dict[str, dict[str, list[float]]] = {}

    def launches(self) -> int:
        return self.spark.count()

    def occupy_slots(self, seconds: float, slots: int) -> str:
        """Trigger ``bench_busy`` and wait until its tasks hold every worker slot; return its run id."""
        client = self.airflow.client
        run_id = client.trigger("bench_busy", None, conf={"seconds": seconds})["dag_run_id"]
        deadline = time.monotonic() + 120
        while sum(state == "running" for state in client.task_states("bench_busy", run_id).values()) < slots:
            if time.monotonic() > deadline:
                raise SystemExit(f"bench_busy did not take {slots} slots: {client.task_states('bench_busy', run_id)}")
            time.sleep(0.5)
        return run_id

    def backfill(self, dag_id: str, dates: list[date], *, timed: bool = True, scenario: str = "idle") -> float:
        before, started = self.launches(), time.monotonic()
        result = self.airflow.backfills.run(
            dag_id,
            dates[0],
            dates[-1],
            "none",
            max_active_runs=self.max_active_runs,
            via="rest",
            timeout=4 * 3600,
            complete=True,  # waits for Airflow to mark it complete: the next backfill of this DAG can start
        )
        took = time.monotonic() - started
        bad = {d: s for d, s in result.runs.items() if s != "success"}
        if len(result.runs) != len(dates) or bad:
            raise SystemExit(f"{dag_id}: backfill {result.backfill_id} runs {result.runs} (failed: {bad})")
        launched = self.launches() - before
        expected = 2 * len(dates) if dag_id == "bench_plain" else 0
        if launched != expected:
            raise SystemExit(f"{dag_id}: {launched} Spark applications started, expected {expected}")
        if dag_id.startswith("bench_jrs"):
            self._check_skipped(dag_id, result.run_ids)
        tag = "" if timed else " (warm-up, untimed)"
        tag += "" if scenario == "idle" else f" [{scenario}]"
        print(
            f"  {dag_id:22} {len(dates):4} dates {dates[0]}..{dates[-1]}  {result.wall_seconds:7.1f} s server-side"
            f"  ({took:.1f} s with polling), Spark launches {launched}{tag}",
            flush=True,
        )
        if timed:
            key = dag_id if scenario == "idle" else f"{dag_id} [{scenario}]"
            self.walls.setdefault(key, []).append((len(dates), result.wall_seconds))
            if scenario == "idle":
                self._collect_durations(dag_id, result.run_ids)
        return result.wall_seconds

    def _collect_durations(self, dag_id: str, run_ids: dict[str, str]) -> None:
        """Untimed: read back every task instance of the backfill's runs."""
        per_task = self.durations.setdefault(dag_id, {})
        for rid in run_ids.values():
            for ti in self.airflow.client.task_instances(dag_id, rid):
                if ti.get("duration") is not None:
                    per_task.setdefault(ti["task_id"], []).append(float(ti["duration"]))

    def _check_skipped(self, dag_id: str, run_ids: dict[str, str]) -> None:
        for rid in list(run_ids.values())[:3]:  # a sample: the launch count covers every date
            for task in ("ingest.submit", "ontime.submit"):
                xcom = self.airflow.client.xcom(dag_id, rid, task)
                if not xcom.get("skipped"):
                    raise SystemExit(f"{dag_id}/{rid}/{task} did not skip: {xcom}")
                if dag_id == "bench_jrs_triggerer" and xcom.get("decided_in") != "triggerer":
                    raise SystemExit(f"{dag_id}/{rid}/{task} was not decided in the triggerer: {xcom}")


def per_date(walls: list[tuple[int, float]]) -> float:
    return statistics.median(w / n for n, w in walls)


def report(bench: Bench, args: argparse.Namespace) -> dict[str, Any]:
    rows = {dag_id: per_date(w) for dag_id, w in bench.walls.items() if not dag_id.endswith("]")}
    b, c = rows.get("bench_python"), rows.get("bench_empty")
    print("\n| variant | dates x reps | wall (median) | per date | per date, min-max | vs (b) | vs (c) |")
    print("|---|---|---|---|---|---|---|")
    for dag_id in ("bench_plain", *SKIPPING):
        if dag_id not in rows:
            continue
        walls = bench.walls[dag_id]
        n = walls[0][0]
        wall = statistics.median(w for _, w in walls)
        vb = f"{rows[dag_id] / b:.2f}" if b else "-"
        vc = f"{rows[dag_id] / c:.2f}" if c else "-"
        each = [w / k for k, w in walls]
        span = f"{min(each):.2f}-{max(each):.2f} s"
        print(f"| {LABELS[dag_id]} | {n} x {len(walls)} | {wall:.1f} s | {rows[dag_id]:.2f} s | {span} | {vb} | {vc} |")
    busy = {k: v for k, v in bench.walls.items() if k.endswith("]")}
    if busy:
        print(f"\nBoth worker slots busy for {args.busy_seconds:.0f} s when the backfill starts:")
        print("| variant | dates | wall |")
        print("|---|---|---|")
        for key, walls in busy.items():
            print(f"| {LABELS[key.split(' [')[0]]} | {walls[0][0]} | {walls[0][1]:.1f} s |")
    summary = {"dates": args.dates, "reps": args.reps, "per_date_s": rows, "walls": bench.walls}
    pairs = (
        ("bench_jrs", "bench_python", 1.05),
        ("bench_jrs", "bench_python_xcom", 1.05),
        ("bench_jrs_triggerer", "bench_empty", 1.2),
    )  # and each pair's target
    for num, den, target in pairs:  # each repetition's own ratio: the variants of one repetition ran back to back
        if num in rows and den in rows:
            ratios = [a / z for (_, a), (_, z) in zip(bench.walls[num], bench.walls[den], strict=False)]
            summary[f"{num}/{den} per repetition"] = ratios
            shown = " ".join(f"{r:.3f}" for r in ratios)
            print(f"{num} / {den}, per repetition: {shown}")
            print(f"  {spread(ratios)}; {sum(r <= target for r in ratios)} of {len(ratios)} at or below {target}")
    show_durations(bench, summary)
    if b and "bench_jrs" in rows:
        summary["jrs_vs_python"] = rows["bench_jrs"] / b
        print(f"\nskipping on workers vs (b): {rows['bench_jrs'] / b:.3f} (target <= 1.05)")
    if "bench_python_xcom" in rows and "bench_jrs" in rows:
        summary["jrs_vs_python_xcom"] = rows["bench_jrs"] / rows["bench_python_xcom"]
        print(f"skipping on workers vs (b'), same XCom traffic: {summary['jrs_vs_python_xcom']:.3f}")
    if c and "bench_jrs_triggerer" in rows:
        summary["triggerer_vs_empty"] = rows["bench_jrs_triggerer"] / c
        print(f"skipping in the triggerer vs (c): {rows['bench_jrs_triggerer'] / c:.3f} (target <= 1.2)")
    return summary


def spread(values: list[float]) -> str:
    """Median, quartiles and range: what one number hides on a shared machine."""
    if len(values) < 2:
        return f"only {values}"
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return (
        f"median {statistics.median(values):.3f}, quartiles {q1:.3f}-{q3:.3f}, "
        f"min-max {min(values):.3f}-{max(values):.3f}"
    )


def show_durations(bench: Bench, summary: dict[str, Any]) -> None:
    """Median task-instance duration per task, and per date (the four tasks' medians summed)."""
    if not bench.durations:
        return
    print("\nTask-instance durations (start to end of each task; scheduler loops not included):")
    print("| variant | " + " | ".join(TASKS) + " | per date (sum) |")
    print("|---|" + "---|" * (len(TASKS) + 1))
    per_date: dict[str, float] = {}
    for dag_id, per_task in bench.durations.items():
        medians = [statistics.median(per_task[t]) if per_task.get(t) else float("nan") for t in TASKS]
        per_date[dag_id] = sum(medians)
        cells = " | ".join(f"{m * 1000:.0f} ms" for m in medians)
        print(f"| {LABELS[dag_id]} | {cells} | {per_date[dag_id] * 1000:.0f} ms |")
    summary["task_duration_per_date_s"] = per_date
    if "bench_python" in per_date and "bench_jrs" in per_date:
        extra = per_date["bench_jrs"] - per_date["bench_python"]
        print(f"JRS tasks add {extra * 1000:.0f} ms of task time per date over (b)'s no-op tasks")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dates", type=int, default=30, help="committed dates per backfill (default 30; try 365)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default 2, 1 from 100 dates)")
    parser.add_argument("--plain-dates", type=int, default=5, help="dates for (a), which runs Spark (default 5)")
    parser.add_argument("--skip-plain", action="store_true", help="leave out (a)")
    parser.add_argument("--max-active-runs", type=int, default=2)
    parser.add_argument("--parallelism", type=int, default=2, help="executor slots (default 2)")
    parser.add_argument("--only", nargs="*", choices=SKIPPING, help="run only these skipping variants")
    parser.add_argument(
        "--parse-interval",
        type=int,
        default=3600,
        help="[dag_processor] min_file_process_interval (default 3600: the DAG file is parsed once, as in a "
        "deployment whose files do not change; Airflow's 30 re-parses it every 30 s, about 1.3 s of CPU "
        "each here, landing at random points of the timed backfills)",
    )
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs, Airflow home)")
    parser.add_argument("--busy-seconds", type=float, default=0, help="also run the busy-slots scenario")
    parser.add_argument("--busy-dates", type=int, default=10, help="dates of the busy-slots backfills")
    parser.add_argument("--skip-idle", action="store_true", help="only the busy-slots scenario")
    parser.add_argument(
        "--postgres",
        metavar="URL",
        help="PostgreSQL server for the metadata DB (a fresh database is created and dropped), e.g. "
        "postgresql+psycopg://postgres@127.0.0.1:5432/postgres; default SQLite",
    )
    args = parser.parse_args()
    args.reps = args.reps or (2 if args.dates < 100 else 1)
    variants = list(args.only or SKIPPING)
    work = Path(tempfile.mkdtemp(prefix="jrs-bench-backfill-"))
    print(f"Work folder {work}; {args.dates} dates x {args.reps} reps; variants {variants}", flush=True)

    sys.path.insert(0, str(ROOT / "dags"))
    from flights.data import ensure_landing

    with EmbeddedRedis(work / "redis") as server:
        namespace = f"bench-{uuid.uuid4().hex[:8]}"
        events = work / "spark-events"
        env = jrs_env(server.url, namespace, data_dir=work / "data", event_log_dir=events)
        env["JRS_BENCH_PLAIN_OUTPUT"] = str(work / "plain")
        env["AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL"] = str(args.parse_interval)
        ensure_landing(env["JRS_FLIGHTS_LANDING"])  # once, untimed (not a Spark job)
        ranges = [days(FIRST_DAY + timedelta(days=r * args.dates), args.dates) for r in range(args.reps)]
        warmup = days(FIRST_DAY + timedelta(days=args.reps * args.dates), 2)
        busy_dates = days(warmup[-1] + timedelta(days=1), args.busy_dates) if args.busy_seconds else []
        store = RedisJobResultStore(server.url, namespace)
        t0 = time.monotonic()
        committed = [d for r in ranges for d in r] + warmup + busy_dates
        precommit(store, committed, env["JRS_FLIGHTS_LANDING"], env["AIRFLOW__JRS__OUTPUT_ROOT"])
        print(f"Pre-committed {2 * len(committed)} jobs through the store API in {time.monotonic() - t0:.1f} s")
        database = fresh_database(args.postgres) if args.postgres else None
        airflow = LocalDeployment(
            work / "airflow", bundles={"bench": ROOT / "benchmarks" / "dags"}, env=env, parallelism=args.parallelism,
            log_level="WARNING", sql_alchemy_conn=database,
        )  # fmt: skip
        print(f"Metadata database: {'PostgreSQL ' + database.rsplit('/', 1)[1] if database else 'SQLite'}")
        try:
            summary = run(airflow, args, variants, ranges, warmup, busy_dates, events)
        finally:
            if database:
                drop_database(database)
        store.client.close()
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    summary["database"] = "postgresql" if args.postgres else "sqlite"
    summary["measured_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2, default=str))
    return 0


def fresh_database(server_url: str) -> str:
    """Create an empty database on the server; return its SQLAlchemy URL."""
    import psycopg

    base, _, _ = server_url.rpartition("/")
    name = f"jrs_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{base}/{name}"


def drop_database(url: str) -> None:
    import psycopg

    base, _, name = url.rpartition("/")
    with psycopg.connect(f"{base}/postgres".replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run(
    airflow: LocalDeployment,
    args: argparse.Namespace,
    variants: list[str],
    ranges: list[list[date]],
    warmup: list[date],
    busy_dates: list[date],
    events: Path,
) -> dict[str, Any]:
    with airflow:
        all_dags = [*variants, *([] if args.skip_plain else ["bench_plain"])]
        all_dags += ["bench_busy"] if args.busy_seconds else []
        for dag_id in all_dags:
            airflow.wait_for_dag(dag_id)
            airflow.client.unpause(dag_id)
        bench = Bench(airflow, SparkLaunches(events), args.max_active_runs)
        print("Warm-up:", flush=True)
        for dag_id in variants:
            bench.backfill(dag_id, warmup, timed=False)
        for rep, dates in enumerate(ranges if not args.skip_idle else [], 1):
            print(f"Repetition {rep}:", flush=True)
            for dag_id in variants if rep % 2 else reversed(variants):
                bench.backfill(dag_id, dates)
        if args.busy_seconds:
            print(f"Worker slots busy ({args.busy_seconds:.0f} s) when each backfill starts:", flush=True)
            for dag_id in variants:
                busy_run = bench.occupy_slots(args.busy_seconds, args.parallelism)
                bench.backfill(dag_id, busy_dates, scenario="slots busy")
                airflow.client.wait_for_run("bench_busy", busy_run, timeout=args.busy_seconds + 300)
        if not args.skip_plain:
            print("(a) plain SparkSubmitOperator (computes every date):", flush=True)
            bench.backfill("bench_plain", days(FIRST_DAY, args.plain_dates))
        summary = report(bench, args)
        summary["component_restarts"] = dict(airflow.restarts)
        if airflow.restarts:
            print(f"Components restarted during the run: {airflow.restarts}")
    return summary


if __name__ == "__main__":
    raise SystemExit(main())
