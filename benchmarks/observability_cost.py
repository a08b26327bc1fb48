"""What lineage and metrics add to the committed skip path (issue 43, item 4: at most 5 ms).

One committed job; the guarded operator's ``execute`` decides to skip it, as a backfill of a
committed date does, and then answers what the openlineage provider asks after the task
(``get_openlineage_facets_on_complete``: the reused outputs and the ``jrs_job`` facet, the
event's payload). "Both on" is ``[metrics] statsd_on`` (DogStatsD tags, to a UDP listener on
loopback that counts what arrives) and an ``[openlineage]`` file transport; "both off" is
neither. Each side runs in its own child Python (Airflow reads ``[metrics]`` once per process),
alternating off, on, off, on, ... so that machine noise hits both alike; each child times
``--calls`` skips after a warm-up. Prints each side's median per skip and the difference.

    .venv/bin/python benchmarks/observability_cost.py [--rounds 6] [--calls 300]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
DAY = datetime(2013, 1, 1, tzinfo=UTC)
JOB = "bench.t.2013-01-01"


def context() -> dict:
    ti = SimpleNamespace(
        dag_id="bench", task_id="t", run_id="bench", try_number=1, map_index=-1, xcom_push=lambda **kw: None
    )
    return {"ti": ti, "run_id": "bench", "data_interval_start": DAY, "logical_date": DAY}


def child(calls: int, lineage_on: bool) -> None:
    """Time ``calls`` skips of the committed job through the operator; print the median (ms)."""
    from airflow_jrs.operators import JrsSparkSubmitOperator

    op = JrsSparkSubmitOperator(
        task_id="t", application=os.environ["BENCH_APP"], application_args=["--output", "{jrs_output}"],
        conn_id="spark_local",
    )  # fmt: skip
    times = []
    for i in range(calls + 20):
        ctx = context()
        started = time.perf_counter()
        payload = op.execute(ctx)
        if lineage_on:
            lineage = op.get_openlineage_facets_on_complete(ctx["ti"])
            assert lineage.outputs, "the reused job named no output"
        took = time.perf_counter() - started
        assert payload["reused"] is True
        if i >= 20:  # the first calls warm the client, the scripts and the imports
            times.append(took * 1000)
    print(json.dumps({"median_ms": statistics.median(times)}))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--child", choices=["on", "off"])
    args = parser.parse_args()
    if args.child:
        child(args.calls, args.child == "on")
        return 0

    work = Path(tempfile.mkdtemp(prefix="jrs-bench-"))
    sys.path.insert(0, str(ROOT))
    from airflow_jrs.domain.identity import fingerprint
    from airflow_jrs.store import JobResult, JobStatus, RedisJobResultStore
    from jrs_testbench.helpers import connection_env, spark_env
    from jrs_testbench.redis_server import EmbeddedRedis

    app = work / "app.py"
    app.write_text("raise SystemExit('Spark must not run: the job is committed')\n")
    args_ = ["--output", "{jrs_output}"]
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", 0))
    received = [0]

    def count() -> None:
        while True:
            data = listener.recv(65536)
            received[0] += data.count(b"jrs.")

    threading.Thread(target=count, daemon=True).start()
    with EmbeddedRedis(work / "redis") as server:
        store = RedisJobResultStore(server.url, "bench")
        fp = fingerprint(
            application_bytes=app.read_bytes(), application=str(app), application_args=args_, job_version=None
        )
        store.create_dirty_result(
            JobResult(job_id=JOB, status=JobStatus.SUCCEEDED, fingerprint=fp, outputs={"output": str(work / "out")},
                      start_time=datetime(2013, 1, 1, tzinfo=UTC), end_time=datetime(2013, 1, 1, 0, 10, tzinfo=UTC))
        )  # fmt: skip
        store.mark_result_as_clean(JOB)
        base = {
            **os.environ,
            "AIRFLOW_HOME": str(work / "airflow"),
            **connection_env(server.url, "bench", data_dir=work),
            **spark_env(),
            "BENCH_APP": str(app),
            "PYTHONPATH": str(ROOT),
        }
        sides = {
            "off": {**base, "AIRFLOW__METRICS__STATSD_ON": "False", "AIRFLOW__OPENLINEAGE__DISABLED": "True"},
            "on": {
                **base,
                "AIRFLOW__METRICS__STATSD_ON": "True",
                "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
                "AIRFLOW__METRICS__STATSD_PORT": str(listener.getsockname()[1]),
                "AIRFLOW__METRICS__STATSD_DATADOG_ENABLED": "True",
                "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
                    {"type": "file", "log_file_path": str(work / "lineage.jsonl"), "append": True}
                ),
            },
        }
        medians: dict[str, list[float]] = {"off": [], "on": []}
        for _ in range(args.rounds):
            for side in ("off", "on"):
                done = subprocess.run(
                    [sys.executable, __file__, "--child", side, "--calls", str(args.calls)],
                    env=sides[side], capture_output=True, text=True, timeout=600,
                )  # fmt: skip
                if done.returncode != 0:
                    print(done.stderr[-3000:], file=sys.stderr)
                    return 1
                medians[side].append(json.loads(done.stdout.strip().splitlines()[-1])["median_ms"])
        off, on = statistics.median(medians["off"]), statistics.median(medians["on"])
        print(f"committed skip through execute, {args.rounds} rounds x {args.calls} calls, median of medians:")
        print(f"  both off: {off:.3f} ms   (rounds: {', '.join(f'{m:.3f}' for m in medians['off'])})")
        print(f"  both on:  {on:.3f} ms   (rounds: {', '.join(f'{m:.3f}' for m in medians['on'])})")
        print(f"  difference: {on - off:+.3f} ms ({on / off:.2f}x); goal: at most +5 ms")
        print(f"  jrs.* metrics received by the UDP listener: {received[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
