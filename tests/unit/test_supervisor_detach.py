"""The supervisor and spark-submit hold none of the task process's Airflow channels.

Airflow's task supervisor keeps a try running until every channel of the task process is
closed; the task's stdin is one of them (its requests socket). A supervisor started with the
task's stdin (the Spark provider's ``Popen`` sets none) must not keep it, nor hand it on to
spark-submit. The real Airflow task under ``kill -9`` is tests/e2e/test_crash_ends_the_try.py;
this is its fast counterpart (a real supervisor, a Python child in place of spark-submit).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import psutil
import redis

from airflow_jrs.launch.supervisor import SUPERVISOR_ENV, supervised_command
from airflow_jrs.store.redis.leases import RedisJobLease

JOB = "sup.detach.2013-01-01"


def _fd0(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/fd/0")


def _wait(condition, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_supervisor_started_on_the_tasks_stdin_socket_keeps_none_of_it(redis_url, namespace):
    client = redis.Redis.from_url(redis_url)
    fence = RedisJobLease(client, namespace, JOB, ttl=30).acquire()
    kw = client.connection_pool.connection_kwargs
    # Every credential of the test server's URL (JRS_TEST_REDIS_URL may carry a password).
    fields = ("host", "port", "db", "username", "password")
    connection = json.dumps({k: kw[k] for k in fields if kw.get(k) is not None})
    task_end, airflow_end = socket.socketpair()  # the task's stdin: Airflow's requests socket
    channel = f"socket:[{os.fstat(task_end.fileno()).st_ino}]"
    child = [sys.executable, "-c", "import time; time.sleep(60)"]
    cmd = supervised_command(child, namespace=namespace, job_id=JOB, fence=fence, ttl=3)
    env = {**os.environ, SUPERVISOR_ENV: connection}
    proc = subprocess.Popen(cmd, env=env, stdin=task_end, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        _wait(lambda: psutil.Process(proc.pid).children(), "the supervisor's child")
        spark_submit = psutil.Process(proc.pid).children()[0]
        assert _fd0(proc.pid) == os.devnull != channel and _fd0(spark_submit.pid) == os.devnull
        task_end.close()  # the task dies: Airflow's end reads EOF at once, though the supervisor runs on
        airflow_end.settimeout(30)
        assert airflow_end.recv(1) == b"" and proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
        airflow_end.close()
        client.close()
