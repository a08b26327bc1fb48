"""The supervisor beside spark-submit, with a stand-in command (no JVM): heartbeat, stop, fences.

Each test runs ``python -m airflow_jrs.launch.supervisor`` as a real process against a real Redis,
with a small Python child in place of spark-submit, and asserts on what the child did (files
it wrote, whether it still lives) and on the heartbeat in Redis.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import redis

from airflow_jrs.launch.supervisor import LOST_BEFORE_START, SUPERVISOR_ENV, supervised_command
from airflow_jrs.store.redis.heartbeats import RedisHeartbeats
from airflow_jrs.store.redis.leases import RedisJobLease
from airflow_jrs.store.redis.stop_requests import RedisStopRequests
from jrs_testbench.redis_server import EmbeddedRedis

JOB = "sup.job.2013-01-01"
#: The child: writes "started", then ticks into a file until told to stop (or SLEEP runs out).
CHILD = """
import pathlib, sys, time
out = pathlib.Path(sys.argv[1]); out.mkdir(exist_ok=True)
(out / "started").write_text(str(__import__("os").getpid()))
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    print("tick " * 200, flush=True)  # plenty of output: the relay must keep draining it
    time.sleep(0.05)
(out / "finished").write_text("ok")
"""


def _connection(url: str) -> str:
    client = redis.Redis.from_url(url)
    kw = client.connection_pool.connection_kwargs
    client.close()
    return json.dumps({"host": kw["host"], "port": kw["port"], "db": kw.get("db", 0)})


def start(
    url: str, namespace: str, fence: int, out: Path, seconds: float, *, ttl: float = 3.0, **popen
) -> subprocess.Popen:
    cmd = supervised_command(
        [sys.executable, "-c", CHILD, str(out), str(seconds)], namespace=namespace, job_id=JOB, fence=fence, ttl=ttl
    )
    env = {**os.environ, SUPERVISOR_ENV: _connection(url), "PYTHONPATH": str(Path(__file__).parents[2])}
    popen.setdefault("stdout", subprocess.DEVNULL)
    return subprocess.Popen(cmd, env=env, stderr=subprocess.STDOUT, **popen)


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def leased(redis_url, namespace):
    """The job's lease held by fence 1 (the attempt that starts the supervisor)."""
    lease = RedisJobLease(redis.Redis.from_url(redis_url), namespace, JOB, ttl=30)
    assert int(lease.acquire()) == 1
    return lease


def test_it_beats_while_the_child_runs_and_records_how_it_ended(redis_url, namespace, leased, tmp_path):
    beats = RedisHeartbeats(redis.Redis.from_url(redis_url), namespace)
    proc = start(redis_url, namespace, leased.token, tmp_path / "out", 1.5)
    wait_until(lambda: (b := beats.get(JOB)) is not None and b.child, 30, "a heartbeat naming the child")
    beat = beats.get(JOB)
    assert beat.running and beat.fence == leased.token and beat.pid == proc.pid and 0 < beat.ttl_ms <= 3000
    assert proc.wait(60) == 0
    ended = beats.get(JOB)
    assert ended.state == "ended" and ended.exit_code == 0 and (tmp_path / "out" / "finished").exists()


def test_a_successor_stop_request_stops_the_child(redis_url, namespace, leased, tmp_path):
    client = redis.Redis.from_url(redis_url)
    beats, requests = RedisHeartbeats(client, namespace), RedisStopRequests(client, namespace)
    proc = start(redis_url, namespace, leased.token, tmp_path / "out", 120)
    wait_until(lambda: (tmp_path / "out" / "started").exists(), 30, "the child")
    assert requests.ask(JOB, 2, "stop", by="test") is None  # only the running fence's
    assert requests.ask(JOB, leased.token, "stop", by="a successor (fence 2)").kind == "stop"
    assert proc.wait(60) == 128 + signal.SIGTERM  # a batch job: terminated (SIGTERM, then a grace)
    assert beats.get(JOB).state == "ended" and not (tmp_path / "out" / "finished").exists()


def test_an_attempt_that_lost_its_lease_before_the_launch_starts_nothing(redis_url, namespace, leased, tmp_path):
    fence = leased.token
    leased.release()
    RedisJobLease(redis.Redis.from_url(redis_url), namespace, JOB, ttl=30).acquire()  # a successor: fence 2
    proc = start(redis_url, namespace, fence, tmp_path / "out", 120)
    assert proc.wait(60) == LOST_BEFORE_START
    assert not (tmp_path / "out").exists()  # the child never ran
    assert RedisHeartbeats(redis.Redis.from_url(redis_url), namespace).get(JOB) is None


