"""Missing-only backfill against a backfill of only its missing dates: wall time, task instances, launches.

    .venv/bin/python benchmarks/missing_only.py --store-only [--dates 3650 --jobs-per-date 10]
    .venv/bin/python benchmarks/missing_only.py [--dates 60] [--fractions 0.01 0.1 0.5] [--reps 3] [--skip-dates N]

**Store side** (``--store-only``, no Airflow): a generated DAG of ``--jobs-per-date`` jobs, every
job of ``--dates`` dates committed through the store API but the ``--fractions`` missing;
``airflow-jrs backfill --missing-only --dry-run`` (in this process, its own code) is timed, and
its round trips counted at the connection (sends that carry a result key). What it would create
is ``dates to run x tasks per run`` task instances.

**Real scheduler** (default): one :class:`~jrs_testbench.deployment.LocalDeployment`
(api-server, dag-processor, scheduler; LocalExecutor, ``--parallelism`` slots, SQLite unless
``--postgres``), a private redis-server, the DAG of ``benchmarks/missing_only_dags`` (two
submit >> cleanup pairs per date, ``max_active_runs`` 10) with spark-submit replaced by the
stand-in of :mod:`jrs_testbench.fake_spark` (the real operator and supervisor run; the JVM does
not: a launch is a line in its log, which is what is counted). Side by side, ``--reps`` times
for each of ``--fractions``, alternating which goes first:

* **missing-only**: a fresh span of ``--dates`` dates with that fraction missing (chosen with
  ``--seed``), then ``airflow-jrs backfill --missing-only --wait --json`` in this process, timed
  from the command's start to its return;
* **baseline**: a plain Airflow backfill of only that many dates: ``POST /api/v2/backfills``
  over as many fresh contiguous dates, nothing committed there (every job computes), with the
  same ``max_active_runs`` and the same 1 s polling, timed from the POST to the last run's end.

The ratio missing-only / baseline is the goal's measure (at most 1.1). Runs, task instances and
run states are read back through the REST API; the load average is recorded at the start and
the end. ``--skip-dates N`` adds the per-task skip: a normal backfill over N fully committed
dates (its tasks skip), timed on the server's clock as ``benchmarks/backfill_skip.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
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
    cursor = FIRST
    items: list[tuple[int, float, list[date], set[date], list[date]]] = []
    with EmbeddedRedis(work / "redis") as server:
        namespace = f"bench-mo-{uuid.uuid4().hex[:8]}"
        store = RedisJobResultStore(server.url, namespace)
        for rep in range(args.reps):
            for fraction in args.fractions:
                # a fresh span for the missing-only command, and beside it as many fresh dates
                # as it has missing, contiguous and nothing committed: the baseline's backfill
                dates = days(cursor, args.dates)
                missing = missing_days(dates, fraction, rng)
                baseline = days(cursor + timedelta(days=args.dates), len(missing))
                cursor += timedelta(days=args.dates + len(missing) + 1)
                commit_all(store, [f"bmo_{j}.{d}" for d in dates if d not in missing for j in "ab"])
                items.append((rep, fraction, dates, missing, baseline))
        skip_dates = days(cursor, args.skip_dates)
        warm_up = days(cursor + timedelta(days=args.skip_dates + 1), 1)  # uncommitted: its jobs compute
        last = days(date(2017, 12, 29), 3)  # the scheduler's own catch-up run lands here: let it skip
        if warm_up[0] >= last[0]:
            raise SystemExit("too many dates for the DAG's 2013-2017 span: lower --dates, --reps or --skip-dates")
        commit_all(store, [f"bmo_{j}.{d}" for d in [*skip_dates, *last] for j in "ab"])
        bin_dir, calls = install_fake_spark_submit(work, write_output=True)
        env = jrs_env(server.url, namespace, data_dir=work / "data")
        env["PATH"] = f"{bin_dir}:{env['PATH']}"
        # Parsed once, as in a deployment whose files do not change (Airflow's default re-parses
        # every 30 s, about a second of CPU each on this 2-core machine, inside the timed backfills).
        env["AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL"] = "3600"
        database = fresh_database(args.postgres) if args.postgres else None
        airflow = LocalDeployment(
            work / "airflow", bundles={"bench": ROOT / "benchmarks" / "missing_only_dags"}, env=env,
            parallelism=args.parallelism, components=("api-server", "dag-processor", "scheduler"),
            log_level="WARNING", sql_alchemy_conn=database,
        )  # fmt: skip
        out: dict[str, Any] = {"side_by_side": [], "per_task_skip": None, "load_average": {}}
        try:
            _measure(airflow, args, server.url, namespace, calls, items, skip_dates, warm_up, out)
        finally:
            if database:
                drop_database(database)
        store.client.close()
    out["summary"] = _summary(out["side_by_side"])
    return out


def _measure(
    airflow: Any,
    args: argparse.Namespace,
    redis_url: str,
    namespace: str,
    calls: Path,
    items: list[tuple[int, float, list[date], set[date], list[date]]],
    skip_dates: list[date],
    warm_up: list[date],
    out: dict[str, Any],
) -> None:
    with airflow:
        airflow.wait_for_dag(DAG_ID)
        airflow.client.unpause(DAG_ID)
        creds = {"AIRFLOW_JRS_API_USERNAME": airflow.username, "AIRFLOW_JRS_API_PASSWORD": airflow.password}
        os.environ.update(creds)
        # untimed: the CLI's first call in this process imports Airflow and parses the DAG file
        # (seconds on a loaded machine), which a timed first item would carry alone
        _missing_only(airflow, args, redis_url, namespace, [date(2017, 12, 29)], dry_run=True)
        # untimed: a fresh deployment's first task instances pay its cold start (the executor's
        # workers importing the provider, first connections: 8 task-seconds against 3 for the same
        # work in the first pair of 2026-11-27's quiet run), which would fall on the first side
        # alone. One plain backfill of one uncommitted date, before any pair.
        airflow.backfills.run(
            DAG_ID, warm_up[0], warm_up[0], "none", max_active_runs=args.max_active_runs, via="rest", timeout=600
        )
        out["load_average"]["start"] = os.getloadavg()
        for rep, fraction, dates, missing, baseline in items:
            # alternate which side goes first, so a drift in the machine's load hits both
            order = ("missing_only", "baseline") if rep % 2 == 0 else ("baseline", "missing_only")
            row: dict[str, Any] = {"rep": rep, "missing_fraction": fraction, "dates": len(dates),
                                   "missing_dates": len(missing)}  # fmt: skip
            for side in order:
                # untimed: a backfill of the DAG still active (Airflow marks it complete on a 30 s
                # timer) would turn a one-range missing-only into runs, and refuse the baseline
                airflow.backfills.wait_idle(DAG_ID)
                launches = _launches(calls)
                if side == "missing_only":
                    began = time.time()
                    took, doc = _missing_only(airflow, args, redis_url, namespace, dates)
                    row["how"] = doc["how"]
                    row["ranges"] = _ranges(sorted(missing))
                    span = dates
                else:
                    took, began = _plain_backfill(airflow, args, baseline)
                    span = baseline
                runs, tis, states = _runs_and_tis(airflow, span)
                row[side] = {
                    "seconds": round(took, 1), "server_seconds": _server_span(airflow, span),
                    "dag_runs": runs, "task_instances": tis,
                    "spark_launches": _launches(calls) - launches, "run_states": states,
                    **_breakdown(airflow, span, began, took),
                }  # fmt: skip
            row["ratio"] = round(row["missing_only"]["seconds"] / row["baseline"]["seconds"], 3)
            print(json.dumps(row), flush=True)
            out["side_by_side"].append(row)
        out["load_average"]["end"] = os.getloadavg()
        if skip_dates:
            airflow.backfills.wait_idle(DAG_ID)
            launches = _launches(calls)
            result = airflow.backfills.run(
                DAG_ID, skip_dates[0], skip_dates[-1], "none", max_active_runs=args.max_active_runs, via="rest",
                timeout=6 * 3600,
            )  # fmt: skip
            runs, tis, states = _runs_and_tis(airflow, skip_dates)
            skip = {
                "dates": len(skip_dates), "seconds": round(result.wall_seconds, 1), "dag_runs": runs,
                "task_instances": tis, "spark_launches": _launches(calls) - launches, "run_states": states,
            }  # fmt: skip
            print("per-task skip:", json.dumps(skip), flush=True)
            out["per_task_skip"] = skip


def _missing_only(
    airflow: Any, args: argparse.Namespace, redis_url: str, namespace: str, dates: list[date], *, dry_run: bool = False
) -> tuple[float, dict[str, Any]]:
    """``airflow-jrs backfill --missing-only --wait --json`` in this process, timed from its start
    to its return (DAG parse, store read, REST calls, the runs, 1 s polling)."""
    from airflow_jrs.cli import main as cli

    argv = ["--redis-url", redis_url, "--namespace", namespace, "--json", "backfill", "--dag-id", DAG_ID,
            "--from-date", str(dates[0]), "--to-date", str(dates[-1]),
            "--dags-folder", str(ROOT / "benchmarks" / "missing_only_dags"), "--missing-only",
            "--wait", "--yes", "--airflow-url", airflow.url,
            "--max-active-runs", str(args.max_active_runs), *(["--dry-run"] if dry_run else [])]  # fmt: skip
    buffer = io.StringIO()
    t0 = time.monotonic()
    with contextlib.redirect_stdout(buffer):
        code = cli(argv)
    took = time.monotonic() - t0
    if code != 0:
        raise SystemExit(f"airflow-jrs backfill exited {code}\n{airflow.logs_tail()}")
    return took, json.loads(buffer.getvalue())


def _plain_backfill(airflow: Any, args: argparse.Namespace, dates: list[date]) -> tuple[float, float]:
    """The baseline: a plain Airflow backfill of exactly ``len(missing)`` dates, every one of
    which computes (nothing committed there): ``POST /api/v2/backfills`` with the same
    ``max_active_runs``, waited for with the same 1 s polling, timed the same way."""
    from airflow_jrs.actions.airflow_api import AirflowApi
    from airflow_jrs.actions.backfill import TERMINAL
    from airflow_jrs.actions.backfill_wait import POLL_SECONDS

    api = AirflowApi(airflow.url, username=airflow.username, password=airflow.password)
    first = datetime.combine(dates[0], datetime.min.time(), UTC)
    last = datetime.combine(dates[-1], datetime.min.time(), UTC)
    api.token()  # the CLI's token exchange is timed on its side; here, before: a slight edge to the baseline
    began, t0 = time.time(), time.monotonic()
    api.create_backfill(DAG_ID, first, last, reprocess_behavior="none", max_active_runs=args.max_active_runs)
    while True:
        runs = api.dag_runs(DAG_ID, first, last)
        if len(runs) == len(dates) and all(r.get("state") in TERMINAL for r in runs):
            return time.monotonic() - t0, began
        time.sleep(POLL_SECONDS)


def _server_span(airflow: Any, dates: list[date]) -> float:
    """First run queued -> last run ended, on the server's clock: the scheduler's share of the
    wall, without the command's own start-up, REST calls and polling."""
    lo, hi = dates[0].isoformat(), dates[-1].isoformat()
    runs = [r for r in airflow.client.dag_runs(DAG_ID) if lo <= (r.get("logical_date") or "")[:10] <= hi]
    start = min(_at(r["queued_at"]) for r in runs)
    return round((max(_at(r["end_date"]) for r in runs) - start).total_seconds(), 1)


