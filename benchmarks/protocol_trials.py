"""Protocol trials: thousands of faulty trials of the coordination protocol, without Spark.

Each trial is one job attacked by 2-3 attempts that follow the operator's protocol on the real
store, lease and intent, with a small process in place of spark-submit (``jrs_testbench.trials``).
Attempts are SIGKILLed (with or without their stand-in), SIGSTOPped past the lease TTL, paused
right after recording their intent or right before writing their result until their lease is gone,
started at the same instant, and Redis is restarted or crashed underneath them. Afterwards the
checker reads the history log and the store. Prints trials, faults per kind, violations per kind
(0 expected with ``--launch-guard``; see below), takeover times and wall/CPU time.

``--launch-guard`` models the fix of the operator's launch window (a lost lease noticed between
the last ``_killed`` check and ``Popen`` stops nothing; see ``Protocol`` in
``jrs_testbench.trials.attempt``); without it the attempts behave as the operator does today.

    .venv/bin/python benchmarks/protocol_trials.py --trials 10000 --seed 1 --concurrency 16 --launch-guard
    .venv/bin/python benchmarks/protocol_trials.py --trials 300                # the operator as written
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=16, help="trials (jobs) in flight at once")
    parser.add_argument("--launch-guard", action="store_true", help="model the fix of the launch window")
    parser.add_argument("--unfenced", action="store_true", help="remove the fence check from the result script")
    parser.add_argument("--no-redis-faults", action="store_true")
    parser.add_argument("--time-budget", type=float, default=None, help="stop starting trials after S seconds")
    parser.add_argument("--workdir", default=None, help="keep the history log and outputs here")
    parser.add_argument("--json", action="store_true", help="print the report as JSON too")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from jrs_testbench.redis_server import EmbeddedRedis
    from jrs_testbench.trials import Protocol, RunConfig, check_run, run_trials

    keep = args.workdir is not None
    work = Path(args.workdir) if keep else Path(tempfile.mkdtemp(prefix="jrs-trials-"))
    work.mkdir(parents=True, exist_ok=True)
    protocol = Protocol(launch_guard=args.launch_guard, fenced_result=not args.unfenced)
    config = RunConfig(
        trials=args.trials,
        seed=args.seed,
        workdir=work,
        concurrency=args.concurrency,
        protocol=protocol,
        redis_faults=not args.no_redis_faults,
        time_budget=args.time_budget,
    )
    try:
        with EmbeddedRedis(work / "redis") as server:
            outcome = run_trials(config, server)
            started = time.monotonic()
            report = check_run(
                outcome.bench.log_path,
                server.url,
                outcome.bench.namespace,
                outcome.bench.spec_root,
                lease_ttl=protocol.lease_ttl,
            )
            check_wall = time.monotonic() - started
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        summary = report.summary()
        print(f"protocol trials: {platform.python_version()}, {platform.machine()}, seed {args.seed}")
        print(
            f"protocol: {'guarded launch' if protocol.launch_guard else 'operator as written'}, "
            f"{'fenced' if protocol.fenced_result else 'UNFENCED'} result write, lease TTL {protocol.lease_ttl:g} s"
        )
        print(f"trials: {report.trials} run, {report.completed} with a result, {len(report.incomplete)} incomplete")
        print("faults injected:")
        for kind, count in summary["faults"].items():
            print(f"  {kind:22s} {count}")
        print(f"violations: {len(report.violations)}")
        for kind, count in sorted(summary["violations"].items()):
            print(f"  {kind:22s} {count}")
        for v in report.violations[:5]:
            print(f"    e.g. {v.job}: {v.kind}: {v.detail}")
        print("observed paths:", ", ".join(f"{k} {v}" for k, v in summary["observations"].items()))
        for name in ("takeover_lease_s", "takeover_waiting_s", "takeover_result_s"):
            s = summary[name]
            if s["n"]:
                print(f"{name}: n={s['n']} median {s['median']} s, p95 {s['p95']} s, max {s['max']} s")
        print(
            f"wall: {outcome.wall:.0f} s for the trials ({args.concurrency} at once), {check_wall:.1f} s to check; "
            f"CPU of all processes {children.ru_utime + children.ru_stime:.0f} s"
        )
        if args.json:
            print(json.dumps({**summary, "wall_s": round(outcome.wall, 1)}, indent=1))
        if report.incomplete:
            print("incomplete:", ", ".join(report.incomplete[:10]))
        return 1 if report.violations else 0
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
