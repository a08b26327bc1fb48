"""Wake-up latency of JobResultTrigger after ``create_dirty_result``, against a Redis PING baseline.

Each iteration starts a fresh trigger (as the triggerer does for a deferred sensor) on an
asyncio loop in its own thread, waits until Redis reports it subscribed (``PUBSUB NUMSUB``),
then writes the job's result from the main thread and measures the time from the start of
``create_dirty_result`` to the trigger yielding its event. That span holds the create's own
round trip (Lua script + PUBLISH), the message delivery, the trigger's re-read of the entry
(one pipelined round trip) and decoding: what a deferred sensor waits beyond the write.

The baseline is one PING round trip from the same client in the same run, so the ratio
(median wake-up / median PING) is comparable across machines.

    .venv/bin/python benchmarks/trigger_latency.py [--iterations 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def summary(name: str, seconds: list[float]) -> str:
    ms = [s * 1000 for s in seconds]
    return (
        f"{name:<28} median {statistics.median(ms):7.3f} ms   p99 {percentile(ms, 99):7.3f} ms   "
        f"mean {statistics.fmean(ms):7.3f} ms   max {max(ms):7.3f} ms   (n={len(ms)})"
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=1000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="jrs-bench-trigger-"))
    os.environ["AIRFLOW_HOME"] = str(work / "airflow")  # importing the trigger loads Airflow's config
    sys.path.insert(0, str(ROOT))

    import redis

    from airflow_jrs.store import JobResult, JobStatus, RedisJobResultStore
    from airflow_jrs.store.redis.keys import KeySpace
    from airflow_jrs.triggers import JobResultTrigger
    from jrs_testbench.redis_server import EmbeddedRedis

    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    channel = KeySpace(namespace).events
    with EmbeddedRedis(work / "redis", appendfsync="everysec") as server:
        client = redis.Redis(port=server.port)
        store = RedisJobResultStore(client, namespace)
        connection = {"host": "127.0.0.1", "port": server.port, "db": 0}

        def subscribers() -> int:
            return int(client.pubsub_numsub(channel)[0][1])

        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()

        async def first_event(trigger: JobResultTrigger) -> tuple[float, Any]:
            gen = trigger.run()
            try:
                event = await anext(gen)
                return time.perf_counter(), event
            finally:
                await gen.aclose()

        for _ in range(200):  # warm-up: connections, script cache, CPU frequency
            client.ping()
        pings = []
        for _ in range(args.iterations):
            started = time.perf_counter()
            client.ping()
            pings.append(time.perf_counter() - started)

        wakeups, creates, subscribes = [], [], []
        for i in range(args.iterations):
            job_id = f"bench.job.{i}"
            trigger = JobResultTrigger(connection=connection, namespace=namespace, job_ids=[job_id], poll_interval=300)
            started = time.perf_counter()
            future = asyncio.run_coroutine_threadsafe(first_event(trigger), loop)
            while subscribers() < 1:
                time.sleep(0.0002)
            subscribes.append(time.perf_counter() - started)
            t0 = time.perf_counter()
            store.create_dirty_result(JobResult(job_id=job_id, status=JobStatus.SUCCEEDED))
            creates.append(time.perf_counter() - t0)
            woke, event = future.result(timeout=30)
            assert event.payload["status"] == "success", event.payload
            wakeups.append(woke - t0)
            while subscribers() > 0:  # the trigger closed its connection: next one starts clean
                time.sleep(0.0002)

        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        version = client.info("server")["redis_version"]
        client.close()

    print(
        f"JobResultTrigger wake-up latency, {args.iterations} iterations, redis-server {version} on "
        f"loopback, Python {platform.python_version()}, {os.cpu_count()} CPUs"
    )
    print(summary("PING round trip", pings))
    print(summary("create_dirty_result call", creates))
    print(summary("trigger start -> subscribed", subscribes))
    print(summary("create -> trigger event", wakeups))
    ratio = statistics.median(wakeups) / statistics.median(pings)
    print(f"wake-up median / PING median: {ratio:.1f}x; target: median under 5 ms")
    return 0 if statistics.median(wakeups) < 0.005 else 1


if __name__ == "__main__":
    raise SystemExit(main())
