"""No orphan runs beside its successor when the predecessor ran on *another* host.

Each attempt runs in its own UTS and PID namespaces (``unshare --uts --pid --fork
--mount-proc``) with a hostname of its own: the two "hosts" share the filesystem, the network
and the store, as two Airflow workers do, but neither can see the other's processes. Attempt
A's task process is SIGKILLed while its Spark application computes; attempt B, retried as
Airflow would, runs on the other "host". The application holds an exclusive ``flock`` on a
shared file while it computes and records any moment it could not: the two copies' work must
never overlap, and the job must end with exactly one SUCCEEDED result.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from airflow_jrs.store import JobStatus, RedisJobResultStore
from airflow_jrs.store.redis.heartbeats import RedisHeartbeats
from jrs_testbench.helpers import ROOT, SparkLaunches, connection_env, spark_env
from jrs_testbench.redis_server import EmbeddedRedis

pytestmark = [pytest.mark.chaos, pytest.mark.spark, pytest.mark.cluster]

ATTEMPT = str(ROOT / "tests" / "chaos" / "attempt.py")
FLOCK_APP = str(ROOT / "tests" / "spark" / "apps" / "flock_app.py")
JOB = "chaos.submit.2013-01-01"

if shutil.which("unshare") is None or os.geteuid() != 0:
    pytest.skip("needs root and unshare(1) to give attempts hosts of their own", allow_module_level=True)


@pytest.fixture(scope="module")
def host_redis(tmp_path_factory):
    with EmbeddedRedis(tmp_path_factory.mktemp("other-host-redis")) as server:
        yield server


class Hosts:
    """Attempts of the chaos job, each on a "host" of its own."""

    def __init__(self, redis: EmbeddedRedis, namespace: str, tmp: Path) -> None:
        self.tmp = tmp
        self.store = RedisJobResultStore(redis.url, namespace)
        self.spark = SparkLaunches(tmp / "events")
        conf = self.spark.conf(
            {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1", "spark.driver.host": "127.0.0.1"}
        )
        self.env = {
            **os.environ,
            **connection_env(redis.url, namespace, data_dir=tmp),
            **spark_env("local[1]"),
            "AIRFLOW__JRS__LEASE_TTL": "3",
            "JRS_TEST_SPARK_CONF": json.dumps(conf),
            # A hostname of its own that no resolver knows: Spark must not try to resolve it.
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_HOSTNAME": "localhost",
        }
        self.lock = tmp / "work.lock"
        self.overlaps = tmp / "overlaps.txt"
        self.hosts: list[subprocess.Popen[bytes]] = []

    def attempt(self, host: str, try_number: int, predecessor: str, *, commit: bool, sleep: float) -> Path:
        """Start one attempt on ``host``; returns its log. The namespace's PID 1 is a shell that
        stays, so killing the task process leaves its supervisor and spark-submit running."""
        log = self.tmp / f"{host}.log"
        app_args = ["--lock", str(self.lock), "--overlaps", str(self.overlaps), *(["--commit"] if commit else [])]
        cmd = [
            sys.executable, ATTEMPT, "--app", FLOCK_APP, "--app-args", json.dumps(app_args),
            "--app-sleep", "0", "--try-number", str(try_number), "--predecessor", predecessor,
            "--lease-wait", "30",  # a retry waits out the dead attempt's lease (Airflow's retry_delay)
        ]  # fmt: skip
        script = f"hostname {host}; exec >{log} 2>&1; {' '.join(_q(c) for c in cmd)} & wait $!; sleep 86400"
        conf = {**json.loads(self.env["JRS_TEST_SPARK_CONF"]), "spark.jrstest.sleep": str(sleep)}
        self.hosts.append(
            subprocess.Popen(
                ["unshare", "--uts", "--pid", "--fork", "--mount-proc", "sh", "-c", script],
                env={**self.env, "JRS_TEST_SPARK_CONF": json.dumps(conf)},
                start_new_session=True,
            )
        )
        return log

    def task_process(self, try_number: int) -> psutil.Process:
        """The attempt's task process, seen from outside its namespace."""
        deadline = time.monotonic() + 60
        while True:
            for proc in psutil.process_iter(["cmdline"]):
                cmdline = proc.info.get("cmdline") or []
                if ATTEMPT in cmdline and "--try-number" in cmdline[:-1]:
                    if cmdline[cmdline.index("--try-number") + 1] == str(try_number):
                        return proc
            assert time.monotonic() < deadline, "the attempt's task process never started"
            time.sleep(0.1)

    def wait_computing(self, timeout: float = 120) -> None:
        """Until the application holds the lock (it computes) and its supervisor beats."""
        heartbeats = RedisHeartbeats(self.store.client, self.store.namespace)
        deadline = time.monotonic() + timeout
        while not (self.lock.exists() and (beat := heartbeats.get(JOB)) is not None and beat.child):
            assert time.monotonic() < deadline, "Spark never started"
            time.sleep(0.2)

    def result_of(self, log: Path, timeout: float = 300) -> str:
        deadline = time.monotonic() + timeout
        while "RESULT " not in (text := _read(log)) and "ERROR " not in text:
            assert time.monotonic() < deadline, f"the attempt did not finish:\n{text[-3000:]}"
            time.sleep(0.5)
        return text

    def close(self) -> None:
        for host in self.hosts:
            try:
                os.killpg(host.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            host.wait(timeout=30)


def _read(log: Path) -> str:
    return log.read_text(errors="replace") if log.exists() else ""


def _q(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"


@pytest.fixture
def hosts(host_redis, namespace, tmp_path):
    env = Hosts(host_redis, namespace, tmp_path)
    yield env
    env.close()


@pytest.mark.parametrize(
    ("predecessor", "commit"),
    [("wait", True), ("stop", True), ("wait", False)],
    ids=["wait-adopts", "stop-recomputes", "wait-app-without-airflow-jrs"],
)
def test_orphan_on_another_host_never_runs_beside_its_successor(hosts, predecessor, commit):
    # A computes long enough that an unguarded B would surely start while A still holds the lock.
    hosts.attempt("host-a", 1, predecessor, commit=commit, sleep=30)
    hosts.wait_computing()
    hosts.task_process(1).kill()  # the worker's task process dies; its supervisor lives on
    log_b = hosts.attempt("host-b", 2, predecessor, commit=commit, sleep=1)
    text = hosts.result_of(log_b)
    assert "RESULT " in text, text[-3000:]
    assert not hosts.overlaps.exists(), hosts.overlaps.read_text()  # never two copies at once
    entry = hosts.store.get_entry(JOB)
    assert entry is not None and entry.result.status is JobStatus.SUCCEEDED
    assert [e for e in hosts.store.get_history(JOB) if e.result.status is JobStatus.SUCCEEDED] == []
    assert "host-a" in text  # B named where the predecessor ran
    result = json.loads(text.split("RESULT ", 1)[1].splitlines()[0])
    if predecessor == "wait" and commit:
        assert result["adopted_from"] == 1 and hosts.spark.count() == 1  # no recompute
    else:
        assert "adopted_from" not in result and hosts.spark.count() == 2
