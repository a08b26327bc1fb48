"""FLIP-45 stop versus cancel of a Structured Streaming application: time to exit, rows replayed.

Each trial starts the tests' streaming application (``tests/spark/apps/stream_app.py``: one
10-row CSV file per micro-batch, about 3 s per batch, Parquet file sink) under a real
``spark-submit --master local[1]``, waits until a batch is in flight after at least one
committed batch, then writes a ``stop`` or a ``cancel`` request (the same control file the
operator's ``on_kill`` and ``airflow-jrs stop|cancel`` write) and measures

* request -> application exit (wall time; the driver polls every 0.5 s),
* rows a resume replays: rows of batches whose offsets were logged but never committed when
  the application ended (read from the checkpoint's ``offsets/`` and ``commits/`` logs).

Trials alternate stop, cancel, stop, ... so machine noise hits both alike.

    .venv/bin/python benchmarks/stop_cancel.py [--trials 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from airflow_jrs.spark.control import CANCEL, STOP, batch_ids, write_request  # noqa: E402
from jrs_testbench.helpers import pyspark_env  # noqa: E402
from jrs_testbench.streams import drop_id_files  # noqa: E402

APP = ROOT / "tests" / "spark" / "apps" / "stream_app.py"
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"
ROWS = 10


def trial(kind: str, base: Path) -> tuple[float, int, int]:
    """One run: (seconds from request to exit, rows to replay, exit code)."""
    landing, checkpoint, control = base / "landing", base / "checkpoint", base / "control"
    drop_id_files(landing, range(8), ROWS)
    env = {k: v for k, v in os.environ.items() if k != "SPARK_HOME"} | pyspark_env()
    cmd = [str(SPARK_SUBMIT), "--master", "local[1]", "--conf", "spark.ui.enabled=false"]
    cmd += ["--conf", "spark.sql.shuffle.partitions=1", "--conf", "spark.jrs.fence=1"]
    cmd += [str(APP), "--input", str(landing), "--output", str(base / "output"), "--checkpoint", str(checkpoint)]
    cmd += ["--control", str(control), "--trigger", "1", "--row-sleep", "0.3"]
    with open(base / "app.log", "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 600
    while True:
        commits, offsets = batch_ids(str(checkpoint)), batch_ids(str(checkpoint), "offsets")
        if commits and len(offsets) > len(commits):
            break
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"no batch in flight; see {base / 'app.log'}")
        time.sleep(0.05)
    requested = time.monotonic()
    write_request(str(control), kind, 1, by="benchmark")
    code = proc.wait(timeout=600)
    took = time.monotonic() - requested
    pending = set(batch_ids(str(checkpoint), "offsets")) - set(batch_ids(str(checkpoint)))
    return took, len(pending) * ROWS, code


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=2, help="trials of each kind")
    args = parser.parse_args()
    results: dict[str, list[tuple[float, int, int]]] = {STOP: [], CANCEL: []}
    with tempfile.TemporaryDirectory(prefix="jrs-stop-cancel-") as tmp:
        for i in range(args.trials):
            for kind in (STOP, CANCEL):
                base = Path(tmp) / f"{kind}-{i}"
                base.mkdir()
                results[kind].append(trial(kind, base))
                took, replay, code = results[kind][-1]
                print(f"{kind:6} trial {i}: exit {code} after {took:.2f} s; rows to replay {replay}", flush=True)
    for kind, rows in results.items():
        times = [r[0] for r in rows]
        print(
            f"{kind:6}: request -> exit median {statistics.median(times):.2f} s (min {min(times):.2f}, "
            f"max {max(times):.2f}); rows replayed on resume: {[r[1] for r in rows]}; exit codes {[r[2] for r in rows]}"
        )


if __name__ == "__main__":
    main()