def _breakdown(airflow: Any, dates: list[date], began: float, took: float) -> dict[str, float]:
    """Where a side's wall time went, on the server's clock (same host, same clock as ``began``):
    ``lead`` from the side's start to its first run queued (the command's parse, store read and
    REST calls; the baseline's POST), ``tail`` from the last run's end to the side's return (the
    polling), and over its task instances the summed ``task_seconds`` (start to end: the work)
    and ``queue_seconds`` (queued to start: the executor's slots), so that a gap between the
    sides can be placed in the command, the scheduler or the tasks."""
    lo, hi = dates[0].isoformat(), dates[-1].isoformat()
    runs = [r for r in airflow.client.dag_runs(DAG_ID) if lo <= (r.get("logical_date") or "")[:10] <= hi]
    first = min(_at(r["queued_at"]).timestamp() for r in runs)
    last = max(_at(r["end_date"]).timestamp() for r in runs)
    task = queue = 0.0
    for run in runs:
        for ti in airflow.client.task_instances(DAG_ID, run["dag_run_id"]):
            if ti.get("start_date") and ti.get("end_date"):
                task += (_at(ti["end_date"]) - _at(ti["start_date"])).total_seconds()
            if ti.get("queued_when") and ti.get("start_date"):
                queue += (_at(ti["start_date"]) - _at(ti["queued_when"])).total_seconds()
    return {
        "lead_seconds": round(first - began, 2), "tail_seconds": round(began + took - last, 2),
        "task_seconds": round(task, 1), "queue_seconds": round(queue, 1),
    }  # fmt: skip


