"""Missing-only backfill against the per-task skip: wall time, task instances, Spark launches.

    .venv/bin/python benchmarks/missing_only.py --store-only [--dates 3650 --jobs-per-date 10]
    .venv/bin/python benchmarks/missing_only.py [--dates 365] [--fractions 0.01 0.1 1.0] [--skip-dates 365]

**Store side** (``--store-only``, no Airflow): a generated DAG of ``--jobs-per-date`` jobs, every
job of ``--dates`` dates committed through the store API but the ``--fractions`` missing;
``airflow-jrs backfill --missing-only --dry-run`` (in this process, its own code) is timed, and
its round trips counted at the connection (sends that carry a result key). What it would create
is ``dates to run x tasks per run`` task instances.

**Real scheduler** (default): one :class:`~jrs_testbench.deployment.LocalDeployment`
(api-server, dag-processor, scheduler; LocalExecutor, ``--parallelism`` slots, SQLite unless
``--postgres``), a private redis-server, the DAG of ``benchmarks/missing_only_dags`` (two
submit >> cleanup pairs per date) with spark-submit replaced by the stand-in of
:mod:`jrs_testbench.fake_spark` (the real operator and supervisor run; the JVM does not: a
launch is a line in its log, which is what is counted). For each fraction, a fresh year of dates
with that fraction missing (chosen with ``--seed``), then ``airflow-jrs backfill --missing-only
--wait`` (in this process), timed from the command's start to its return. The baseline is the
per-task skip: ``POST /api/v2/backfills`` over ``--skip-dates`` fully committed dates (a normal
backfill whose tasks skip), timed on the server's clock (creation -> end of its last run, as
``benchmarks/backfill_skip.py``). Task instances are counted through the REST API in the runs
of the measured range.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from airflow_jrs.store import Attempt, JobResult, JobStatus, RedisJobResultStore  # noqa: E402
from benchmarks.backfill_skip import drop_database, fresh_database  # noqa: E402
from jrs_testbench.redis_server import EmbeddedRedis  # noqa: E402

DAG_ID = "bench_missing_only"
FIRST = date(2013, 1, 1)
TASKS_PER_RUN = 4  # a.submit, a.cleanup, b.submit, b.cleanup


def days(start: date, n: int) -> list[date]:
    return [start + timedelta(days=i) for i in range(n)]


def commit_all(store: RedisJobResultStore, job_ids: list[str]) -> None:
    """Commit jobs through the store API (create dirty, mark clean), as a finished run leaves them."""
    for job_id in job_ids:
        store.create_dirty_result(
            JobResult(job_id=job_id, status=JobStatus.SUCCEEDED, attempt=Attempt(DAG_ID, "t", "bench", 1))
        )
        store.mark_result_as_clean(job_id)


def missing_days(dates: list[date], fraction: float, rng: random.Random) -> set[date]:
    return set(rng.sample(dates, max(1, round(fraction * len(dates)))))


# -- store side ------------------------------------------------------------------------------------
STORE_DAG = """
from datetime import datetime, UTC
from airflow.sdk import DAG
from airflow_jrs.operators import JrsSparkSubmitOperator

with DAG("bench_mo_store", schedule="@daily", start_date=datetime(2000, 1, 1, tzinfo=UTC), catchup=False):
    for i in range({jobs}):
        JrsSparkSubmitOperator(task_id="j" + str(i), application="/nowhere/app.py", conn_id="spark_local",
                               job_id="s" + str(i) + ".{{{{ ds }}}}")
"""


class ResultReads:
    """Counts sends to Redis that read this namespace's results: one per round trip (a pipeline
    is one send), at the connection, so the CLI's own client is measured unchanged."""

    def __init__(self, prefix: bytes) -> None:
        self.prefix = prefix
        self.sends = 0
        self.real: Any = None

    def wrap(self, real: Any) -> Any:
        self.real = real

        def counting(conn: Any, command: Any, check_health: bool = True) -> Any:
            packed = b"".join(command) if isinstance(command, list) else command
            if self.prefix in packed:
                self.sends += 1
            return real(conn, command, check_health)

        return counting


