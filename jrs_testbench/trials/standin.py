"""A stand-in for spark-submit: writes output chunk by chunk, then the commit marker, and
proves (with a lock the kernel enforces) that no second copy of its job computes at once.

Run as ``python -I -S standin.py --conf spark.jrs.job_id=<job> --conf spark.jrs.namespace=<ns> ...``
(standard library only, so it starts in ~20 ms). The ``--conf`` pairs are exactly what the
operator puts on a real spark-submit command line, so a successor finds a stand-in the way the
operator finds spark-submit: by scanning process command lines.

Why a kernel lock: log timestamps can only bound when a process computed, while ``flock`` is
ground truth. Every stand-in of a job takes an exclusive non-blocking ``flock`` on the job's
``work.lock`` before it computes. The kernel drops the lock when the holder dies (files are
closed before a process becomes a zombie), so failing to get it means another copy is alive
and computing *right now*: that is logged as an ``overlap`` (then the stand-in computes anyway,
as a real second copy would).

The marker has the format and name of :mod:`airflow_jrs.spark.commit` and is written the way
Spark's ``fs.create`` writes it: in place, not atomically, so a kill can leave it half-written.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from datetime import UTC, datetime

MARKER_NAME = "_JRS_COMMIT.json"  # airflow_jrs.spark.commit.MARKER_NAME (a test pins the equality)


def command(
    *,
    python: str,
    job_id: str,
    namespace: str,
    fence: int,
    staging: str,
    lock: str,
    log: str,
    trial: int,
    startup: float,
    chunks: int,
    delay: float,
    fail: bool = False,
) -> list[str]:
    """The stand-in's command line; carries the operator's ``--conf spark.jrs.*`` markers."""
    cmd = [
        python, "-I", "-S", os.path.abspath(__file__),
        "--conf", f"spark.jrs.job_id={job_id}",
        "--conf", f"spark.jrs.namespace={namespace}",
        "--conf", f"spark.jrs.fence={fence}",
        "--conf", f"spark.jrs.output_dir={staging}",
        "--lock", lock, "--log", log, "--trial", str(trial),
        "--startup", repr(startup), "--chunks", str(chunks), "--delay", repr(delay),
    ]  # fmt: skip
    if fail:
        cmd.append("--fail")
    return cmd


def _parse(argv: list[str]) -> dict[str, str]:
    opts: dict[str, str] = {}
    i = 0
    while i < len(argv):
        key = argv[i]
        if key == "--fail":
            opts["fail"] = "1"
            i += 1
        elif key == "--conf":
            name, _, value = argv[i + 1].partition("=")
            opts[name] = value
            i += 2
        else:
            opts[key.lstrip("-")] = argv[i + 1]
            i += 2
    return opts


def main(argv: list[str]) -> int:
    opts = _parse(argv)
    job_id, fence = opts["spark.jrs.job_id"], int(opts["spark.jrs.fence"])
    staging = opts["spark.jrs.output_dir"]
    log_fd = os.open(opts["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    base = {"pid": os.getpid(), "trial": int(opts["trial"]), "job": job_id, "fence": fence, "role": "standin"}

    def log(event: str, **fields: object) -> None:
        record = {"t": time.monotonic_ns(), "event": event, **base, **fields}
        os.write(log_fd, (json.dumps(record, separators=(",", ":")) + "\n").encode())

    time.sleep(float(opts["startup"]))  # spark-submit starts a JVM before the application runs
    os.makedirs(staging, exist_ok=True)
    lock_fd = os.open(opts["lock"], os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        overlap = False
    except BlockingIOError:
        overlap = True
        log("overlap")
    log("work_start", overlap=overlap)
    chunks, delay = int(opts["chunks"]), float(opts["delay"])
    written = 0
    for i in range(chunks):
        payload = (f"{job_id} chunk {i}\n" * 4).encode()
        with open(os.path.join(staging, f"part-{i:05d}"), "wb") as fh:
            fh.write(payload)
        written += len(payload)
        log("chunk", index=i)
        time.sleep(delay)
    if "fail" in opts:  # an injected fault: Spark failed; logged as one so it is counted
        log("fault", kind="standin_failure")
        log("work_end", ok=False)
        return 1
    marker = {
        "v": 1,
        "application_id": f"standin-{os.getpid()}",
        "job_id": job_id,
        "fence": fence,
        "metrics": {"chunks": chunks, "bytes": written},
        "written_at": datetime.now(UTC).isoformat(),
    }
    with open(os.path.join(staging, MARKER_NAME), "wb") as fh:
        fh.write(json.dumps(marker, sort_keys=True).encode())
    log("marker_written")
    log("work_end", ok=True)
    return 0  # the lock goes with the process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
