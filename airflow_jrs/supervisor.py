"""The supervisor beside spark-submit: no orphan runs beside its successor, on any host.

Every submission of :class:`~airflow_jrs.operators.JrsSparkSubmitOperator` runs as::

    python -m airflow_jrs.supervisor --namespace NS --job-id J --fence F --ttl S -- spark-submit ...

on the worker host, in place of the bare spark-submit (the operator prefixes the command the
Spark provider builds; the application needs nothing of airflow-jrs). Like spark-submit
before it, it outlives a SIGKILLed task process. While spark-submit lives it keeps the job's
heartbeat (:mod:`airflow_jrs.intent`) for its fence, renewing it every ``ttl/3``; it stops
spark-submit when a successor asks; when spark-submit ends it records the exit code and
exits with it (so the provider's hook sees what it always saw).

Failure cases (see docs/recovery.md):

* **the attempt lost its lease between its last check and the launch** (a pause, a slow
  hook): the first beat, before spark-submit starts, requires the fence to hold the lease, in
  the same script that creates the heartbeat; a successor that took the lease either sees this
  heartbeat (it came first) or this supervisor sees the successor's lease (it came first), so
  no second copy starts;
* **the task process is SIGKILLed**: the supervisor and spark-submit go on; a successor waits
  for the heartbeat to end (``predecessor="wait"``, then adopts the output if the commit
  marker is there) or asks for a stop (``"stop"``), on any host;
* **the supervisor is SIGKILLed** (the operator's own kill does that): spark-submit dies with
  it (``PR_SET_PDEATHSIG``); the heartbeat expires after the TTL;
* **a partition between the supervisor and Redis**: it cannot renew, so once most of the TTL
  has passed since its last renewal it kills spark-submit itself, before the key can expire:
  when a successor sees no heartbeat, nothing of that attempt runs;
* **clock skew**: none matters; the TTL runs on the Redis server, durations here on a
  monotonic clock;
* **a host that is gone**: its heartbeat expires; the successor proceeds.

The Redis connection comes in the environment (``JRS_SUPERVISOR_REDIS``, plain client
kwargs), never on the command line.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import redis as redis_lib
from redis.backoff import NoBackoff
from redis.retry import Retry

from airflow_jrs.intent import Heartbeats, StaleHeartbeat

SUPERVISOR_ENV = "JRS_SUPERVISOR_REDIS"
#: A supervisor that could not renew for this share of the TTL kills spark-submit (self-fencing).
SELF_FENCE_SHARE = 0.7
#: Exit code when spark-submit was not started (lease lost, or Redis unreachable): fail closed.
LOST_BEFORE_START = 70
#: Seconds between SIGTERM and SIGKILL when spark-submit is asked to stop.
STOP_GRACE = 10.0
_PR_SET_PDEATHSIG = 1


def supervised_command(command: Sequence[str], *, namespace: str, job_id: str, fence: int, ttl: float) -> list[str]:
    """``command`` (spark-submit ...) run under a supervisor for ``job_id``'s attempt of ``fence``."""
    return [
        sys.executable, "-m", "airflow_jrs.supervisor", "--namespace", namespace, "--job-id", job_id,
        "--fence", str(fence), "--ttl", str(ttl), "--", *command,
    ]  # fmt: skip


def _say(message: str) -> None:
    with contextlib.suppress(OSError):  # the task process that read us may be gone
        print(f"[jrs-supervisor] {message}", file=sys.stderr, flush=True)


