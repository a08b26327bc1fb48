"""The fault machinery of the trials (benchmarks/fault_trials.py) does what it claims, on real servers and processes.

Each test starts its own redis-servers (free ports, temporary dirs) and its own processes.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
import redis

from jrs_testbench.trials.clock import faketime_missing
from jrs_testbench.trials.hosts import ENV_HOST, HostLauncher, pause, paused, resume
from jrs_testbench.trials.redis_front import RedisFront


def eventually(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    """Wait for ``check`` (a condition, not a speed: the timeout only ends a hung test)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.02)


def client(url: str, timeout: float = 5.0) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout, retry_on_timeout=False)


@pytest.fixture
def front(tmp_path: Path) -> Iterator[RedisFront]:
    with RedisFront(tmp_path / "front") as f:
        yield f


# -- network faults: one host's link, the others go on --------------------------------------


def test_drop_replies_runs_the_command_and_loses_its_reply(front: RedisFront) -> None:
    a, b = client(front.url_for("a")), client(front.url_for("b"))
    a.ping()
    front.partition("a", "drop-replies")
    with pytest.raises(redis.ConnectionError):
        a.incr("counter")
    assert front.client().get("counter") == b"1"  # it ran: only the reply was lost
    assert b.incr("counter") == 2  # host b is not partitioned
    front.heal("a")
    assert a.incr("counter") == 3


def test_delay_slows_each_way_and_loses_nothing(front: RedisFront) -> None:
    a = client(front.url_for("a"))
    a.ping()
    front.partition("a", "delay", delay_ms=100)
    start = time.monotonic()
    assert a.incr("n") == 1
    assert time.monotonic() - start >= 0.2  # a request and its reply each waited 100 ms
    with pytest.raises(ValueError, match="delay_ms"):
        front.partition("a", "delay")


def test_blackhole_hangs_the_client_and_delivers_held_commands_after_the_heal(front: RedisFront) -> None:
    a = client(front.url_for("a"), timeout=0.3)
    a.ping()
    front.partition("a", "blackhole")
    with pytest.raises(redis.TimeoutError):
        a.incr("late")
    assert front.client().get("late") is None  # held, not run
    assert client(front.url_for("b")).incr("other") == 1
    front.heal("a")
    # TCP retransmits what the client sent: the command runs although its client gave up on it.
    eventually(lambda: front.client().get("late") == b"1", "the held INCR reached Redis after the heal")
    assert a.incr("late") == 2


def test_unknown_mode_names_the_modes(front: RedisFront) -> None:
    with pytest.raises(ValueError, match="drop-replies, delay, blackhole"):
        front.partition("a", "cut")


# -- server faults ---------------------------------------------------------------------------


def test_restart_and_crash_keep_every_acknowledged_write(front: RedisFront) -> None:
    url = front.url_for("a")
    port = front.primary.redis.port
    for n, fault in enumerate((front.restart, front.crash), start=1):
        c = client(url)
        assert c.incr("acked") == n
        c.close()
        fault(0.2)
        assert front.primary.redis.port == port  # same place, same data
        assert int(client(url).get("acked") or 0) == n


def test_failover_loses_an_acknowledged_write(tmp_path: Path) -> None:
    with RedisFront(tmp_path / "front", replica=True) as front:
        url = front.url_for("a")
        assert client(url).set("kept", "yes")
        old_port = front.primary.redis.port

        acknowledged = []
        failover = front.failover_losing_last_writes(lambda c: acknowledged.append(c.set("lost", "yes")))

        assert acknowledged == [True]  # the primary said OK
        assert failover.lost_bytes > 0 and failover.new_primary_port != old_port
        after = client(url)  # the same host URL: its proxy now leads to the promoted replica
        assert after.info("replication")["role"] == "master"
        assert after.get("kept") == b"yes"
        assert after.get("lost") is None  # acknowledged, and gone
        front.restart()  # the new primary comes back as a primary, not a replica of the dead one
        assert client(url).info("replication")["role"] == "master"
        front.add_replica()  # and it can fail over again, to a fresh replica
        front.failover_losing_last_writes(lambda c: c.set("lost again", "yes"))
        assert client(url).mget("kept", "lost again") == [b"yes", None]
        print(f"failover took {failover.took_s * 1000:.1f} ms, lost {failover.lost_bytes} bytes of stream")


def test_writes_between_hold_and_failover_are_lost_whoever_made_them(tmp_path: Path) -> None:
    with RedisFront(tmp_path / "front", replica=True) as front:
        a = client(front.url_for("a"))
        a.set("before", 1)
        front.hold_replication()
        assert a.set("during", 1)  # an attempt on host a hears OK
        front.failover()
        assert client(front.url_for("a")).mget("before", "during") == [b"1", None]


# -- clock step ------------------------------------------------------------------------------