def test_a_newer_fences_heartbeat_stops_the_older_supervisors_child(redis_url, namespace, leased, tmp_path):
    beats = RedisHeartbeats(redis.Redis.from_url(redis_url), namespace)
    proc = start(redis_url, namespace, leased.token, tmp_path / "out", 120, ttl=1.5)
    wait_until(lambda: (tmp_path / "out" / "started").exists(), 30, "the child")
    successor = RedisJobLease(redis.Redis.from_url(redis_url), namespace, JOB, ttl=30)
    assert int(successor.take_over(leased.peek()) or 0) == 2
    beats.beat(JOB, successor.token, 30_000, host="elsewhere", pid=1, child=0, first=True)  # the successor's
    assert proc.wait(60) == 128 + signal.SIGTERM


def test_killing_the_supervisor_kills_the_child_and_the_task_dying_does_not(redis_url, namespace, leased, tmp_path):
    proc = start(redis_url, namespace, leased.token, tmp_path / "out", 120, stdout=subprocess.PIPE)
    wait_until(lambda: (tmp_path / "out" / "started").exists(), 30, "the child")
    child = psutil.Process(int((tmp_path / "out" / "started").read_text()))
    proc.stdout.close()  # the task process that read spark-submit's output is gone
    time.sleep(1.0)  # the child keeps printing into the relay, which keeps draining
    assert child.is_running() and child.status() != psutil.STATUS_ZOMBIE
    proc.kill()  # the operator's on_kill (through the Spark provider) SIGKILLs the supervisor
    proc.wait(30)
    wait_until(lambda: not child.is_running() or child.status() == psutil.STATUS_ZOMBIE, 30, "the child to die")


def test_a_supervisor_cut_off_from_redis_stops_its_child_before_its_heartbeat_expires(tmp_path, namespace):
    with EmbeddedRedis(tmp_path / "redis") as server:
        fence = RedisJobLease(redis.Redis.from_url(server.url), namespace, JOB, ttl=30).acquire()
        proc = start(server.url, namespace, fence, tmp_path / "out", 120, ttl=3)
        wait_until(lambda: (tmp_path / "out" / "started").exists(), 30, "the child")
        os.kill(server.process.pid, signal.SIGSTOP)  # a partition: Redis answers nothing
        try:
            assert proc.wait(60) == 128 + signal.SIGKILL  # self-fenced after 70 % of the TTL, at once
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
    assert not (tmp_path / "out" / "finished").exists()


def test_a_supervisor_woken_late_now_and_then_keeps_its_child(redis_url, namespace, leased, tmp_path):
    """A loaded host wakes the supervisor late. Its waits once ended at the last moment a beat
    could start, so with a 3 s TTL a wake 0.1 s late self-fenced a healthy job (a gate on a slow
    machine lost two chaos trials to it). Paused for 0.3 s at drifting moments, it must keep
    beating: it wakes with half of the time before that moment to spare."""
    beats = RedisHeartbeats(redis.Redis.from_url(redis_url), namespace)
    proc = start(redis_url, namespace, leased.token, tmp_path / "out", 5, ttl=3)
    wait_until(lambda: (b := beats.get(JOB)) is not None and b.child, 30, "a heartbeat naming the child")
    pauses = 0
    try:
        while proc.poll() is None and pauses < 40:
            os.kill(proc.pid, signal.SIGSTOP)
            time.sleep(0.3)
            os.kill(proc.pid, signal.SIGCONT)
            pauses += 1
            time.sleep(0.55)  # not a multiple of the beat period: the pauses land at every phase
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)
    assert proc.wait(60) == 0, "the supervisor fenced itself though every beat it started landed"
    assert pauses >= 5 and (tmp_path / "out" / "finished").exists()


def test_a_supervisor_whose_heartbeat_expired_early_stops_its_child_instead_of_recreating_it(
    redis_url, namespace, leased, tmp_path
):
    """A clock step on the Redis host (or a failover to a replica with another clock) expires the
    heartbeat before its TTL: a successor may already run. The next beat must not bring the key back."""
    client = redis.Redis.from_url(redis_url)
    beats = RedisHeartbeats(client, namespace)
    proc = start(redis_url, namespace, leased.token, tmp_path / "out", 120, ttl=3)
    wait_until(lambda: (tmp_path / "out" / "started").exists(), 30, "the child")
    wait_until(lambda: (b := beats.get(JOB)) is not None and b.child, 30, "a heartbeat naming the child")
    child = psutil.Process(int((tmp_path / "out" / "started").read_text()))
    assert client.delete(beats.keys.heartbeat(JOB)) == 1  # expired early
    wait_until(
        lambda: proc.poll() is not None or ((b := beats.get(JOB)) is not None and b.running),
        60,
        "the supervisor to stop, or to beat again",
    )
    assert proc.poll() is not None, "the supervisor recreated its expired heartbeat and kept its child running"
    assert proc.wait(60) == 128 + signal.SIGKILL
    wait_until(lambda: not child.is_running() or child.status() == psutil.STATUS_ZOMBIE, 30, "the child to die")
    ended = beats.get(JOB)
    assert ended is None or not ended.running
    assert not (tmp_path / "out" / "finished").exists()