def _relay(source: Any) -> None:
    """Pass spark-submit's output on to the task process; once the task process is gone (a
    broken pipe), keep draining it, so spark-submit never dies of writing to nobody."""
    out: Any = sys.stdout.buffer
    for line in iter(source.readline, b""):
        if out is None:
            continue
        try:
            out.write(line)
            out.flush()
        except OSError:
            out = None


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """spark-submit dies when its supervisor dies (SIGKILL included): no orphan without a heartbeat."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _client(kwargs: dict[str, Any], ttl: float) -> Any:
    """A client whose every call ends well within the heartbeat's TTL, without retries of its own:
    the beat loop retries, and must always get back in time to fence itself."""
    kwargs = dict(kwargs)
    bounded: dict[str, Any] = {
        "socket_timeout": ttl / 6,
        "socket_connect_timeout": ttl / 6,
        "retry": Retry(NoBackoff(), 0),
    }
    if kwargs.pop("cluster", False):
        kwargs.pop("db", None)
        return redis_lib.RedisCluster(**kwargs, **bounded)
    return redis_lib.Redis(**kwargs, **bounded)


def _stop(child: subprocess.Popen[bytes], why: str, *, grace: float = STOP_GRACE) -> None:
    _say(f"stopping spark-submit (pid {child.pid}): {why}")
    if grace > 0:
        with contextlib.suppress(ProcessLookupError):
            child.terminate()
        try:
            child.wait(grace)
            return
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):
        child.kill()


def supervise(command: Sequence[str], beats: Heartbeats, job_id: str, fence: int, ttl: float) -> int:
    """Run ``command`` while keeping the heartbeat; returns its exit code (128+N for signal N)."""
    ttl_ms = int(ttl * 1000)
    host, pid = socket.gethostname(), os.getpid()
    try:  # before Spark: the attempt must still hold the job's lease, and Redis must answer
        beats.beat(job_id, fence, ttl_ms, host=host, pid=pid, child=0, first=True)
    except StaleHeartbeat:
        _say(f"job {job_id}: fence {fence} lost the lease before spark-submit started; not starting a second copy")
        return LOST_BEFORE_START
    except Exception as exc:
        _say(f"cannot keep the heartbeat of job {job_id} ({exc}); not starting spark-submit")
        return LOST_BEFORE_START
    child = subprocess.Popen(
        list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
    )
    relay = threading.Thread(target=_relay, args=(child.stdout,), name="jrs-supervisor-relay", daemon=True)
    relay.start()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda s, _f: child.send_signal(s))
    last_ok = time.monotonic()
    fence_at = last_ok + SELF_FENCE_SHARE * ttl  # no renewal by then: kill, before the key expires
    while child.poll() is None:
        if time.monotonic() >= fence_at:
            _stop(child, f"the heartbeat could not be renewed for {time.monotonic() - last_ok:.1f}s", grace=0)
            break
        try:
            stop = beats.beat(job_id, fence, ttl_ms, host=host, pid=pid, child=child.pid)
            last_ok = time.monotonic()
            fence_at = last_ok + SELF_FENCE_SHARE * ttl
            if stop:
                _stop(child, "a successor asked for it")
                break
        except StaleHeartbeat:
            _stop(child, "a newer attempt owns the job")
            break
        except Exception as exc:
            _say(f"could not renew the heartbeat (will retry): {exc}")
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(max(0.0, min(ttl / 3, fence_at - time.monotonic())))
    code = child.wait()
    relay.join(5)
    code = 128 - code if code < 0 else code
    try:
        beats.end(job_id, fence, code)
    except Exception as exc:  # the heartbeat expires by its TTL
        _say(f"could not record the end of spark-submit ({exc})")
    return code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m airflow_jrs.supervisor", description=__doc__.split("\n\n")[0])
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--fence", type=int, required=True)
    parser.add_argument("--ttl", type=float, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command after --")
    raw = os.environ.pop(SUPERVISOR_ENV, None)  # not passed on to spark-submit
    if not raw:
        parser.error(f"{SUPERVISOR_ENV} is not set: the operator passes the Redis connection there")
    client = _client(json.loads(raw), args.ttl)
    try:
        return supervise(command, Heartbeats(client, args.namespace), args.job_id, args.fence, args.ttl)
    finally:
        client.close()


if __name__ == "__main__":
    raise SystemExit(main())
