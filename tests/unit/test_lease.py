"""JobLease against a real Redis: fencing tokens, expiry, takeover, renewal, a paused holder."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from airflow_jrs.exceptions import InvalidJobIdError, LeaseHeldError, LeaseLostError, StoreUnavailableError
from airflow_jrs.store import JobResult, JobStatus, RedisJobResultStore
from airflow_jrs.store.leases.lease import JobLease
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.leases import RedisJobLease
from jrs_testbench.redis_server import EmbeddedRedis

JOB = "dag.task.2013-01-01"


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.02)


def lease_token(client: redis.Redis, namespace: str) -> int | None:
    raw = client.hget(KeySpace(namespace).lease(JOB), "token")
    return int(raw) if raw is not None else None


def test_tokens_strictly_increase_across_acquisitions(redis_client: redis.Redis, namespace: str) -> None:
    tokens = []
    for _ in range(5):
        lease = RedisJobLease(redis_client, namespace, JOB, ttl=5)
        tokens.append(int(lease.acquire()))
        assert lease.release() is True
    assert tokens == sorted(set(tokens)) and tokens[0] >= 1
    assert int(redis_client.get(KeySpace(namespace).fence_counter)) == tokens[-1]
    assert not redis_client.keys(f"jrs:{{{namespace}}}:fence:*")  # nothing per job


def test_tokens_are_counted_per_namespace_and_leave_no_key_per_job(redis_client: redis.Redis, namespace: str) -> None:
    a = RedisJobLease(redis_client, namespace, "job.a", ttl=5).acquire()
    b = RedisJobLease(redis_client, namespace, "job.b", ttl=5).acquire()
    assert (int(a), int(b)) == (1, 2)
    other = RedisJobLease(redis_client, f"{namespace}-other", "job.a", ttl=5).acquire()
    assert int(other) == 1  # namespaces stay apart
    keys = {k.decode() for k in redis_client.scan_iter(match=f"jrs:{{{namespace}}}:fence*")}
    assert keys == {KeySpace(namespace).fence_counter}


def test_second_acquire_while_held_raises_lease_held_naming_the_holder(
    redis_client: redis.Redis, namespace: str
) -> None:
    first = RedisJobLease(redis_client, namespace, JOB, ttl=30)
    token = first.acquire()
    second = RedisJobLease(redis_client, namespace, JOB, ttl=30)
    with pytest.raises(LeaseHeldError) as info:
        second.acquire()
    holder = info.value.holder
    assert holder["host"] == socket.gethostname()
    assert holder["pid"] == os.getpid()
    assert holder["token"] == int(token)
    assert 0 < int(holder["ttl_ms"]) <= 30_000  # type: ignore[call-overload]
    assert info.value.job_id == JOB
    assert JOB in str(info.value)
    assert second.token is None
    assert lease_token(redis_client, namespace) == int(token)  # the holder is untouched
    # a refused acquisition does not burn a token
    first.release()
    assert int(RedisJobLease(redis_client, namespace, JOB, ttl=5).acquire()) == token + 1


def test_expired_lease_is_taken_over_and_the_old_holder_learns_it_lost(
    redis_client: redis.Redis, namespace: str
) -> None:
    lost: list[JobLease] = []
    old = RedisJobLease(redis_client, namespace, JOB, ttl=1, on_lost=lost.append)
    old_token = old.acquire()
    assert old.check() == old_token
    time.sleep(1.2)
    new = RedisJobLease(redis_client, namespace, JOB, ttl=10)
    new_token = new.acquire()
    assert new_token > old_token
    assert old.renew() is False
    assert old.lost.is_set() and lost == [old]
    with pytest.raises(LeaseLostError) as info:
        old.check()
    assert info.value.fence == old_token and info.value.job_id == JOB
    assert new.renew() is True and new.check() == new_token
    assert lease_token(redis_client, namespace) == int(new_token)  # the failed renewal changed nothing


def test_release_by_a_stale_token_does_not_delete_the_new_holders_lease(
    redis_client: redis.Redis, namespace: str
) -> None:
    old = RedisJobLease(redis_client, namespace, JOB, ttl=1)
    old.acquire()
    time.sleep(1.2)
    new = RedisJobLease(redis_client, namespace, JOB, ttl=10)
    new_token = new.acquire()
    assert old.release() is False
    assert lease_token(redis_client, namespace) == int(new_token)
    assert redis_client.pttl(KeySpace(namespace).lease(JOB)) > 0
    assert new.release() is True
    assert not redis_client.exists(KeySpace(namespace).lease(JOB))


def test_background_renewal_keeps_a_short_lease_alive(redis_client: redis.Redis, namespace: str) -> None:
    lease = RedisJobLease(redis_client, namespace, JOB, ttl=3)
    token = lease.acquire()
    lease.start_renewal(interval=0.2)  # a renewal may slip by 2.8 s on a loaded machine
    try:
        time.sleep(7.0)  # more than two TTLs: only renewals keep it
        assert lease.check() == token
        assert lease_token(redis_client, namespace) == int(token)
        assert redis_client.pttl(KeySpace(namespace).lease(JOB)) > 0
        with pytest.raises(LeaseHeldError):
            RedisJobLease(redis_client, namespace, JOB, ttl=3).acquire()
    finally:
        assert lease.release() is True


def test_release_stops_renewal(redis_client: redis.Redis, namespace: str) -> None:
    lost: list[JobLease] = []
    lease = RedisJobLease(redis_client, namespace, JOB, ttl=5, on_lost=lost.append)
    lease.acquire()
    lease.start_renewal(interval=0.05)
    time.sleep(0.2)
    assert lease.release() is True
    assert lease._thread is not None and not lease._thread.is_alive()
    assert not redis_client.exists(KeySpace(namespace).lease(JOB))
    time.sleep(0.3)  # a renewer still running would now fail to renew and report a loss
    assert lost == [] and not lease.lost.is_set()
    assert not redis_client.exists(KeySpace(namespace).lease(JOB))


def test_renewal_notices_a_takeover_by_itself(redis_client: redis.Redis, namespace: str) -> None:
    lost: list[JobLease] = []
    lease = RedisJobLease(redis_client, namespace, JOB, ttl=5, on_lost=lost.append)
    token = lease.acquire()
    lease.start_renewal(interval=0.05)
    try:
        redis_client.delete(KeySpace(namespace).lease(JOB))  # as if it expired while we slept
        newer = RedisJobLease(redis_client, namespace, JOB, ttl=5).acquire()
        wait_for(lease.lost.is_set, 10, "the renewer to notice the takeover")
        assert lost == [lease]
        with pytest.raises(LeaseLostError):
            lease.check()
        assert lease_token(redis_client, namespace) == int(newer) != token
    finally:
        lease.release()


def test_renewal_against_an_unreachable_redis_marks_the_lease_lost(tmp_path: Path, namespace: str) -> None:
    server = EmbeddedRedis(tmp_path / "redis").start()
    try:
        client = redis.Redis.from_url(server.url, socket_timeout=1, socket_connect_timeout=1)
        # The renewer gives up once a TTL has passed without a renewal: a TTL of twice the
        # client's 1-s timeout still sees several renewals fail first, and the wait is 2 s, not 5.
        lease = RedisJobLease(client, namespace, JOB, ttl=2)
        lease.acquire()
        lease.start_renewal(interval=0.05)
        server.stop()
        wait_for(lease.lost.is_set, 30, "the renewer to give up on an unreachable Redis")
        with pytest.raises(LeaseLostError):
            lease.check()
        with pytest.raises(StoreUnavailableError):
            RedisJobLease(client, namespace, "other.job", ttl=5).acquire()
        lease.stop_renewal()
        client.close()
    finally:
        server.stop()


def test_lease_arguments_are_validated(redis_client: redis.Redis, namespace: str) -> None:
    with pytest.raises(ValueError, match="at least 1 second"):
        RedisJobLease(redis_client, namespace, JOB, ttl=0.5)
    with pytest.raises(InvalidJobIdError):
        RedisJobLease(redis_client, namespace, "bad job", ttl=5)
    never = RedisJobLease(redis_client, namespace, JOB, ttl=5)
    for call in (never.renew, never.check, never.start_renewal):
        with pytest.raises(RuntimeError, match="never acquired"):
            call()
    assert never.release() is False


_PAUSED_HOLDER = """
import os, signal, sys
import redis
from airflow_jrs.store.redis.leases import RedisJobLease
from airflow_jrs.store import JobResult, JobStatus, RedisJobResultStore