def _at(raw: str) -> datetime:
    return datetime.fromisoformat(raw.replace("Z", "+00:00"))


def _ranges(missing: list[date]) -> int:
    return sum(1 for i, d in enumerate(missing) if i == 0 or (d - missing[i - 1]).days > 1)


def _summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for fraction in sorted({r["missing_fraction"] for r in rows}):
        mine = [r for r in rows if r["missing_fraction"] == fraction]
        ratios = sorted(r["ratio"] for r in mine)
        out.append({
            "missing_fraction": fraction, "missing_dates": mine[0]["missing_dates"],
            "how": sorted({r["how"] for r in mine}), "repetitions": len(mine),
            "missing_only_seconds": [r["missing_only"]["seconds"] for r in mine],
            "baseline_seconds": [r["baseline"]["seconds"] for r in mine],
            "ratios": [r["ratio"] for r in mine], "median_ratio": statistics.median(ratios),
            # the sums weigh each repetition by its length: one stall on a loaded machine moves
            # a short pair's ratio a lot and the sum's little
            "sum_ratio": round(
                sum(r["missing_only"]["seconds"] for r in mine) / sum(r["baseline"]["seconds"] for r in mine), 3
            ),
        })  # fmt: skip
    return out


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
    parser.add_argument("--dates", type=int, default=60)
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.01, 0.1, 0.5])
    parser.add_argument("--reps", type=int, default=3, help="repetitions of each fraction, side by side")
    parser.add_argument("--skip-dates", type=int, default=0, help="also a per-task skip of N committed dates")
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
