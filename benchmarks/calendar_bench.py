"""The Job calendar beside Airflow's own calendar and grid endpoints, for the same DAG and dates.

    .venv/bin/python benchmarks/calendar_bench.py [--dates 366] [--jobs 50] [--reps 20] [--postgres URL]

A real api-server and dag-processor (:class:`~jrs_testbench.deployment.LocalDeployment`, SQLite
unless ``--postgres``), the session's own redis-server, and a generated DAG of ``--jobs``
guarded tasks (a templated ``job_id`` each) scheduled daily. ``--dates`` real runs are created in
the metadata DB through Airflow's REST API (no scheduler: they stay queued), and about two
thirds of the jobs are committed in the store. Then, over the same ``--dates`` days, each of
these is asked ``--reps`` times, interleaved, by the same HTTP client and admin token:

* ``jrs calendar``: ``GET /jrs/api/dags/{dag_id}/calendar`` (the plugin: the serialized DAG, the
  timetable, the runs and one pipelined store read per 500 jobs);
* ``airflow calendar``: ``GET /ui/calendar/{dag_id}`` (Airflow's own calendar view, daily);
* ``airflow grid runs``: ``GET /ui/grid/runs/{dag_id}`` with ``limit`` = the dates;
* ``airflow grid structure``: ``GET /ui/grid/structure/{dag_id}``.

Prints each one's p50 and p95 in milliseconds and the plugin's ratio to Airflow's calendar (the
goal: the plugin's p95 at most Airflow's calendar's); then the plugin's first request (nothing
kept yet, every row planned) and ``--reps`` more with one job of another date forgotten and
committed again before each (one row planned again per request). Recorded in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from airflow_jrs.store import Attempt, JobResult, JobStatus, RedisJobResultStore  # noqa: E402
from jrs_testbench.deployment import LocalDeployment  # noqa: E402
from jrs_testbench.helpers import jrs_env  # noqa: E402
from jrs_testbench.redis_server import EmbeddedRedis  # noqa: E402

DAG_ID = "jrs_calendar_bench"
START = datetime(2024, 1, 1, tzinfo=UTC)


def dag_source(jobs: int) -> str:
    return f'''
from datetime import UTC, datetime
from airflow.sdk import DAG
from airflow_jrs.operators import JrsSparkSubmitOperator

with DAG("{DAG_ID}", schedule="@daily", start_date=datetime(2024, 1, 1, tzinfo=UTC), catchup=False):
    for i in range({jobs}):
        JrsSparkSubmitOperator(
            task_id=f"job_{{i:02d}}", application="/nowhere/app.py", conn_id="spark_local",
            application_args=["--day", "{{{{ ds }}}}"], job_id=f"bench.{{i:02d}}." + "{{{{ ds_nodash }}}}",
        )
'''


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def interleaved_times(
    urls: dict[str, str], token: str, reps: int, write: Callable[[int], None] | None = None
) -> dict[str, list[float]]:
    """Milliseconds of ``reps`` GETs of each URL, interleaved so that machine noise hits all
    alike, after one untimed GET of each (the first request deserializes the DAG). With
    ``write``, it is called before each round (its notification given 50 ms to arrive)."""
    for url in urls.values():
        timed_get(url, token)
    times: dict[str, list[float]] = {name: [] for name in urls}
    for n in range(reps):
        if write is not None:
            write(n)
            time.sleep(0.05)
        for name, url in urls.items():
            times[name].append(timed_get(url, token))
    return times


def timed_get(url: str, token: str) -> float:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}", "Accept": "application/json"})
    began = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        raise RuntimeError(f"{url}: HTTP {exc.code}: {exc.read().decode(errors='replace')[:500]}") from None
    return (time.perf_counter() - began) * 1000


def body_size(url: str, token: str) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}", "Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as response:
        return len(response.read())


@contextlib.contextmanager
def fresh_database(server_url: str | None) -> Iterator[str | None]:
    """A new PostgreSQL database on ``server_url``'s server for this run (runs of an earlier one
    would collide), dropped at the end; ``None``: SQLite in the Airflow home."""
    if server_url is None:
        yield None
        return
    import psycopg

    plain = server_url.replace("postgresql+psycopg://", "postgresql://")
    name = f"jrs_calbench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(plain, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield server_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(plain, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dates", type=int, default=366)
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument(
        "--postgres", default=None, help="a PostgreSQL server's URL: a fresh database there is the metadata DB"
    )
    a = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="jrs-calendar-bench-"))
    dags = work / "dags"
    dags.mkdir()
    (dags / "bench.py").write_text(dag_source(a.jobs))
    with fresh_database(a.postgres) as database, EmbeddedRedis(work / "redis", appendfsync="everysec") as redis_server:
        namespace = f"cal-{uuid.uuid4().hex[:6]}"
        env = jrs_env(redis_server.url, namespace, data_dir=work / "data")
        airflow = LocalDeployment(
            work / "airflow", bundles={"bench": dags}, env=env, components=("api-server", "dag-processor"),
            sql_alchemy_conn=database,
        )  # fmt: skip
        store = RedisJobResultStore(redis_server.url, namespace)
        with airflow:
            airflow.wait_for_dag(DAG_ID, timeout=600)
            client = airflow.client
            days = [START + timedelta(days=i) for i in range(a.dates)]
            made = time.perf_counter()
            for day in days:
                client.request("POST", f"/api/v2/dags/{DAG_ID}/dagRuns", {"logical_date": day.isoformat()})
            print(f"{a.dates} runs created in {time.perf_counter() - made:.1f} s", flush=True)
            committed = 0
            for n, day in enumerate(days):
                for i in range(a.jobs):
                    if (n + i) % 3 == 0:
                        continue
                    job_id = f"bench.{i:02d}.{day:%Y%m%d}"
                    store.create_dirty_result(
                        JobResult(job_id=job_id, status=JobStatus.SUCCEEDED,
                                  attempt=Attempt(DAG_ID, f"job_{i:02d}", "r", 1), fingerprint="0" * 64)
                    )  # fmt: skip
                    store.mark_result_as_clean(job_id)
                    committed += 1
            print(f"{committed} of {a.dates * a.jobs} jobs committed", flush=True)
            first, last = days[0].date().isoformat(), days[-1].date().isoformat()
            gte, lte = days[0].isoformat().replace("+00:00", "Z"), (days[-1] + timedelta(hours=23)).isoformat()
            lte = lte.replace("+00:00", "Z")
            urls = {
                "jrs calendar": f"{airflow.url}/jrs/api/dags/{DAG_ID}/calendar?start={first}&end={last}",
                "airflow calendar": f"{airflow.url}/ui/calendar/{DAG_ID}?granularity=daily"
                f"&logical_date_gte={gte}&logical_date_lte={lte}",
                "airflow grid runs": f"{airflow.url}/ui/grid/runs/{DAG_ID}?limit={a.dates}",
                "airflow grid structure": f"{airflow.url}/ui/grid/structure/{DAG_ID}",
            }
            token = client.token()
            cold = timed_get(urls["jrs calendar"], token)  # nothing kept yet: every row planned
            sizes = {name: body_size(url, token) for name, url in urls.items()}
            times = interleaved_times(urls, token, a.reps)

            def write(n: int) -> None:  # one job of another date forgotten, then committed again
                job_id = f"bench.01.{days[(3 * n + 2) % a.dates]:%Y%m%d}"
                if store.get_entry(job_id) is not None:
                    store.forget_result(job_id, reason="bench")
                store.create_dirty_result(
                    JobResult(job_id=job_id, status=JobStatus.SUCCEEDED,
                              attempt=Attempt(DAG_ID, "job_01", "r", 1), fingerprint="0" * 64)
                )  # fmt: skip
                store.mark_result_as_clean(job_id)

            written = interleaved_times({"jrs calendar": urls["jrs calendar"]}, token, a.reps, write)
            times["jrs calendar, a write before each"] = written["jrs calendar"]
        store.client.close()
    print(f"\n{a.dates} dates x {a.jobs} jobs, {a.reps} requests each, interleaved "
          f"({'PostgreSQL' if a.postgres else 'SQLite'})")  # fmt: skip
    print(f"first jrs calendar request (nothing kept): {cold:.0f} ms")
    print("answer sizes: " + ", ".join(f"{name} {size / 1e6:.2f} MB" for name, size in sizes.items()))
    print(f"{'endpoint':<36}{'p50 ms':>10}{'p95 ms':>10}")
    for name, values in times.items():
        print(f"{name:<36}{statistics.median(values):>10.0f}{percentile(values, 0.95):>10.0f}")
    ours, theirs = times["jrs calendar"], times["airflow calendar"]
    print(f"\njrs calendar / airflow calendar: p50 {statistics.median(ours) / statistics.median(theirs):.2f}, "
          f"p95 {percentile(ours, 0.95) / percentile(theirs, 0.95):.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
