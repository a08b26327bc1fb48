"""The Spark time figures' routes on a metadata DB full of guarded tasks' payloads.

    .venv/bin/python benchmarks/stats_bench.py [--dates 366] [--jobs 50] [--reps 10]

A real api-server and dag-processor on SQLite (:class:`~jrs_testbench.deployment.LocalDeployment`),
the DAG of ``benchmarks/calendar_bench.py`` (``--jobs`` guarded tasks, daily), ``--dates`` runs
created through Airflow's REST API, and one XCom payload per task and run written straight into
the metadata DB (two thirds reused, one third computed: ``--dates`` x ``--jobs`` rows). Then, by
the same client and admin token, interleaved, ``--reps`` times each:

* ``stats``: ``GET /jrs/api/stats`` (the dashboard widget, ``airflow-jrs stats``: every row);
* ``dag stats, month``: ``GET /jrs/api/dags/{dag_id}/stats`` over 31 days (the calendar's figures);
* ``calendar, month``: ``GET /jrs/api/dags/{dag_id}/calendar`` over the same 31 days, for scale.

Prints each one's p50 and p95 in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from calendar_bench import DAG_ID, START, dag_source, interleaved_times, percentile  # noqa: E402

from airflow_jrs.domain.model import Attempt, EntryState, JobResult, JobStatus  # noqa: E402
from airflow_jrs.domain.payload import result_payload  # noqa: E402
from jrs_testbench.deployment import LocalDeployment  # noqa: E402
from jrs_testbench.helpers import jrs_env  # noqa: E402
from jrs_testbench.redis_server import EmbeddedRedis  # noqa: E402


def write_payloads(db: Path, jobs: int) -> int:
    """One payload per guarded task and run, as the task would hand it on."""
    now = datetime.now(UTC).replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")
    with sqlite3.connect(db) as conn:
        runs = conn.execute("SELECT id, run_id FROM dag_run WHERE dag_id = ?", (DAG_ID,)).fetchall()
        rows = []
        for n, (run_pk, run_id) in enumerate(runs):
            for i in range(jobs):
                start = START + timedelta(days=n, hours=1)
                result = JobResult(
                    job_id=f"bench.{i:02d}.{n}", status=JobStatus.SUCCEEDED, start_time=start,
                    end_time=start + timedelta(seconds=60 + i), attempt=Attempt(DAG_ID, f"job_{i:02d}", run_id, 1),
                )  # fmt: skip
                value = result_payload(result, EntryState.CLEAN, skipped=(n + i) % 3 != 0)
                rows.append((run_pk, f"job_{i:02d}", -1, "return_value", DAG_ID, run_id, json.dumps(value), now))
        conn.executemany(
            "INSERT INTO xcom (dag_run_id, task_id, map_index, key, dag_id, run_id, value, timestamp) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    return len(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dates", type=int, default=366)
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--reps", type=int, default=10)
    a = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="jrs-stats-bench-"))
    dags = work / "dags"
    dags.mkdir()
    (dags / "bench.py").write_text(dag_source(a.jobs))
    with EmbeddedRedis(work / "redis", appendfsync="everysec") as redis_server:
        env = jrs_env(redis_server.url, f"st-{uuid.uuid4().hex[:6]}", data_dir=work / "data")
        airflow = LocalDeployment(
            work / "airflow", bundles={"bench": dags}, env=env, components=("api-server", "dag-processor")
        )
        with airflow:
            airflow.wait_for_dag(DAG_ID, timeout=600)
            client = airflow.client
            for n in range(a.dates):
                day = START + timedelta(days=n)
                client.request("POST", f"/api/v2/dags/{DAG_ID}/dagRuns", {"logical_date": day.isoformat()})
            rows = write_payloads(work / "airflow" / "airflow.db", a.jobs)
            print(f"{a.dates} runs, {rows} payload rows", flush=True)
            month = f"start={START.date().isoformat()}&end={(START + timedelta(days=30)).date().isoformat()}"
            urls = {
                "stats": f"{airflow.url}/jrs/api/stats",
                "dag stats, month": f"{airflow.url}/jrs/api/dags/{DAG_ID}/stats?{month}",
                "calendar, month": f"{airflow.url}/jrs/api/dags/{DAG_ID}/calendar?{month}",
            }
            token = client.token()
            total = client.request("GET", "/jrs/api/stats")["total"]
            print(f"figures: {total['computed']} computed, {total['reused']} reused, avoided {total['avoided']}")
            times = interleaved_times(urls, token, a.reps)
    print(f"\n{a.dates} dates x {a.jobs} guarded tasks, {a.reps} requests each, interleaved (SQLite)")
    print(f"{'endpoint':<20}{'p50 ms':>10}{'p95 ms':>10}")
    for name, values in times.items():
        print(f"{name:<20}{statistics.median(values):>10.0f}{percentile(values, 0.95):>10.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
