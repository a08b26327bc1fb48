"""Stop and cancel (FLIP-45) of a Structured Streaming application under real spark-submit.

The application (``apps/stream_app.py``) reads one landing file per micro-batch and appends it
to a Parquet file sink; :func:`airflow_jrs.spark.streaming_job` honours the control requests.
Exactly once is checked on what the sink committed (its ``_spark_metadata`` log), batch ids on
the checkpoint's ``commits/`` log. No wall-clock thresholds: every wait has a deadline.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from airflow_jrs.spark.control import CANCEL, CANCEL_EXIT_CODE, STOP, batch_ids, read_outcome, write_request
from jrs_testbench.helpers import pyspark_env
from jrs_testbench.streams import committed_rows, drop_id_files

pytestmark = pytest.mark.spark

APP = Path(__file__).parent / "apps" / "stream_app.py"
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"
FENCE = 7
ROWS = 10


class Stream:
    def __init__(self, base: Path) -> None:
        self.landing = base / "landing"
        self.output = base / "stream" / "output"
        self.checkpoint = base / "stream" / "checkpoint"
        self.control = base / "stream" / "control"
        self.logs = base / "logs"
        self.logs.mkdir(parents=True)
        self.landing.mkdir()

    def start(self, fence: int, *extra: str) -> tuple[subprocess.Popen[str], Path]:
        env = {k: v for k, v in os.environ.items() if k != "SPARK_HOME"} | pyspark_env()
        conf = {
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "1",
            "spark.jrs.job_id": "stream.test",
            "spark.jrs.fence": str(fence),
        }
        cmd = [str(SPARK_SUBMIT), "--master", "local[1]"]
        for key, value in conf.items():
            cmd += ["--conf", f"{key}={value}"]
        cmd += [str(APP), "--input", str(self.landing), "--output", str(self.output)]
        cmd += ["--checkpoint", str(self.checkpoint), "--control", str(self.control), *extra]
        log = self.logs / f"fence-{fence}.log"
        with open(log, "w") as sink:
            proc = subprocess.Popen(cmd, env=env, stdout=sink, stderr=subprocess.STDOUT, text=True)
        return proc, log

    def commits(self) -> list[int]:
        return batch_ids(str(self.checkpoint), "commits")

    def offsets(self) -> list[int]:
        return batch_ids(str(self.checkpoint), "offsets")


def wait_until(condition, proc: subprocess.Popen[str], log: Path, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"application exited ({proc.returncode}) before {what}:\n{log.read_text()[-4000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"timed out waiting for {what}:\n{log.read_text()[-4000:]}")
        time.sleep(0.1)


def finish(proc: subprocess.Popen[str], log: Path, timeout: float = 300) -> int:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"application did not exit:\n{log.read_text()[-4000:]}")


@pytest.fixture
def stream(tmp_path: Path) -> Stream:
    if not SPARK_SUBMIT.exists():
        pytest.skip(f"no spark-submit next to {sys.executable}")
    return Stream(tmp_path)


def test_stop_waits_for_the_batch_boundary_and_the_resume_continues_exactly_once(stream):
    drop_id_files(stream.landing, range(6), ROWS)
    # Each batch takes about 3 s (10 rows x 0.3 s): the stop arrives while one is in flight.
    proc, log = stream.start(FENCE, "--trigger", "1", "--row-sleep", "0.3")
    wait_until(
        lambda: len(stream.commits()) >= 1 and len(stream.offsets()) > len(stream.commits()),
        proc, log, "a batch in flight after a committed one",
    )  # fmt: skip
    in_flight = stream.offsets()[-1]
    write_request(str(stream.control), STOP, FENCE, by="test")
    assert finish(proc, log) == 0, log.read_text()[-4000:]
    outcome = read_outcome(str(stream.control), FENCE)
    assert outcome is not None and outcome["ended"] == "stopped", log.read_text()[-3000:]
    # Nothing was interrupted: every batch with logged offsets has its commits/N file.
    assert stream.offsets() == stream.commits(), "a batch was in flight when the query stopped"
    stopped_at = stream.commits()[-1]
    assert in_flight in stream.commits(), "the batch in flight was interrupted instead of committed"
    # It stopped at the next boundary (the driver polls every 0.5 s: the batch after the one seen
    # in flight may have begun first), not once the landed data ran out.
    assert stopped_at in (in_flight, in_flight + 1) and stopped_at < 5, (in_flight, stopped_at)
    assert outcome["last_batch_id"] == stopped_at and outcome["boundary"] is True
    before = Counter(committed_rows(stream.output))
    assert all(n == 1 for n in before.values())

    # Resume (a new attempt, a new fence; the old stop request does not apply to it).
    drop_id_files(stream.landing, range(6, 8), ROWS)
    proc, log = stream.start(FENCE + 1, "--available-now")
    assert finish(proc, log) == 0, log.read_text()[-4000:]
    assert read_outcome(str(stream.control), FENCE + 1)["ended"] == "finished"
    commits = stream.commits()
    assert commits == list(range(len(commits))), "batch ids did not continue"
    assert commits[0] == 0 and commits[-1] > stopped_at
    rows = Counter(committed_rows(stream.output))
    assert sorted(rows) == list(range(8 * ROWS)), "a row is missing"
    assert set(rows.values()) == {1}, "a row was written twice"


def test_cancel_during_a_stuck_stop_exits_at_once_and_the_resume_replays_at_most_that_batch(stream):
    drop_id_files(stream.landing, range(3), ROWS)
    # Batches 0-2 are quick; batch 3 (10 rows x 30 s) is slow enough that a stop would wait for it.
    proc, log = stream.start(FENCE, "--trigger", "1", "--row-sleep", "30", "--slow-from-part", "3")
    wait_until(lambda: len(stream.commits()) == 3, proc, log, "three committed batches", timeout=180)
    drop_id_files(stream.landing, [3], ROWS)  # lands after the others: the file source takes it next
    wait_until(lambda: len(stream.offsets()) == 4, proc, log, "batch 3 in flight", timeout=120)
    in_flight = stream.offsets()[-1]
    write_request(str(stream.control), STOP, FENCE, by="test")
    time.sleep(2)  # let the driver see the stop and start waiting for the boundary
    assert proc.poll() is None, "the stop did not wait for the batch in flight"
    write_request(str(stream.control), CANCEL, FENCE, by="test")
    assert finish(proc, log, timeout=120) == CANCEL_EXIT_CODE, log.read_text()[-4000:]
    assert stream.commits() == [0, 1, 2] and in_flight == 3, "the canceled batch committed"
    assert read_outcome(str(stream.control), FENCE) is None
    assert sorted(committed_rows(stream.output)) == list(range(3 * ROWS))
    logged = (stream.checkpoint / "offsets" / "3").read_text()

    drop_id_files(stream.landing, range(4, 5), ROWS)
    proc, log = stream.start(FENCE + 1, "--available-now")
    assert finish(proc, log) == 0, log.read_text()[-4000:]
    commits = stream.commits()
    assert commits == list(range(len(commits))) and in_flight in commits
    # The replay is batch 3 exactly as logged before the cancel (same offsets: the same file);
    # batches 0-2 were not redone (their rows appear once below).
    assert (stream.checkpoint / "offsets" / "3").read_text() == logged
    rows = Counter(committed_rows(stream.output))
    assert sorted(rows) == list(range(5 * ROWS)), "a row is missing"
    assert set(rows.values()) == {1}, "a row was written twice"


def test_flights_example_counts_every_landed_flight_once_per_hour_and_carrier(stream):
    import importlib.util

    import pandas as pd

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("jrs_flights_hours", root / "dags/flights/hours.py")
    data_spec = importlib.util.spec_from_file_location("jrs_flights_data", root / "dags/flights/data.py")
    assert spec and spec.loader and data_spec and data_spec.loader
    hours, data = importlib.util.module_from_spec(spec), importlib.util.module_from_spec(data_spec)
    spec.loader.exec_module(hours)
    data_spec.loader.exec_module(data)
    flights_csv = data.ensure_landing(stream.logs.parent / "flights-landing") / "flights.csv"
    by_hour = hours.flights_by_hour(flights_csv)
    for hour in (5, 6, 7):
        hours.drop_hour(stream.landing, hour, by_hour[hour])
    env = {k: v for k, v in os.environ.items() if k != "SPARK_HOME"} | pyspark_env()
    cmd = [str(SPARK_SUBMIT), "--master", "local[1]", "--conf", "spark.ui.enabled=false"]
    cmd += ["--conf", "spark.sql.shuffle.partitions=1", "--conf", f"spark.jrs.output_dir={stream.output}"]
    cmd += [
        "--conf",
        f"spark.jrs.checkpoint_dir={stream.checkpoint}",
        "--conf",
        f"spark.jrs.control_dir={stream.control}",
    ]
    app = root / "dags/flights/apps/carrier_delays_stream.py"
    proc = subprocess.run([*cmd, str(app), "--landing", str(stream.landing), "--available-now"],
                          env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert stream.commits() == [0, 1, 2]
    got = pd.read_parquet(stream.output / "batches")
    counted = got.groupby(["hour", "carrier"])["flights"].sum().to_dict()
    expected = pd.DataFrame([r for h in (5, 6, 7) for r in by_hour[h]], columns=hours.COLUMNS)
    expected["hour"] = expected["hour"].astype(int)
    assert counted == expected.groupby(["hour", "carrier"]).size().to_dict()
