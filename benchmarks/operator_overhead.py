"""Wall time of one flights day through JrsSparkSubmitOperator against the plain SparkSubmitOperator.

Both operators run the same ingest application for the same day in local mode, alternating
(plain, jrs, plain, jrs, ...) so that machine noise hits both alike; the JRS run uses a fresh
namespace each time so it really computes (store read, lease, intent, spec, result write).
Also measures the JRS skip path (a committed job) end to end through ``execute``.

    .venv/bin/python benchmarks/operator_overhead.py [--pairs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
DAY = datetime(2013, 1, 1, tzinfo=UTC)


def context(task_id: str) -> dict:
    ti = SimpleNamespace(dag_id="bench", task_id=task_id, try_number=1, map_index=-1, xcom_push=lambda **kw: None)
    return {"ti": ti, "run_id": "bench", "data_interval_start": DAY, "logical_date": DAY}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="jrs-bench-"))
    sys.path.insert(0, str(ROOT))
    from jrs_testbench.helpers import connection_env, spark_env
    from jrs_testbench.redis_server import EmbeddedRedis

    with EmbeddedRedis(work / "redis") as server:
        # the namespace changes for every JRS run below (a fresh one really computes)
        os.environ.update(
            {"AIRFLOW_HOME": str(work / "airflow"), **connection_env(server.url, "bench", data_dir=work), **spark_env()}
        )
        sys.path.insert(0, str(ROOT / "dags"))
        from flights.data import ensure_landing

        landing = str(ensure_landing(work / "landing"))
        from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

        from airflow_jrs.operators import JrsSparkSubmitOperator

        app = str(ROOT / "dags" / "flights" / "apps" / "ingest_flights.py")
        conf = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}
        base_args = ["--date", "2013-01-01", "--landing", landing]
        plain_times, jrs_times = [], []
        for i in range(args.pairs):
            out = str(work / f"plain-{i}")
            plain = SparkSubmitOperator(
                task_id="plain", application=app, application_args=[*base_args, "--output", out],
                conn_id="spark_local", conf=conf,
            )  # fmt: skip
            t0 = time.perf_counter()
            plain.execute(context("plain"))
            plain_times.append(time.perf_counter() - t0)
            ns = f"bench-{uuid.uuid4().hex[:8]}"
            os.environ.update(connection_env(server.url, ns))
            jrs = JrsSparkSubmitOperator(
                task_id="jrs", application=app, application_args=[*base_args, "--output", "{jrs_output}"],
                conn_id="spark_local", conf=conf,
            )  # fmt: skip
            t0 = time.perf_counter()
            jrs.execute(context("jrs"))
            jrs_times.append(time.perf_counter() - t0)
            print(f"pair {i + 1}: plain {plain_times[-1]:.2f}s  jrs {jrs_times[-1]:.2f}s", flush=True)
        skip_times = []
        for _ in range(50):
            jrs = JrsSparkSubmitOperator(
                task_id="jrs", application=app, application_args=[*base_args, "--output", "{jrs_output}"],
                conn_id="spark_local", conf=conf,
            )  # fmt: skip
            t0 = time.perf_counter()
            result = jrs.execute(context("jrs"))
            skip_times.append(time.perf_counter() - t0)
            assert result["skipped"], result
    p, j = statistics.median(plain_times), statistics.median(jrs_times)
    print(f"\nplain SparkSubmitOperator  median {p:.2f}s over {len(plain_times)} runs")
    print(f"JrsSparkSubmitOperator     median {j:.2f}s over {len(jrs_times)} runs  ratio {j / p:.3f}")
    skip_times.sort()
    print(
        f"JRS skip path (committed job, execute() end to end): median {statistics.median(skip_times) * 1000:.1f} ms"
        f"  p99 {skip_times[int(len(skip_times) * 0.99) - 1] * 1000:.1f} ms  (no JVM started)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
