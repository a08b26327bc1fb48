"""Fast takeover of a lease whose holder is provably dead: real processes, a real redis-server.

A holder is a real Python process that took the lease (its owner records its host, pid and pid
space) and is then SIGKILLed, as ``kill -9`` of a task would; "alive" parts are real processes
too. The takeover itself is a compare-and-set in Redis, so two successors cannot both win.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from types import SimpleNamespace

import psutil
import pytest
import redis

from airflow_jrs.exceptions import LeaseHeldError
from airflow_jrs.protocol import JobNamespace, settings_for
from airflow_jrs.protocol.takeover import judge, refusal, take_over_if_dead
from airflow_jrs.store.leases.fence import Fence
from airflow_jrs.store.leases.lease import LeaseHolder, default_owner, process_identity
from airflow_jrs.store.redis.heartbeats import RedisHeartbeats
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.leases import RedisJobLease
from airflow_jrs.store.redis.namespace import RedisJobNamespace

JOB = "dag.task.2013-01-01"
HOLDER = """
import sys, time, redis
from airflow_jrs.store.leases.lease import default_owner
from airflow_jrs.store.redis.leases import RedisJobLease
owner = default_owner(dag_id="dag", task_id="task", run_id="scheduled__2013-01-01", try_number=1)
lease = RedisJobLease(redis.Redis.from_url(sys.argv[1]), sys.argv[2], sys.argv[3], ttl=60, owner=owner)
print(lease.acquire().identity, flush=True)  # <token>:<nonce>, what fenced scripts compare
time.sleep(600)
"""


class Holder:
    """A real process holding the job's lease (60 s TTL, never renewed)."""

    def __init__(self, redis_url: str, namespace: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, redis_url, namespace, JOB], stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        self.token = Fence.parse(self.process.stdout.readline())

    def kill(self) -> None:
        """kill -9, and reap it (its parent is this test, not init)."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()


@pytest.fixture
def holder(redis_url: str, namespace: str) -> Iterator[Holder]:
    h = Holder(redis_url, namespace)
    yield h
    if h.process.poll() is None:
        h.kill()


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A live process standing in for a supervisor or spark-submit that outlived its task."""
    proc = subprocess.Popen(["sleep", "600"])
    yield proc
    proc.kill()
    proc.wait()


def peek(client: redis.Redis, namespace: str) -> LeaseHolder:
    found = RedisJobLease(client, namespace, JOB).peek()
    assert found is not None
    return found


def hook(client: redis.Redis, namespace: str, tmp_path) -> JobNamespace:
    """What take_over_if_dead reads: the namespace's intents and heartbeats."""
    settings = settings_for(namespace, output_root=str(tmp_path / "out"), spec_root=str(tmp_path / "specs"))
    return RedisJobNamespace(client, settings)


def test_a_killed_holder_on_this_host_is_taken_over_at_once_with_a_newer_fence(
    redis_client, namespace, holder, tmp_path, capfd
):
    holder.kill()
    successor = RedisJobLease(redis_client, namespace, JOB, ttl=60)
    with pytest.raises(LeaseHeldError):
        successor.acquire()  # the dead holder's lease has ~60 s left
    log = SimpleNamespace(warning=lambda msg, *args: print(msg % args))
    taken, waiting_for = take_over_if_dead(hook(redis_client, namespace, tmp_path), successor, log)
    assert (taken, waiting_for) == (True, "")
    assert successor.token is not None and successor.token > holder.token
    now = peek(redis_client, namespace)
    assert now.fence == successor.token and now.owner["pid"] == os.getpid()
    assert redis_client.hget(KeySpace(namespace).lease(JOB), "taken_from") == str(holder.token).encode()
    out, _ = capfd.readouterr()
    assert f"took over the lease from pid {holder.process.pid} on host" in out and "is gone" in out