def store_side(args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    from redis.connection import AbstractConnection

    from airflow_jrs.cli import main as cli

    folder = work / "store-dags"
    folder.mkdir()
    (folder / "bench_mo_store.py").write_text(STORE_DAG.format(jobs=args.jobs_per_date))
    rows = []
    with EmbeddedRedis(work / "redis-store") as server:
        warm = ["--redis-url", server.url, "--namespace", "warm-up", "--json", "backfill",
                "--dag-id", "bench_mo_store", "--from-date", "2000-01-01", "--to-date", "2000-01-02",
                "--dags-folder", str(folder), "--dry-run"]  # fmt: skip
        with (work / "warm.json").open("w") as fh:  # untimed: Airflow's imports and the first DAG parse
            saved, sys.stdout = sys.stdout, fh
            try:
                cli(warm)
            finally:
                sys.stdout = saved
        for fraction in args.fractions:
            namespace = f"bench-mo-{uuid.uuid4().hex[:8]}"
            store = RedisJobResultStore(server.url, namespace)
            dates = days(date(2000, 1, 1), args.dates)
            missing = missing_days(dates, fraction, random.Random(args.seed))
            jobs = [f"s{i}.{d.isoformat()}" for d in dates if d not in missing for i in range(args.jobs_per_date)]
            commit_all(store, jobs)
            counter = ResultReads(store.keys.result("x")[:-1].encode())
            AbstractConnection.send_packed_command = counter.wrap(AbstractConnection.send_packed_command)  # type: ignore[method-assign]
            argv = ["--redis-url", server.url, "--namespace", namespace, "--json", "backfill", "--dag-id",
                    "bench_mo_store", "--from-date", str(dates[0]), "--to-date", str(dates[-1]),
                    "--dags-folder", str(folder), "--missing-only", "--dry-run"]  # fmt: skip
            out = work / "out.json"
            t0 = time.monotonic()
            with out.open("w") as fh:
                saved, sys.stdout = sys.stdout, fh
                try:
                    code = cli(argv)
                finally:
                    sys.stdout = saved
            took = time.monotonic() - t0
            AbstractConnection.send_packed_command = counter.real  # type: ignore[method-assign]
            if code != 0:
                raise SystemExit(f"airflow-jrs exited {code}")
            doc = json.loads(out.read_text())
            s = doc["summary"]
            row = {
                "dates": args.dates, "jobs_per_date": args.jobs_per_date, "missing_fraction": fraction,
                "dates_to_run": s["dates_to_run"], "backfills": s["backfills"], "seconds": round(took, 2),
                "store_round_trips": counter.sends,
                # The generated DAG has one submit task per job (no cleanup): a run is jobs_per_date tasks.
                "task_instances_missing_only": s["dates_to_run"] * args.jobs_per_date,
                "task_instances_per_task_skip": args.dates * args.jobs_per_date,
            }  # fmt: skip
            print(json.dumps(row), flush=True)
            rows.append(row)
            store.client.close()
    return rows


# -- real scheduler --------------------------------------------------------------------------------
def scheduler_side(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from jrs_testbench.deployment import LocalDeployment
    from jrs_testbench.fake_spark import install_fake_spark_submit
    from jrs_testbench.helpers import jrs_env

    rng = random.Random(args.seed)
    years = [days(FIRST + timedelta(days=366 * i), args.dates) for i in range(len(args.fractions))]
    skip_dates = days(FIRST + timedelta(days=366 * len(args.fractions)), args.skip_dates)
    out: dict[str, Any] = {"missing_only": [], "per_task_skip": None}
    with EmbeddedRedis(work / "redis") as server:
        namespace = f"bench-mo-{uuid.uuid4().hex[:8]}"
        store = RedisJobResultStore(server.url, namespace)
        bin_dir, calls = install_fake_spark_submit(work, write_output=True)
        env = jrs_env(server.url, namespace, data_dir=work / "data")
        env["PATH"] = f"{bin_dir}:{env['PATH']}"
        # Parsed once, as in a deployment whose files do not change (Airflow's default re-parses
        # every 30 s, about a second of CPU each on this 2-core machine, inside the timed backfills).
        env["AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL"] = "3600"
        plans = []
        for fraction, dates in zip(args.fractions, years, strict=True):
            missing = missing_days(dates, fraction, rng)
            commit_all(store, [f"bmo_{j}.{d}" for d in dates if d not in missing for j in "ab"])
            plans.append((fraction, dates, missing))
        last = days(date(2017, 12, 29), 3)  # the scheduler's own catch-up run lands here: let it skip
        commit_all(store, [f"bmo_{j}.{d}" for d in [*skip_dates, *last] for j in "ab"])
        database = fresh_database(args.postgres) if args.postgres else None
        airflow = LocalDeployment(
            work / "airflow", bundles={"bench": ROOT / "benchmarks" / "missing_only_dags"}, env=env,
            parallelism=args.parallelism, components=("api-server", "dag-processor", "scheduler"),
            log_level="WARNING", sql_alchemy_conn=database,
        )  # fmt: skip
        try:
            _measure(airflow, args, server.url, namespace, calls, plans, skip_dates, out)
        finally:
            if database:
                drop_database(database)
        store.client.close()
    return out


def _measure(
    airflow: Any,
    args: argparse.Namespace,
    redis_url: str,
    namespace: str,
    calls: Path,
    plans: list[tuple[float, list[date], set[date]]],
    skip_dates: list[date],
    out: dict[str, Any],
) -> None:
    from airflow_jrs.cli import main as cli

    with airflow:
        airflow.wait_for_dag(DAG_ID)
        airflow.client.unpause(DAG_ID)
        creds = {"AIRFLOW_JRS_API_USERNAME": airflow.username, "AIRFLOW_JRS_API_PASSWORD": airflow.password}
        os.environ.update(creds)
        for fraction, dates, missing in plans:
            launches = _launches(calls)
            argv = ["--redis-url", redis_url, "--namespace", namespace, "backfill", "--dag-id", DAG_ID,
                    "--from-date", str(dates[0]), "--to-date", str(dates[-1]),
                    "--dags-folder", str(ROOT / "benchmarks" / "missing_only_dags"), "--missing-only",
                    "--wait", "--airflow-url", airflow.url,
                    "--max-active-runs", str(args.max_active_runs)]  # fmt: skip
            t0 = time.monotonic()
            code = cli(argv)
            took = time.monotonic() - t0
            if code != 0:
                raise SystemExit(f"airflow-jrs backfill exited {code}\n{airflow.logs_tail()}")
            runs, tis, states = _runs_and_tis(airflow, dates)
            row = {
                "dates": len(dates), "missing_fraction": fraction, "missing_dates": len(missing),
                "seconds": round(took, 1), "dag_runs": runs, "task_instances": tis,
                "spark_launches": _launches(calls) - launches, "run_states": states,
            }  # fmt: skip
            print(json.dumps(row), flush=True)
            out["missing_only"].append(row)
        launches = _launches(calls)
        result = airflow.backfills.run(
            DAG_ID,
            skip_dates[0],
            skip_dates[-1],
            "none",
            max_active_runs=args.max_active_runs,
            via="rest",
            timeout=6 * 3600,
        )
        runs, tis, states = _runs_and_tis(airflow, skip_dates)
        row = {
            "dates": len(skip_dates), "seconds": round(result.wall_seconds, 1), "dag_runs": runs,
            "task_instances": tis, "spark_launches": _launches(calls) - launches, "run_states": states,
        }  # fmt: skip
        print("per-task skip:", json.dumps(row), flush=True)
        out["per_task_skip"] = row


def _launches(calls: Path) -> int:
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def _runs_and_tis(airflow: Any, dates: list[date]) -> tuple[int, int, dict[str, int]]:
    lo, hi = dates[0].isoformat(), dates[-1].isoformat()
    runs = [r for r in airflow.client.dag_runs(DAG_ID) if lo <= (r.get("logical_date") or "")[:10] <= hi]
    tis = sum(len(airflow.client.task_instances(DAG_ID, r["dag_run_id"])) for r in runs)
    states: dict[str, int] = {}
    for r in runs:
        states[r["state"]] = states.get(r["state"], 0) + 1
    return len(runs), tis, states


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dates", type=int, default=365)
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.01, 0.1, 1.0])
    parser.add_argument("--skip-dates", type=int, default=None, help="dates of the per-task skip (default --dates)")
    parser.add_argument("--jobs-per-date", type=int, default=2, help="--store-only: jobs per date (default 2)")
    parser.add_argument("--store-only", action="store_true", help="only the store read (no Airflow)")
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--max-active-runs", type=int, default=10)
    parser.add_argument(
        "--postgres",
        metavar="URL",
        help="PostgreSQL server for the metadata DB (a fresh database is created and dropped, as in "
        "backfill_skip.py), e.g. postgresql+psycopg://postgres@127.0.0.1:5432/postgres; default SQLite",
    )
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    args.skip_dates = args.skip_dates or args.dates
    work = Path(tempfile.mkdtemp(prefix="jrs-bench-missing-only-"))
    print(f"Work folder {work}", flush=True)
    try:
        summary: dict[str, Any] = {"args": vars(args)}
        if args.store_only:
            summary["store"] = store_side(args, work)
        else:
            summary |= scheduler_side(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary["measured_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
