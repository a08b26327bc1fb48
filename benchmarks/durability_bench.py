"""What durability on request costs: create_dirty_result + mark_result_as_clean with and without WAIT.

Starts a primary and one real replica (``EmbeddedRedis``, ``--replicaof``, both append-only with
``appendfsync everysec``) over loopback TCP, and times one create + clean pair per job through
two stores on the same primary: ``durability="none"`` and ``durability="replicas:1"``. Pairs
alternate between the two stores so that machine noise hits both. ``aof`` (``WAITAOF``) is
timed too when the server is 7.2 or newer; older servers refuse it (a configuration error).

    .venv/bin/python benchmarks/durability_bench.py              # 2,000 pairs per variant
    .venv/bin/python benchmarks/durability_bench.py --pairs 300
"""

from __future__ import annotations

import argparse
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import redis as redis_lib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from airflow_jrs.exceptions import JrsConfigError  # noqa: E402
from airflow_jrs.store import JobResult, JobStatus, RedisJobResultStore  # noqa: E402
from jrs_testbench.redis_server import EmbeddedRedis  # noqa: E402


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def pair(store: RedisJobResultStore, job_id: str) -> float:
    started = time.perf_counter()
    store.create_dirty_result(JobResult(job_id=job_id, status=JobStatus.SUCCEEDED, outputs={"o": f"/out/{job_id}"}))
    store.mark_result_as_clean(job_id)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=2_000, help="create+clean pairs per variant (default 2,000)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="jrs-durability-bench-"))
    try:
        with EmbeddedRedis(work / "primary", appendfsync="everysec") as primary:
            replica_args = ["--replicaof", "127.0.0.1", str(primary.port)]
            with EmbeddedRedis(work / "replica", appendfsync="everysec", extra_args=replica_args) as replica:
                client = redis_lib.Redis(port=primary.port)
                while client.info("replication").get("slave0", {}).get("state") != "online":
                    time.sleep(0.05)
                version = client.info("server")["redis_version"]
                print(
                    f"redis-server {version} primary + 1 replica (port {replica.port}), redis-py "
                    f"{redis_lib.__version__}, Python {platform.python_version()}, loopback TCP, "
                    f"appendfsync=everysec; {args.pairs:,} create+clean pairs per variant, alternating"
                )
                variants = {"none": "none", "replicas:1 (WAIT 1)": "replicas:1", "aof (WAITAOF 1 0)": "aof"}
                stores: dict[str, RedisJobResultStore] = {}
                for label, durability in variants.items():
                    store = RedisJobResultStore(client, f"bench-{durability.replace(':', '')}", durability=durability)
                    try:
                        pair(store, "warm-up")
                    except JrsConfigError as exc:
                        print(f"  {label}: not measured: {str(exc).split(';')[0]}")
                        continue
                    stores[label] = store
                times: dict[str, list[float]] = {label: [] for label in stores}
                for i in range(args.pairs):
                    for label, store in stores.items():
                        times[label].append(pair(store, f"j.{i}"))
                client.close()
        base = statistics.median(times["none"])
        print(f"\n{'durability':<24}{'median':>12}{'p99':>12}{'vs none':>10}")
        for label, values in times.items():
            med = statistics.median(values)
            print(f"  {label:<22}{med * 1000:>9.3f} ms{pct(values, 0.99) * 1000:>9.3f} ms{med / base:>9.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