@pytest.mark.skipif(faketime_missing() is not None, reason=str(faketime_missing()))
def test_a_forward_clock_step_ends_a_ttl_early(tmp_path: Path) -> None:
    with RedisFront(tmp_path / "front", clock=True) as front:
        c = client(front.url_for("a"))
        c.set("heartbeat", "alive", px=60_000)
        before = c.time()[0]
        assert c.get("heartbeat") == b"alive"
        assert front.step_clock(120) == 120
        assert c.time()[0] - before >= 120  # Redis' TIME moved with the step
        assert c.get("heartbeat") is None  # a 60 s TTL ended although no second went by
        c.set("lease", "held", px=60_000)
        front.step_clock(-120)
        assert c.pttl("lease") > 60_000  # stepped back: a TTL now lasts longer than asked


def test_the_clock_needs_clock_true(front: RedisFront) -> None:
    with pytest.raises(RuntimeError, match="clock=True"):
        front.step_clock(1)


# -- hosts -----------------------------------------------------------------------------------

LOOK = """
import json, os, socket, sys, psutil
seen = [p.info["cmdline"] for p in psutil.process_iter(["cmdline"]) if p.pid != os.getpid()]
print(json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                  "sees_marker": any(sys.argv[1] in (c or []) for c in seen)}))
"""
SLEEPER = "import sys, time; time.sleep(120)"


@pytest.fixture
def hosts() -> Iterator[tuple[HostLauncher, HostLauncher]]:
    with HostLauncher("host-a") as a, HostLauncher("host-b") as b:
        if not (a.isolated and b.isolated):
            pytest.skip(f"no namespaces here: {a.why_not_isolated}")
        yield a, b


def test_a_host_has_its_own_name_and_cannot_see_another_hosts_processes(
    hosts: tuple[HostLauncher, HostLauncher],
) -> None:
    a, b = hosts
    marker = "marker-of-host-b"
    sleeper = b.popen([sys.executable, "-c", SLEEPER, marker])
    try:
        eventually(lambda: marker in psutil.Process(sleeper.pid).cmdline(), "the sleeper runs")
        look = a.popen([sys.executable, "-c", LOOK, marker], stdout=subprocess.PIPE)
        on_a = json.loads(look.communicate(timeout=60)[0])
        look = b.popen([sys.executable, "-c", LOOK, marker], stdout=subprocess.PIPE)
        on_b = json.loads(look.communicate(timeout=60)[0])
    finally:
        sleeper.kill()
    assert on_a["host"] == "host-a" and on_b["host"] == "host-b" != socket.gethostname()
    assert not on_a["sees_marker"]  # a process scan on host a cannot see host b's process
    assert on_b["sees_marker"]  # ...which host b itself sees
    assert sleeper.wait() == -9  # Popen.pid is the command itself: kill() reached it


def test_killing_a_process_leaves_its_children_and_a_crash_takes_the_host(
    hosts: tuple[HostLauncher, HostLauncher],
) -> None:
    a, _ = hosts
    grandchild = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {SLEEPER!r}])"
    spawner = a.popen([sys.executable, "-c", grandchild])
    assert spawner.wait(timeout=60) == 0  # the spawner ended; its child (a spark-submit) lives on
    orphans = [p for p in a.pids() if p not in (a.init_pid, spawner.pid)]
    assert len(orphans) == 1
    orphan = psutil.Process(orphans[0])
    assert orphan.ppid() == a.init_pid  # reparented to the host's init, running on
    a.crash()
    assert not orphan.is_running()  # the host's loss took it
    with pytest.raises(RuntimeError, match="is down"):
        a.popen([sys.executable, "-c", "pass"])


def test_a_forked_child_runs_on_the_host(hosts: tuple[HostLauncher, HostLauncher]) -> None:
    a, _ = hosts
    read, write = os.pipe()
    pid = a.fork()
    if pid == 0:  # the child: report where it is, then end without running pytest's teardown
        others = [p.pid for p in psutil.process_iter() if p.pid not in (1, os.getpid())]
        facts = {"host": socket.gethostname(), "env": os.environ.get(ENV_HOST), "others": others}
        os.write(write, json.dumps(facts).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as fh:
        facts = json.loads(fh.read())
    assert os.waitpid(pid, 0)[1] == 0
    assert facts == {"host": "host-a", "env": "host-a", "others": []}  # alone on host a
    assert socket.gethostname() != "host-a"  # the parent never left this host


def test_pause_and_resume_a_process_and_its_group(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", SLEEPER], start_new_session=True)
    try:
        watched = psutil.Process(proc.pid)
        with paused(proc):
            eventually(lambda: watched.status() == psutil.STATUS_STOPPED, "stopped")
        eventually(lambda: watched.status() != psutil.STATUS_STOPPED, "running again")
        pause(proc, group=True)
        eventually(lambda: watched.status() == psutil.STATUS_STOPPED, "group stopped")
        resume(proc, group=True)
        eventually(lambda: watched.status() != psutil.STATUS_STOPPED, "group running again")
    finally:
        proc.kill()
        proc.wait()
    resume(proc)  # it ended: no error