url, namespace, job_id = sys.argv[1:4]
client = redis.Redis.from_url(url)
store = RedisJobResultStore(client, namespace)
lease = RedisJobLease(client, namespace, job_id, ttl=1)
token = lease.acquire()
lease.start_renewal()
print(token, flush=True)
os.kill(os.getpid(), signal.SIGSTOP)  # paused (GC, swap, a stopped VM...) past the lease's TTL
try:
    store.create_dirty_result(
        JobResult(job_id=job_id, status=JobStatus.SUCCEEDED, application_id="zombie"), fence=token
    )
    print("WROTE", flush=True)
except Exception as exc:
    print(type(exc).__name__, flush=True)
"""


def _process_state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to see a stopped process")
def test_a_holder_paused_past_its_ttl_cannot_write_after_a_takeover(
    redis_url: str, redis_client: redis.Redis, namespace: str
) -> None:
    store = RedisJobResultStore(redis_client, namespace)
    child = subprocess.Popen(
        [sys.executable, "-c", _PAUSED_HOLDER, redis_url, namespace, JOB],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stderr is not None
        line = child.stdout.readline()
        assert line.strip().isdigit(), f"child said {line!r}: {child.stderr.read() if not line else ''}"
        old_token = int(line)
        wait_for(lambda: _process_state(child.pid) == "T", 5, "the holder to stop itself")
        wait_for(lambda: not redis_client.exists(KeySpace(namespace).lease(JOB)), 3, "the lease to expire")

        new = RedisJobLease(redis_client, namespace, JOB, ttl=10)
        new_token = new.acquire()
        assert int(new_token) == old_token + 1

        os.kill(child.pid, signal.SIGCONT)
        out, err = child.communicate(timeout=20)
        assert child.returncode == 0, err
        assert out.split() == ["LeaseLostError"], err
        assert store.get_entry(JOB) is None
        assert store.get_dirty_results() == []
        assert lease_token(redis_client, namespace) == int(new_token)  # the woken renewer did not steal it back

        entry = store.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.SUCCEEDED), fence=new_token)
        assert entry.result.fence == int(new_token)  # a result keeps the token only
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGCONT)
            child.kill()
            child.wait()