def test_two_successors_of_one_dead_holder_cannot_both_take_over(redis_client, namespace, holder):
    holder.kill()
    dead = peek(redis_client, namespace)
    first, second = (
        RedisJobLease(redis_client, namespace, JOB, ttl=60),
        RedisJobLease(redis_client, namespace, JOB, ttl=60),
    )
    token = first.take_over(dead)
    with pytest.raises(LeaseHeldError) as info:
        second.take_over(dead)  # it saw the same dead holder, but the token changed under it
    assert info.value.holder["token"] == int(token) and second.token is None
    assert first.renew() is True


def test_a_taken_over_holder_that_was_alive_after_all_loses_its_lease_and_cannot_renew(redis_client, namespace):
    alive = RedisJobLease(redis_client, namespace, JOB, ttl=60)
    old = alive.acquire()
    new = RedisJobLease(redis_client, namespace, JOB, ttl=60).take_over(peek(redis_client, namespace))
    assert new is not None and new > old
    assert alive.renew() is False and alive.lost.is_set()


def test_take_over_of_a_lease_that_expired_meanwhile_asks_for_a_plain_acquire(redis_client, namespace):
    gone = LeaseHolder(token=7, owner={}, ttl_ms=0)
    assert RedisJobLease(redis_client, namespace, JOB, ttl=60).take_over(gone) is None


def test_a_live_holder_is_not_dead_and_the_wait_names_its_pid_and_time_left(redis_client, namespace, holder, tmp_path):
    successor = RedisJobLease(redis_client, namespace, JOB, ttl=60)
    taken, waiting_for = take_over_if_dead(hook(redis_client, namespace, tmp_path), successor, log=None)
    assert not taken and successor.token is None
    assert f"pid {holder.process.pid} on host" in waiting_for and f"fence {holder.token}" in waiting_for
    assert "expires in" in waiting_for and f"its pid {holder.process.pid} is alive" in waiting_for
    assert "dag.task, run scheduled__2013-01-01, try 1" in waiting_for


def test_a_dead_holder_whose_supervisor_still_runs_is_waited_for(redis_client, namespace, holder, sleeper, tmp_path):
    RedisHeartbeats(redis_client, namespace).beat(
        JOB, holder.token, 60_000, host=default_owner()["host"], pid=sleeper.pid, child=0, first=True
    )
    holder.kill()
    successor = RedisJobLease(redis_client, namespace, JOB, ttl=60)
    taken, waiting_for = take_over_if_dead(hook(redis_client, namespace, tmp_path), successor, log=None)
    assert not taken and f"its supervisor (pid {sleeper.pid}) still runs" in waiting_for
    assert peek(redis_client, namespace).fence == holder.token


def test_a_dead_holder_whose_local_spark_submit_still_runs_is_waited_for(redis_client, namespace, holder, tmp_path):
    marks = [f"spark.jrs.job_id={JOB}", f"spark.jrs.namespace={namespace}"]  # how the operator tags spark-submit
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", *marks])
    try:
        holder.kill()
        successor = RedisJobLease(redis_client, namespace, JOB, ttl=60)
        taken, waiting_for = take_over_if_dead(hook(redis_client, namespace, tmp_path), successor, log=None)
        assert not taken and f"spark-submit of this job runs (pids [{orphan.pid}])" in waiting_for
    finally:
        orphan.kill()
        orphan.wait()


def owner_here(**changes) -> dict:
    return {**default_owner(), **changes}


@pytest.mark.parametrize(
    ("owner", "words"),
    [
        (lambda dead: owner_here(pid=dead, host="another-host"), "runs on host another-host"),
        (lambda dead: owner_here(pid=dead, pid_space="other-boot/pid:[1]"), "another kernel or pid namespace"),
    ],
    ids=["other host", "same host name, other pid namespace"],
)
def test_a_holder_this_host_cannot_see_is_never_judged_dead(holder, namespace, owner, words):
    holder.kill()  # even a pid that is gone *here* says nothing about a pid over there
    verdict = judge(LeaseHolder(1, owner(holder.process.pid), 30_000), None, None, namespace=namespace, job_id=JOB)
    assert not verdict.dead and words in verdict.why


