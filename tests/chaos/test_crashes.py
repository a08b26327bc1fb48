"""Exactly once under crashes: kill real attempts (SIGKILL, SIGSTOP), restart Redis, race two attempts.

Every trial asserts the same invariants: the job ends with exactly one SUCCEEDED result, no
earlier SUCCEEDED publication exists in its history, the result names a staging folder whose
commit marker is there, no intent is left, and nothing stays locked. Spark launches are
counted from event logs. Random kill times use a fixed seed and a bounded number of trials.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_jrs.spark.commit import read_commit_marker
from airflow_jrs.store import JobStatus, RedisJobResultStore
from airflow_jrs.store.redis.intents import RedisIntentStore
from jrs_testbench.helpers import SparkLaunches, connection_env, spark_env, wait_until
from jrs_testbench.invariants import assert_clean_outputs_exist
from jrs_testbench.redis_server import EmbeddedRedis

pytestmark = [pytest.mark.chaos, pytest.mark.spark]

ATTEMPT = str(Path(__file__).parent / "attempt.py")
JOB = "chaos.submit.2013-01-01"
LEASE_TTL = 3.0
#: What the supervisor says when it stops spark-submit because the store did not answer in time.
SELF_FENCED = "the heartbeat could not be renewed in time (self-fencing before it expires)"


@pytest.fixture(scope="module")
def chaos_redis(tmp_path_factory):
    """A Redis of our own: one test restarts it."""
    with EmbeddedRedis(tmp_path_factory.mktemp("chaos-redis")) as server:
        yield server


class Chaos:
    def __init__(self, redis: EmbeddedRedis, namespace: str, tmp: Path) -> None:
        self.redis = redis
        self.namespace = namespace
        self.tmp = tmp
        self._started = 0
        self._logs: dict[int, Path] = {}
        self.spark = SparkLaunches(tmp / "events")
        conf = self.spark.conf({"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1"})
        self.env = {
            **os.environ,
            **connection_env(redis.url, namespace, data_dir=tmp),
            **spark_env("local[1]"),
            "AIRFLOW__JRS__LEASE_TTL": str(LEASE_TTL),
            "JRS_TEST_SPARK_CONF": json.dumps(conf),
        }
        self.env.pop("JRS_FAULT_KILL_AT", None)

    @property
    def store(self) -> RedisJobResultStore:
        return RedisJobResultStore(self.redis.url, self.namespace)

    def start(self, *args: str, fault: str | None = None, lease_ttl: float | None = None) -> subprocess.Popen[str]:
        """One attempt in its own process; its output goes to a file (a pipe nobody reads
        while we poll could fill up and stall the attempt before Spark starts)."""
        env = dict(self.env)
        if fault:
            env["JRS_FAULT_KILL_AT"] = fault
        if lease_ttl is not None:
            env["AIRFLOW__JRS__LEASE_TTL"] = str(lease_ttl)
        self._started += 1
        log = self.tmp / f"attempt-{self._started}.log"
        with open(log, "w") as out:
            proc = subprocess.Popen(
                [sys.executable, ATTEMPT, *args], env=env, stdout=out, stderr=subprocess.STDOUT, text=True
            )
        self._logs[proc.pid] = log
        return proc

    def finish(self, proc: subprocess.Popen[str], timeout: float = 240) -> str:
        proc.wait(timeout=timeout)
        return self._logs[proc.pid].read_text(errors="replace")

    def launches(self) -> int:
        return self.spark.count()

    def wait_for_spark(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while self.launches() == 0 or not self.store.client.exists(self.store.keys.intent(JOB)):
            assert time.monotonic() < deadline, "Spark never started"
            time.sleep(0.1)

    def wait_for_submission(self, timeout: float = 60) -> int:
        """The spark-submit pid the running attempt amended its intent with (a live SparkSubmit JVM)."""
        import psutil

        intents = RedisIntentStore(self.store.client, self.namespace, str(self.tmp / "specs"))
        deadline = time.monotonic() + timeout
        while (intent := intents.get(JOB)) is None or intent.submit_pid is None:
            assert time.monotonic() < deadline, f"the intent never named its spark-submit: {intent}"
            time.sleep(0.1)
        cmdline = " ".join(psutil.Process(intent.submit_pid).cmdline())
        assert "SparkSubmit" in cmdline or "spark-submit" in cmdline, cmdline[:300]
        return intent.submit_pid

    def commit_and_check_outputs(self) -> None:
        """Run the cleanup task (a process of its own) and check that what the committed entry
        names is there (jrs_testbench.invariants): every recovery scenario ends with it."""
        cleanup = self.start("--cleanup")
        out = self.finish(cleanup)
        assert cleanup.returncode == 0, out[-3000:]
        entry = self.store.get_entry(JOB)
        assert entry is not None and entry.is_clean
        assert len(assert_clean_outputs_exist(self.store)) == 1

    def assert_exactly_once(self) -> None:
        store = self.store
        entry = store.get_entry(JOB)
        assert entry is not None and entry.result.status is JobStatus.SUCCEEDED, "lost result"
        earlier = [e for e in store.get_history(JOB) if e.result.status is JobStatus.SUCCEEDED]
        assert earlier == [], "a second SUCCEEDED result was published"
        assert read_commit_marker(entry.result.outputs["output"]) is not None, "result names incomplete output"
        assert store.client.exists(store.keys.intent(JOB)) == 0, "intent left behind"
        # Gone at the latest one TTL (and a margin) from now: a released lease is gone already.
        wait_until(lambda: store.client.exists(store.keys.lease(JOB)) == 0, "the lease to go within its TTL",
                   timeout=LEASE_TTL + 0.5)  # fmt: skip


@pytest.fixture
def chaos(chaos_redis, namespace, tmp_path):
    harness = Chaos(chaos_redis, namespace, tmp_path)
    yield harness
    # never leave a Spark application of a test behind (some tests switch namespaces per trial)
    from airflow_jrs.protocol.processes import find_job_processes as find_spark_submit_processes

    for ns in {namespace, harness.namespace, *(f"{namespace}.{trial}" for trial in range(3))}:
        for proc in find_spark_submit_processes(ns, JOB):
            proc.kill()


@pytest.mark.parametrize(
    ("point", "recovery_launches"),
    [
        ("after_lease", 1),  # died before recording intent: the successor runs normally
        ("after_intent", 1),  # died before submitting: the successor resubmits
        ("after_spark", 0),  # Spark finished, result not written: adopt the output, no re-run
        ("after_result", 0),  # result written, lease not released: the successor skips
    ],
)
def test_attempt_killed_at_a_crash_point_is_recovered_exactly_once(chaos, point, recovery_launches):
    first = chaos.start(fault=point)
    out = chaos.finish(first)
    assert first.returncode == -signal.SIGKILL, out[-2000:]
    launched_before = chaos.launches()
    second = chaos.start("--lease-wait", str(LEASE_TTL * 4), "--try-number", "2")
    out = chaos.finish(second)
    assert second.returncode == 0, out[-3000:]
    assert chaos.launches() - launched_before == recovery_launches
    chaos.assert_exactly_once()
    if point == "after_spark":
        assert '"adopted_from"' in out
    chaos.commit_and_check_outputs()


def test_attempt_sigkilled_while_spark_runs_is_recovered_exactly_once(chaos):
    """SIGKILL the task process mid-Spark: its orphaned spark-submit either finishes (the successor
    waits for it and adopts its output) or dies; never two applications at once, one result."""
    first = chaos.start("--app-sleep", "6")
    chaos.wait_for_spark()
    submit_pid = chaos.wait_for_submission()  # the intent names the running spark-submit
    first.kill()
    first.wait()
    launched = chaos.launches()
    second = chaos.start("--lease-wait", str(LEASE_TTL * 4), "--try-number", "2")
    out = chaos.finish(second)
    assert second.returncode == 0, out[-3000:]
    assert f"spark-submit pid {submit_pid}" in out, out[-3000:]  # the successor names what it found
    assert chaos.launches() - launched in (0, 1)
    if chaos.launches() == launched:
        assert '"adopted_from"' in out, out[-3000:]
    chaos.assert_exactly_once()
    chaos.commit_and_check_outputs()


def test_cleanup_after_adopting_a_sigkilled_attempts_output_keeps_that_output(chaos):
    """Issue 18, defect 1: SIGKILL the task while its application runs; the retry waits for the
    orphaned application, adopts its finished output (result under the retry's fence, outputs in
    the killed attempt's staging folder), and the cleanup commits it. The committed entry's
    outputs must still hold the data: the cleanup keeps what the result points to."""
    first = chaos.start("--app-sleep", "6")
    chaos.wait_for_spark()
    chaos.wait_for_submission()
    first.kill()
    first.wait()
    # the same arguments (so the same fingerprint): only then is the orphan's output the retry's
    second = chaos.start("--app-sleep", "6", "--lease-wait", str(LEASE_TTL * 4), "--try-number", "2")
    out = chaos.finish(second)
    assert second.returncode == 0, out[-3000:]
    assert '"adopted_from"' in out, "the retry did not adopt the orphan's output:\n" + out[-3000:]
    assert chaos.launches() == 1
    chaos.commit_and_check_outputs()
    chaos.assert_exactly_once()


def test_cleanup_sigkilled_before_commit_only_cleans_up_again(chaos):
    """Dirty means cleanup only: a cleanup killed before marking clean is simply run again,
    and neither it nor a later attempt of the job starts Spark."""
    first = chaos.start()
    out = chaos.finish(first)
    assert first.returncode == 0, out[-3000:]
    assert chaos.launches() == 1
    killed = chaos.start("--cleanup", fault="cleanup_before_clean")
    chaos.finish(killed)
    assert killed.returncode == -signal.SIGKILL
    entry = chaos.store.get_entry(JOB)
    assert entry is not None and entry.is_dirty
    again = chaos.start("--cleanup", "--try-number", "2")
    out = chaos.finish(again)
    assert again.returncode == 0, out[-3000:]
    assert chaos.store.get_entry(JOB).is_clean
    later = chaos.start("--run-id", "backfill__2013-01-01")
    out = chaos.finish(later)
    assert later.returncode == 0 and '"skipped": true' in out, out[-3000:]
    assert chaos.launches() == 1
    chaos.assert_exactly_once()


def test_sigkill_at_random_moments_never_duplicates_or_loses_the_result(chaos):
    rng = random.Random(20131)
    for trial in range(3):
        chaos.namespace = f"{chaos.namespace.split('.')[0]}.{trial}"
        chaos.env.update(connection_env(chaos.redis.url, chaos.namespace))
        first = chaos.start("--app-sleep", "3")
        time.sleep(rng.uniform(1.0, 16.0))
        first.kill()
        first.wait()
        second = chaos.start("--lease-wait", str(LEASE_TTL * 4), "--try-number", "2")
        out = chaos.finish(second)
        if second.returncode != 0 and SELF_FENCED in out:
            # No beat landed in time under a gate's load (3 Dec 2026; until beat_pause, a wake a
            # tenth of a second late did it; a stalled Redis still can) and the supervisor
            # stopped spark-submit before its heartbeat expired: fail closed, as it must.
            # Airflow retries such a try; so does the trial, and the invariants below still
            # hold over every try.
            print(f"trial {trial}: try 2 self-fenced (no beat landed in time); try 3 follows", file=sys.stderr)
            second = chaos.start("--lease-wait", str(LEASE_TTL * 4), "--try-number", "3")
            out = chaos.finish(second)
        assert second.returncode == 0, out[-3000:]
        chaos.assert_exactly_once()


def test_paused_holder_past_its_ttl_writes_nothing(chaos):
    """SIGSTOP the holder past the lease TTL; a successor takes over; the woken holder is fenced out."""
    first = chaos.start("--app-sleep", "6")
    chaos.wait_for_spark()
    first.send_signal(signal.SIGSTOP)
    try:
        time.sleep(LEASE_TTL + 1.0)
        second = chaos.start("--lease-wait", "5", "--try-number", "2")
        time.sleep(6)
    finally:
        first.send_signal(signal.SIGCONT)
    out_first = chaos.finish(first)
    out_second = chaos.finish(second)
    assert second.returncode == 0, out_second[-3000:]
    assert first.returncode != 0, "the fenced-out holder reported success:\n" + out_first[-3000:]
    assert "LeaseLost" in out_first or "JobKilled" in out_first, out_first[-3000:]
    entry = chaos.store.get_entry(JOB)
    assert entry.result.fence == 2, "the result was not written by the successor's fence"
    chaos.assert_exactly_once()


def test_two_attempts_started_together_run_spark_once(chaos):
    a = chaos.start("--lease-wait", "120", "--run-id", "scheduled__2013-01-01")
    b = chaos.start("--lease-wait", "120", "--run-id", "backfill__2013-01-01")
    out_a, out_b = chaos.finish(a), chaos.finish(b)
    assert a.returncode == 0 and b.returncode == 0, out_a[-2000:] + out_b[-2000:]
    assert chaos.launches() == 1
    results = [json.loads(line[7:]) for line in (out_a + out_b).splitlines() if line.startswith("RESULT ")]
    assert sorted(r["skipped"] for r in results) == [False, True]
    chaos.assert_exactly_once()


def test_redis_restart_while_spark_runs_keeps_one_result(chaos):
    # A long TTL: this test is about Redis going away and coming back, not about expiry, and a
    # slow restart on a loaded machine must not cost the lease.
    first = chaos.start("--app-sleep", "5", lease_ttl=15)
    chaos.wait_for_spark()
    chaos.redis.restart()  # append-only: the lease, fence and intent survive
    out = chaos.finish(first)
    assert first.returncode == 0, out[-3000:]
    assert chaos.launches() == 1
    chaos.redis.restart()
    chaos.assert_exactly_once()
