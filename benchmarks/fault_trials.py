"""Fault trials: the product's own protocol code in real processes, under real faults.

Each trial is one job run as Airflow would run it: tries of ``airflow_jrs.protocol.JobAttempt``
with a stand-in application under the real supervisor, zombies, 1-3 hosts (each with its own
proxy to Redis), recompute and stop/cancel requests, then the real cleanup (``commit_job``)
until it commits; faults per try (SIGKILL of the task, the supervisor or the application at a
random moment, SIGKILL at every named crash point, on_kill, SIGSTOP past the lease TTL, a pause
right before the result write, a failing application) and per run (Redis restart and crash,
failover to a replica that lost the last acknowledged writes, partitions of one host, clock
steps on the Redis host). The checker reads the history recorded outside the product, the
store and the folders after every trial (``jrs_testbench.trials``). Prints trials, violations
(and what a failover excused), the fault mix with per-fault counts, takeover time (fault on a
holder -> next lease holder) median and p95, wall and CPU.

    nice -n 10 .venv/bin/python benchmarks/fault_trials.py --trials 10000 --seed 1 --concurrency 6
    .venv/bin/python benchmarks/fault_trials.py --trials 50 --faults pause_before_write --break unfenced_result
    .venv/bin/python benchmarks/fault_trials.py --trials 60 --launcher connect --concurrency 3
    .venv/bin/python benchmarks/fault_trials.py --trials 200 --result-documents
    .venv/bin/python benchmarks/fault_trials.py --trials 4 --shape documents_unmounted --result-documents --revert 11

``--launcher connect``: the tries run through the product's ConnectLauncher against one Spark
Connect server started for the run (``jrs_testbench.trials.connect_launcher``); the faults that
need spark-submit's supervisor and application process (kill_supervisor, kill_app) are not drawn.
``--result-documents``: ``[jrs] result_documents`` on (the compact clean entry): the cleanups write
result documents to a folder of the run and commit ~40-B references, and the checker reads each
clean reference's document (a missing one is ``clean_document_missing``). ``--shape``: every
trial has one fixed shape (``jrs_testbench.trials.faults.SHAPES``, what the reverted-fix cases
of tests/chaos/test_reverted_fixes.py run) instead of a drawn plan.

Exit status 1 when a violation was found.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import shutil
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=6, help="trials (jobs) in flight at once")
    parser.add_argument("--faults", default="", help="comma-separated fault names to keep (default: all)")
    parser.add_argument("--lease-ttl", type=float, default=2.0)
    parser.add_argument("--first-trial", type=int, default=0, help="number of the first trial (resume a run)")
    parser.add_argument("--revert", default="", help="JRS_TRIALS_REVERT: a fix patched back out (trials/reverts.py)")
    parser.add_argument("--break", dest="broken", default="", help="JRS_TRIALS_BREAK: unfenced_result")
    parser.add_argument("--time-budget", type=float, default=None, help="start no trial after S seconds")
    parser.add_argument("--workdir", default=None, help="keep histories and outputs here")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON too")
    parser.add_argument(
        "--result-documents",
        action="store_true",
        help="[jrs] result_documents on: cleanups commit references, full results in documents",
    )
    parser.add_argument("--shape", default=None, help="every trial has this fixed shape (faults.SHAPES)")
    parser.add_argument("--launcher", choices=("standin", "connect"), default="standin",
                        help="standin: the real supervisor and a stand-in application; connect: the product's "
                             "ConnectLauncher on one Spark Connect server started for the run")  # fmt: skip
    parser.add_argument("--topology", choices=("front", "sentinel", "cluster"), default="front",
                        help="front: a primary, a replica and one proxy per host (a virtual IP); sentinel: a real "
                             "Sentinel group (1 primary, 2 replicas, 3 sentinels) the hosts follow themselves, "
                             "every run fault a real failover (kill, pause, SENTINEL FAILOVER); cluster: a real "
                             "3+3 Redis Cluster whose namespace's primary is killed or paused")  # fmt: skip
    parser.add_argument("--durability", default="none", help="[jrs] durability of every try and cleanup")
    parser.add_argument("--cut", action="store_true",
                        help="sentinel: every server behind its own TCP proxy; some failovers cut the primary off "
                             "(its proxy blackholes every connection) while it runs on")  # fmt: skip
    parser.add_argument("--run-fault-every", default=None, help="MIN,MAX seconds between two run faults")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from jrs_testbench.trials.faults import FaultMix
    from jrs_testbench.trials.runner import RunConfig, run_trials

    mix = FaultMix().only(set(args.faults.split(","))) if args.faults else FaultMix()
    if args.shape:  # a fixed plan: no drawn run faults either (a shape asks for the ones it needs)
        mix = dataclasses.replace(mix, shape=args.shape, run_weights={})
    if args.run_fault_every:
        low, high = (float(x) for x in args.run_fault_every.split(","))
        mix = dataclasses.replace(mix, run_fault_every=(low, high))
    env = {k: v for k, v in (("JRS_TRIALS_REVERT", args.revert), ("JRS_TRIALS_BREAK", args.broken)) if v}
    keep = args.workdir is not None
    work = Path(args.workdir) if keep else Path(tempfile.mkdtemp(prefix="jrs-fault-trials-"))
    started = datetime.now(UTC)
    try:
        outcome = run_trials(
            RunConfig(
                trials=args.trials,
                seed=args.seed,
                workdir=work,
                concurrency=args.concurrency,
                mix=mix,
                lease_ttl=args.lease_ttl,
                first_trial=args.first_trial,
                env=env,
                time_budget=args.time_budget,
                launcher=args.launcher,
                result_documents=args.result_documents,
                topology=args.topology,
                durability=args.durability,
                cut_primary=args.cut,
            )
        )
        s = outcome.summary()
        where = (f", env {env}" if env else "") + (", result_documents on" if args.result_documents else "")
        where += f", shape {args.shape}" if args.shape else ""
        where += f", {args.topology}, durability {args.durability}" if args.topology != "front" else ""
        where += ", primaries cut off by proxy too" if args.cut else ""
        print(f"fault trials: {started:%Y-%m-%d %H:%M} UTC, Python {platform.python_version()}, seed {args.seed}, "
              f"lease TTL {args.lease_ttl:g} s, {args.concurrency} at once, {args.launcher}{where}")  # fmt: skip
        print(f"trials: {s['trials']} of {args.trials} (from trial {args.first_trial})")
        print(f"final entries: {s['outcomes']}; driver: {s['status']}")
        print(f"violations: {len(outcome.violations)} {s['violations']}")
        for v in outcome.violations[:8]:
            print(f"    e.g. trial {v.trial} ({v.job}): {v.kind}: {v.detail[:300]}")
        print(f"excused (a failover lost acknowledged writes): {len(outcome.excused)} {s['excused']}")
        print("fault mix:")
        for kind, count in s["fault_mix"].items():
            print(f"  {kind:34s} {count}")
        print(f"task errors: {s['task_errors']}")
        t = s["takeover_ms"]
        if t["samples"]:
            print(f"takeover (fault on a holder -> next lease holder): median {t['median']:.0f} ms, "
                  f"p95 {t['p95']:.0f} ms, {t['samples']} takeovers")  # fmt: skip
        u = s["unavailable_s"]
        if u["samples"]:
            print(f"failovers {s['failovers_by_how']}: unavailable (primary lost -> first write the new one "
                  f"acknowledged) median {u['median']:.2f} s, p95 {u['p95']:.2f} s over {u['samples']}")  # fmt: skip
        print(f"wall {s['wall_s']} s, CPU {s['cpu_s']} s (all processes)")
        for note in s["notes"]:
            print(f"note: {note}")
        if args.json:
            print(json.dumps(s, indent=1, default=str))
        return 1 if outcome.violations else 0
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