def test_a_pid_reused_by_a_later_process_counts_as_gone(namespace, sleeper):
    owner = owner_here(pid=sleeper.pid, pid_start="1")  # the number now belongs to another process
    assert judge(LeaseHolder(1, owner, 30_000), None, None, namespace=namespace, job_id=JOB).dead
    same = owner_here(pid=sleeper.pid, pid_start=process_identity(sleeper.pid)["pid_start"])
    assert not judge(LeaseHolder(1, same, 30_000), None, None, namespace=namespace, job_id=JOB).dead


@pytest.mark.parametrize(
    ("try_number", "retries", "promise"),
    [(1, 0, None), (1, 2, "Airflow will retry this task (2 retries left)"), (3, 2, None), (2, 2, "(1 retry left)")],
)
def test_the_refusal_promises_a_retry_only_when_one_is_left(try_number, retries, promise):
    text = refusal(JOB, "the lease held by pid 1", try_number=try_number, retries=retries, lease_wait_timeout=0)
    if promise is None:
        assert "Airflow will retry" not in text and "last try" in text and "clear the task" in text
    else:
        assert promise in text


def test_a_holder_whose_pid_space_neither_side_can_read_is_never_judged_dead(holder, namespace, monkeypatch):
    """Without /proc (another OS, a locked-down container) neither side records a pid space: two
    unknowns are not "the same pid space", so nothing this host sees proves the holder dead."""
    from airflow_jrs.protocol import takeover

    holder.kill()
    owner = {k: v for k, v in owner_here(pid=holder.process.pid).items() if k not in ("pid_space", "pid_start")}
    monkeypatch.setattr(takeover, "process_identity", lambda pid: {})  # this host cannot read /proc either
    verdict = judge(LeaseHolder(1, owner, 30_000), None, None, namespace=namespace, job_id=JOB)
    assert not verdict.dead and "pid space" in verdict.why


def test_a_holder_without_a_pid_is_never_judged_dead(namespace):
    owner = {k: v for k, v in owner_here().items() if k != "pid"}
    verdict = judge(LeaseHolder(1, owner, 30_000), None, None, namespace=namespace, job_id=JOB)
    assert not verdict.dead


def test_a_live_holder_this_host_may_not_inspect_is_never_judged_dead(namespace, sleeper, monkeypatch):
    """psutil's AccessDenied (a pid of another user under hidepid, a hardened kernel) says the
    process exists; it must not count as gone. This test runs as root, where the kernel never
    refuses: the refusal is what is simulated, the process is real and alive."""
    real_status = psutil.Process.status

    def denied(self):  # what psutil raises when /proc/<pid> may not be read
        if self.pid == sleeper.pid:
            raise psutil.AccessDenied(self.pid)
        return real_status(self)

    monkeypatch.setattr(psutil.Process, "status", denied)
    owner = owner_here(pid=sleeper.pid, pid_start=process_identity(sleeper.pid)["pid_start"])
    verdict = judge(LeaseHolder(1, owner, 30_000), None, None, namespace=namespace, job_id=JOB)
    assert not verdict.dead, verdict.why
    beat_owner = owner_here(pid=99_999_999)  # the holder is gone, but its supervisor may not be inspected
    from airflow_jrs.store.heartbeats import Heartbeat

    beat = Heartbeat(1, default_owner()["host"], sleeper.pid, None, "running", None, False, 30_000)
    verdict = judge(LeaseHolder(1, beat_owner, 30_000), None, beat, namespace=namespace, job_id=JOB)
    assert not verdict.dead and f"(pid {sleeper.pid}) still runs" in verdict.why, verdict.why


#: One task instance of the DAG, as an attempt's lease names it (tries differ in ``try_number``).
TASK_INSTANCE = {"dag_id": "dag", "task_id": "task", "run_id": "scheduled__2013-01-01", "map_index": -1}


