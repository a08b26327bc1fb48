"""The stand-in application of a fault trial: what spark-submit would run, in ~30 ms of Python.

    python -m jrs_testbench.trials.app --conf spark.jrs.job_id=J --conf spark.jrs.namespace=NS \
        --conf spark.jrs.fence=F --conf spark.jrs.output_dir=DIR --history H --lock L \
        --chunks N --rows R --pace LO,HI [--fail-at K] [--trial T]

Why a stand-in: the trials need thousands of launches that can be killed anywhere; a JVM per
launch would allow a few dozen. What it keeps of a real application is what the protocol
relies on:

* the job's ``spark.jrs.*`` marks on its command line (``--conf key=value``, as spark-submit
  carries them), so the product's local predecessor scan
  (:func:`airflow_jrs.protocol.processes.find_job_processes`) finds it;
* data first (``part-<i>.rows``, ``R`` lines each, at a random pace), then the commit marker
  LAST, in the format :func:`airflow_jrs.spark.commit.write_commit_marker` writes (job id, fence,
  application id, metrics with ``rows``), renamed into place so a reader never sees half of it;
* "two applications of one job at once" is detected here, inside the application, not keyed by
  fence: it holds a non-blocking ``flock`` on a per-job lock file while it computes; failing to
  get it appends an ``overlap`` event to the history log (the checker's first invariant).

Standard library only: it must start fast and import nothing of the product.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import random
import signal
import sys
import time

from jrs_testbench.trials.history import HistoryLog

MARKER_NAME = "_JRS_COMMIT.json"  # airflow_jrs.spark.commit.MARKER_NAME (not imported: stdlib only)
ROW_SUFFIX = ".rows"
#: exit codes: a planned failure ("Spark failed"), another application of the job computing, and
#: SIGTERM (after ``--term-linger``)
FAILED_ON_PURPOSE, OVERLAP, TERMINATED = 1, 3, 143


def _conf(pairs: list[str]) -> dict[str, str]:
    return dict(p.split("=", 1) for p in pairs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jrs_testbench.trials.app")
    parser.add_argument("--conf", action="append", default=[])
    parser.add_argument("--history", required=True)
    parser.add_argument("--lock", required=True)
    parser.add_argument("--chunks", type=int, default=3)
    parser.add_argument("--rows", type=int, default=5)
    parser.add_argument("--pace", default="0.01,0.05")
    parser.add_argument("--fail-at", type=int, default=-1, help="exit 1 before writing this chunk")
    parser.add_argument("--trial", type=int)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--term-linger", type=float, default=0.0,
                        help="compute on this many seconds after SIGTERM (spark-submit's shutdown hooks)")  # fmt: skip
    args = parser.parse_args(argv)
    conf = _conf(args.conf)
    job_id, out = conf["spark.jrs.job_id"], conf["spark.jrs.output_dir"]
    fence = int(conf["spark.jrs.fence"])
    log = HistoryLog(args.history, trial=args.trial, job=job_id)
    log.fence = fence
    lo, hi = (float(x) for x in args.pace.split(","))
    rng = random.Random(args.seed)
    lock = os.open(args.lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        log.log("overlap", host=os.environ.get("JRS_TRIAL_HOST"))
        return OVERLAP
    log.log("work_start", app_pid=os.getpid())
    stop_at: list[float] = []  # a SIGTERM's deadline: the lock is held until then, as a stopping driver holds its job
    if args.term_linger > 0:
        signal.signal(signal.SIGTERM, lambda _s, _f: stop_at.append(time.monotonic() + args.term_linger))
    os.makedirs(out, exist_ok=True)
    for i in range(args.chunks):
        time.sleep(rng.uniform(lo, hi))
        if stop_at and time.monotonic() >= stop_at[0]:
            log.log("app_terminated", chunk=i)
            return TERMINATED
        if i == args.fail_at:
            log.log("app_failed", chunk=i)
            return FAILED_ON_PURPOSE
        with open(os.path.join(out, f"part-{i:05d}{ROW_SUFFIX}"), "w") as fh:
            fh.writelines(f"{job_id},{fence},{i},{r}\n" for r in range(args.rows))
            fh.flush()
            os.fsync(fh.fileno())
    doc = {
        "v": 1,
        "application_id": f"local-{time.time_ns() // 1000}",
        "job_id": job_id,
        "fence": fence,
        "metrics": {"rows": args.chunks * args.rows, "chunks": args.chunks},
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
    }
    tmp = os.path.join(out, f".{MARKER_NAME}.tmp")
    with open(tmp, "w") as fh:
        json.dump(doc, fh, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.rename(tmp, os.path.join(out, MARKER_NAME))
    log.log("app_committed", rows=doc["metrics"]["rows"], staging=out)
    return 0  # the lock goes with the process


if __name__ == "__main__":
    sys.exit(main())