def test_a_later_beat_never_creates_a_heartbeat(redis_url, namespace, leased):
    from airflow_jrs.exceptions import StaleHeartbeat

    beats = RedisHeartbeats(redis.Redis.from_url(redis_url), namespace)
    with pytest.raises(StaleHeartbeat):
        beats.beat(JOB, leased.token, 30_000, host="h", pid=1, child=2)  # no first beat: nothing to renew
    assert beats.get(JOB) is None
    beats.beat(JOB, leased.token, 30_000, host="h", pid=1, child=0, first=True)
    assert beats.beat(JOB, leased.token, 30_000, host="h", pid=1, child=2) is None  # renews its own


def test_a_store_that_answers_again_within_a_third_of_the_ttl_still_gets_the_first_beat(tmp_path, namespace):
    """A failover makes the store silent for seconds (a new primary is being promoted); before
    Spark starts nothing runs, so the first heartbeat is asked again for up to ttl/3 instead of
    failing the task at once. Silent for longer, the launch is refused (the test just above)."""
    with EmbeddedRedis(tmp_path / "redis") as server:
        fence = RedisJobLease(redis.Redis.from_url(server.url), namespace, JOB, ttl=60).acquire()
        os.kill(server.process.pid, signal.SIGSTOP)  # silent when the supervisor starts
        try:
            proc = start(server.url, namespace, fence, tmp_path / "out", 0.1, ttl=12, stdout=subprocess.PIPE)
            assert proc.stdout is not None
            said = proc.stdout.readline()  # its first words: the first try failed (nothing else runs yet)
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
        assert b"could not write the first heartbeat" in said and b"will retry for 4 s" in said, said
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out
        assert (tmp_path / "out" / "finished").exists()


def test_a_store_silent_for_a_third_of_the_ttl_starts_nothing(tmp_path, namespace):
    with EmbeddedRedis(tmp_path / "redis") as server:
        fence = RedisJobLease(redis.Redis.from_url(server.url), namespace, JOB, ttl=60).acquire()
        os.kill(server.process.pid, signal.SIGSTOP)
        try:
            proc = start(server.url, namespace, fence, tmp_path / "out", 0.1, ttl=3)
            assert proc.wait(60) == LOST_BEFORE_START
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("guarded", [True, False], ids=["min-replicas-to-write", "unguarded"])
def test_a_holder_cut_off_with_a_primary_that_lost_its_replicas_stops_its_child(tmp_path, namespace, guarded):
    """A partition that leaves a holder with the old primary while the sentinels promote a
    replica: its beats must stop landing, or it keeps running beside the successor the new
    primary lets in once the heartbeat it has expired. The primary's ``min-replicas-to-write 1``
    (docs/operations/redis.md) makes it refuse writes once no replica acknowledged it for
    ``min-replicas-max-lag`` seconds: the beats fail and the supervisor fences itself within
    that lag plus 70 % of the TTL. Without the guard the cut-off primary takes every beat."""
    guard = ["--min-replicas-to-write", "1", "--min-replicas-max-lag", "1"] if guarded else []
    with EmbeddedRedis(tmp_path / "primary", extra_args=guard) as primary:
        replica = EmbeddedRedis(tmp_path / "replica", extra_args=["--replicaof", "127.0.0.1", str(primary.port)])
        with replica:
            client = redis.Redis.from_url(primary.url)
            wait_until(lambda: client.info("replication").get("connected_slaves") == 1, 30, "the replica")
            wait_until(lambda: _writes(client), 30, "the primary to take writes")
            fence = RedisJobLease(client, namespace, JOB, ttl=60).acquire()
            proc = start(primary.url, namespace, fence, tmp_path / "out", 30, ttl=4)
            wait_until(lambda: (tmp_path / "out" / "started").exists(), 30, "the child")
            os.kill(replica.process.pid, signal.SIGSTOP)  # the primary is cut off from its replica
            try:
                if guarded:
                    assert proc.wait(30) == 128 + signal.SIGKILL  # self-fenced: the beats were refused
                    with pytest.raises(redis.exceptions.ResponseError, match="NOREPLICAS"):
                        client.set("a", 1)
                else:
                    with pytest.raises(subprocess.TimeoutExpired):  # it goes on beating on the cut-off primary
                        proc.wait(8)
                    assert RedisHeartbeats(client, namespace).get(JOB).running
            finally:
                os.kill(replica.process.pid, signal.SIGCONT)
                proc.kill()
                proc.wait()


def _writes(client: redis.Redis) -> bool:
    try:
        return bool(client.set("jrs-test:probe", 1))
    except redis.exceptions.ResponseError:
        return False
