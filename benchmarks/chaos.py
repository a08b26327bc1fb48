"""Chaos benchmark: many attempts killed at random moments, each followed by a successor.

Not a test: it prints trials, duplicate publications (must be 0), lost results (must be 0),
and recovery times after the kill: *takeover* (kill -> the successor holds the job's lease,
seen as the fencing counter moving) and *result* (kill -> the job has its SUCCEEDED result,
whether adopted from the dead attempt's output or recomputed). Target: takeover <= TTL + 2 s.
The successor starts 2.5 s after its predecessor and waits on the lease. Each trial's kill
is drawn (seeded) from: a SIGKILL at a random moment 4-18 s in (before, during or after
Spark), or a SIGKILL at one of the operator's crash points (``after_intent``: intent recorded,
nothing submitted; ``after_spark``: Spark finished, result not written, the adopt path;
``after_result``: result written, lease not released), so every recovery path is exercised.

    .venv/bin/python benchmarks/chaos.py [--trials 12] [--seed 7] [--lease-ttl 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ATTEMPT = str(ROOT / "tests" / "chaos" / "attempt.py")
JOB = "chaos.submit.2013-01-01"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--lease-ttl", type=float, default=3.0)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from airflow_jrs.spark.commit import read_commit_marker
    from airflow_jrs.store import JobStatus, RedisJobResultStore
    from jrs_testbench.helpers import SparkLaunches, connection_env, spark_env
    from jrs_testbench.redis_server import EmbeddedRedis

    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="jrs-chaos-"))
    duplicates = lost = adopted = 0
    takeovers, to_result, launches_total = [], [], 0
    with EmbeddedRedis(work / "redis") as server:
        for trial in range(args.trials):
            ns = f"chaos-{trial}"
            spark = SparkLaunches(work / f"events-{trial}")
            env = {
                **os.environ,
                "AIRFLOW_HOME": str(work / "airflow"),
                **connection_env(server.url, ns, data_dir=work),
                **spark_env("local[1]"),
                "AIRFLOW__JRS__LEASE_TTL": str(args.lease_ttl),
                "JRS_TEST_SPARK_CONF": json.dumps(spark.conf({"spark.ui.enabled": "false"})),
            }
            store = RedisJobResultStore(server.url, ns)
            fence_key = store.keys.fence_counter
            mode = rng.choice(["random", "random", "after_intent", "after_spark", "after_result"])
            delay = rng.uniform(4.0, 18.0)
            first_env = {**env, "JRS_FAULT_KILL_AT": mode} if mode != "random" else env
            first = subprocess.Popen([sys.executable, ATTEMPT, "--app-sleep", "3"], env=first_env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
            # The successor is already waiting for the lease when its predecessor dies (a retry
            # or a zombie's replacement): takeover then measures the store, not Python start-up.
            time.sleep(2.5)
            second = subprocess.Popen(
                # the same job: same application arguments, hence the same fingerprint
                [sys.executable, ATTEMPT, "--app-sleep", "3", "--lease-wait", "120", "--try-number", "2"],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            )  # fmt: skip
            if mode == "random":
                time.sleep(delay - 2.5)
                fence_at_kill = int(store.client.get(fence_key) or 0)
                first.kill()
            else:  # the attempt kills itself at its crash point
                fence_at_kill = 1
            first.wait()
            killed_at = time.monotonic()
            takeover = result_at = None
            while second.poll() is None or result_at is None:
                now = time.monotonic() - killed_at
                if takeover is None and int(store.client.get(fence_key) or 0) > fence_at_kill:
                    takeover = now
                if result_at is None and store.get_entry(JOB) is not None:
                    result_at = now
                if second.poll() is not None:
                    break
                time.sleep(0.02)
            out = second.communicate()[0]
            entry = store.get_entry(JOB)
            if entry is None or entry.result.status is not JobStatus.SUCCEEDED:
                lost += 1
                print(f"trial {trial}: LOST RESULT\n{out[-2000:]}")
                continue
            if result_at is not None:
                to_result.append(result_at)  # 0 when the result was already written at the kill
            if takeover is not None:
                takeovers.append(takeover)
            if any(e.result.status is JobStatus.SUCCEEDED for e in store.get_history(JOB)):
                duplicates += 1
            if read_commit_marker(entry.result.outputs["output"]) is None:
                duplicates += 1  # the result names output that is not complete
            was_adopted = '"adopted_from"' in out
            adopted += was_adopted
            n = spark.count()
            launches_total += n
            shown = "-" if takeover is None else f"{takeover:.2f}s"
            note = "adopted" if was_adopted else ""
            when = f"kill at {delay:5.2f}s" if mode == "random" else f"crash at {mode}"
            print(f"trial {trial}: {when:<22} takeover {shown}  launches {n}  {note}", flush=True)
    print(f"\ntrials {args.trials}  duplicate publications {duplicates}  lost results {lost}")
    print(f"adopted a dead attempt's finished output (no re-run): {adopted}  Spark launches {launches_total}")
    if takeovers:
        print(f"takeover after kill: median {statistics.median(takeovers):.2f}s  max {max(takeovers):.2f}s"
              f"  (lease TTL {args.lease_ttl}s; target <= TTL + 2s)")  # fmt: skip
    if to_result:
        print(f"kill -> result: median {statistics.median(to_result):.2f}s")
    return 0 if duplicates == lost == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