def test_a_retry_takes_over_from_its_own_earlier_try_at_once_while_that_try_still_runs_spark(
    redis_client, namespace, sleeper, tmp_path, capfd
):
    """Airflow starts try 2 only after try 1 ended: a lease that try 1 left (its task process
    gone, its supervisor still running spark-submit) is taken over at once, not after its TTL;
    recovery then waits for that spark-submit and adopts its output."""
    first = RedisJobLease(redis_client, namespace, JOB, ttl=60, owner=default_owner(**TASK_INSTANCE, try_number=1))
    first.acquire()
    RedisHeartbeats(redis_client, namespace).beat(
        JOB, first.token, 60_000, host=default_owner()["host"], pid=sleeper.pid, child=0, first=True
    )
    retry = RedisJobLease(redis_client, namespace, JOB, ttl=60, owner=default_owner(**TASK_INSTANCE, try_number=2))
    log = SimpleNamespace(warning=lambda msg, *args: print(msg % args))
    taken, waiting_for = take_over_if_dead(hook(redis_client, namespace, tmp_path), retry, log)
    assert (taken, waiting_for) == (True, "")
    assert retry.token is not None and retry.token > first.token
    assert first.renew() is False, "try 1, were it alive after all, lost its lease and writes nothing"
    out, _ = capfd.readouterr()
    assert "it is try 1 of this task instance, which Airflow ended before it started this try 2" in out, out
    steps = hook(redis_client, namespace, tmp_path).recoveries.get(JOB)
    assert [s.event for s in steps] == ["took_over"] and steps[0].facts["try_number"] == 1


@pytest.mark.parametrize(
    ("theirs", "ours"),
    [
        ({**TASK_INSTANCE, "run_id": "manual__2013-01-01", "try_number": 1}, {**TASK_INSTANCE, "try_number": 2}),
        ({**TASK_INSTANCE, "map_index": 3, "try_number": 1}, {**TASK_INSTANCE, "map_index": 4, "try_number": 2}),
        ({**TASK_INSTANCE, "try_number": 2}, {**TASK_INSTANCE, "try_number": 2}),
        ({**TASK_INSTANCE, "try_number": 3}, {**TASK_INSTANCE, "try_number": 2}),
        # a lease of a version that did not record the map index: it cannot be told apart, so it is waited for
        (
            {k: v for k, v in TASK_INSTANCE.items() if k != "map_index"} | {"try_number": 1},
            {**TASK_INSTANCE, "try_number": 2},
        ),
    ],
    ids=["another run", "another map index", "the same try", "a later try", "an older lease without map index"],
)
def test_a_live_holder_that_is_not_an_earlier_try_of_the_same_task_instance_is_waited_for(
    redis_client, namespace, tmp_path, theirs, ours
):
    held = RedisJobLease(redis_client, namespace, JOB, ttl=60, owner=default_owner(**theirs))
    held.acquire()
    successor = RedisJobLease(redis_client, namespace, JOB, ttl=60, owner=default_owner(**ours))
    taken, waiting_for = take_over_if_dead(hook(redis_client, namespace, tmp_path), successor, log=None)
    assert not taken and f"its pid {os.getpid()} is alive" in waiting_for
    assert peek(redis_client, namespace).fence == held.token and held.renew()


def test_a_lease_says_its_ttl_so_a_reader_tells_how_long_ago_it_was_renewed(redis_client, namespace):
    lease = RedisJobLease(redis_client, namespace, JOB, ttl=60)
    lease.acquire()
    redis_client.pexpire(KeySpace(namespace).lease(JOB), 35_000)  # as if 25 s passed without a renewal
    seen = peek(redis_client, namespace)
    assert seen.lease_ttl_ms == 60_000 and seen.silent_ms is not None and 25_000 <= seen.silent_ms < 26_000
    redis_client.hdel(KeySpace(namespace).lease(JOB), "ttl_ms")  # a lease taken before the TTL was kept
    assert peek(redis_client, namespace).silent_ms is None
