"""The supervisor beside spark-submit: no orphan runs beside its successor, on any host.

Every submission of :class:`~airflow_jrs.operators.JrsSparkSubmitOperator` runs as::

    python -m airflow_jrs.launch.supervisor --namespace NS --job-id J --fence F --ttl S -- spark-submit ...

on the worker host, in place of the bare spark-submit (the operator prefixes the command the
Spark provider builds; the application needs nothing of airflow-jrs). Like spark-submit
before it, it outlives a SIGKILLed task process. While spark-submit lives it keeps the job's
heartbeat (:mod:`airflow_jrs.store.intents`) for its fence, renewing it every second (sooner
with a short TTL: :func:`beat_pause`); it relays stop and cancel requests to spark-submit; when
spark-submit ends it records the exit code and exits with it (so the provider's hook sees what it
always saw).

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
* **clock skew**: none matters; the TTL runs on the Redis server, durations here on
  ``CLOCK_BOOTTIME`` (it counts through a suspend of the host, unlike ``time.monotonic()``);
* **the heartbeat expires early** (an NTP step on the Redis host, a failover to a replica with
  another clock or without the key): only the first beat creates the heartbeat; a later one
  that finds it gone is refused, and spark-submit is killed at once (a successor may run);
* **a pause or a suspend** (SIGSTOP, a frozen VM): no beat starts that could end after the
  self-fence deadline, so a supervisor waking past it kills spark-submit before it beats;
* **a stop or cancel request** (:mod:`airflow_jrs.store.stop_requests`): read with each beat
  (every second at most) and relayed here: a stream's stop goes to its driver's control file
  (a batch boundary), a cancel or a batch job's stop terminates spark-submit; when the task is
  gone, the supervisor records STOPPED or CANCELED itself
  (:func:`~airflow_jrs.protocol.orphan.record_orphan_outcome`), except for a cluster-mode
  driver or complete output (it leaves those to recovery);
* **a host that is gone**: its heartbeat expires; the successor proceeds.

It holds nothing of Airflow's: Airflow's task supervisor ends a try only once every channel of
the task process (the requests socket on stdin, stdout, stderr, the log socket) is closed, and a
supervisor that inherited the task's stdin kept a ``kill -9``-ed try "running" until its
orphaned application ended (or Airflow's ``socket_cleanup_timeout`` ran out). So the launcher
starts it with stdin on ``/dev/null`` (:class:`~airflow_jrs.launch.submission.Supervision`), it
points its own stdin there again (a supervisor started some other way), and spark-submit gets
``/dev/null`` too; its stdout and stderr are the task process's own pipe (the task's log shows
spark-submit's output while the task lives; when the task is gone, :func:`_relay` drains it),
and no other descriptor is inherited (``close_fds``). It stays in the task's process group on
purpose: Airflow's own kill of a try (``killpg``: a timeout, "mark failed", its SIGKILL
escalation) then ends it and spark-submit with the task, instead of leaving an orphan; a group
keeps no try alive once the task process is gone.

The Redis connection comes in the environment (``JRS_SUPERVISOR_REDIS``: the plain kwargs of
:func:`airflow_jrs.store.redis.clients.connection_of`), never on the command line, and so do the task's
``[jrs]`` settings (``JRS_SUPERVISOR_SETTINGS``, JSON, resolved by
:func:`airflow_jrs.settings.resolve` as arguments; the defaults without it), so that a
result it records has the configured durability and limits; everything the
supervisor reads and writes goes through one :class:`~airflow_jrs.store.namespace.JobNamespace`
on a client that :func:`~airflow_jrs.store.redis.clients.bounded_client` builds.
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
from collections.abc import Sequence
from functools import partial
from time import sleep
from typing import Any

from airflow_jrs.exceptions import HeartbeatGone, JrsConfigError, StaleHeartbeat
from airflow_jrs.launch.stop_relay import (
    STOP_GRACE,
    Relay,
    clock,
    control_dir_of,
    say,
    stop_child,
)
from airflow_jrs.settings import BY_NAME, JrsSettings, resolve, settings_for
from airflow_jrs.store.leases.fence import Fence, fence_arg
from airflow_jrs.store.namespace import JobNamespace
from airflow_jrs.store.redis.clients import bounded_client, policy_client
from airflow_jrs.store.redis.namespace import RedisJobNamespace

SUPERVISOR_ENV = "JRS_SUPERVISOR_REDIS"
SETTINGS_ENV = "JRS_SUPERVISOR_SETTINGS"
#: A supervisor that could not renew for this share of the TTL kills spark-submit (self-fencing).
SELF_FENCE_SHARE = 0.7
#: Exit code when spark-submit was not started (lease lost, or Redis unreachable): fail closed.
LOST_BEFORE_START = 70
#: Seconds between two reads of the stop/cancel request (each is a beat; never more than ttl/3).
REQUEST_POLL = 1.0
#: Seconds between two tries of the first heartbeat while the store does not answer.
FIRST_BEAT_PAUSE = 0.5
#: The shortest pause between two beats once the last moment to start one is near.
MIN_BEAT_PAUSE = 0.05
_PR_SET_PDEATHSIG = 1


def supervised_command(
    command: Sequence[str],
    *,
    namespace: str,
    job_id: str,
    fence: int,
    ttl: float,
    control_dir: str | None = None,
    stop_timeout: float | None = None,
) -> list[str]:
    """``command`` (spark-submit ...) run under a supervisor for ``job_id``'s attempt of ``fence``
    (``control_dir``: a stream's control folder, where a stop is forwarded to its driver)."""
    stream = [] if control_dir is None else ["--control-dir", control_dir]
    if stop_timeout is not None:
        stream += ["--stop-timeout", str(stop_timeout)]
    return [
        sys.executable, "-m", "airflow_jrs.launch.supervisor", "--namespace", namespace, "--job-id", job_id,
        "--fence", fence_arg(fence), "--ttl", str(ttl), *stream, "--", *command,
    ]  # fmt: skip


_say = say  # the supervisor's voice: [jrs-supervisor] on stderr


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


def beat_pause(every: float, slack: float) -> float:
    """Seconds to wait before the next beat, ``slack`` seconds before the last moment one may start.

    Half the slack at most: a wait timed to end at that moment self-fenced a supervisor woken a
    few milliseconds late (a loaded host; with a 3 s TTL a beat every second left 0.1 s), though
    Redis answered every beat. Waking at half the slack leaves the other half for a late wake or
    a slow beat, and a beat that failed is tried again sooner, each time in half the time left."""
    return min(every, max(slack / 2, MIN_BEAT_PAUSE))


def detach_stdin() -> None:
    """Point stdin at ``/dev/null``: an inherited stdin may be Airflow's requests socket of the task
    process, which must close when the task dies (see the module docstring). Nothing here reads it."""
    try:
        null = os.open(os.devnull, os.O_RDONLY)
    except OSError:
        return
    try:
        if null != 0:
            os.dup2(null, 0)
    finally:
        if null != 0:
            os.close(null)


def _die_with_parent(parent: int) -> None:  # pragma: no cover - runs in the child between fork and exec
    """spark-submit dies when its supervisor dies (SIGKILL included): no orphan without a heartbeat.

    ``parent`` is the supervisor's pid, read before the fork. A supervisor killed between the
    fork and this ``prctl`` is already gone, so the death signal would never come and
    spark-submit would run on with no heartbeat beside a successor (a fault trial found it: seed
    1, trial 283): the child checks that its parent is still the supervisor, and does not
    start when it is not."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(LOST_BEFORE_START)


def supervisor_settings(raw: str | None, namespace: str, ttl: float) -> JrsSettings:
    """The task's ``[jrs]`` settings from ``raw`` (JSON of :class:`~airflow_jrs.settings.JrsSettings`),
    or the defaults when the launcher handed none (a result recorded then has no durability wait).

    What the launcher hands in is resolved again as arguments (:func:`~airflow_jrs.settings.resolve`):
    the task resolved it already, so a valid value comes out as it went in, but the environment is
    not the task's to vouch for (another version of the launcher, a supervisor started by hand), and
    a value of the wrong type or out of range must be refused by the one rule that names it, not
    passed on to the store as it came.

    :raises JrsConfigError: ``raw`` is not a JSON object of ``[jrs]`` settings, or a value is invalid
    :raises ValueError: the settings are another namespace's
    """
    if not raw:
        return settings_for(namespace, output_root="", spec_root="", lease_ttl=max(ttl, 1.0))
    try:
        given = json.loads(raw)
    except ValueError as exc:
        raise JrsConfigError(f"not JSON ({exc})") from None
    if not isinstance(given, dict):
        raise JrsConfigError(f"a JSON object of [jrs] settings is expected, got {type(given).__name__}")
    # the connection the task named is among what the launcher hands in; else the table's default, as before
    settings = resolve(conn_id=BY_NAME["conn_id"].default, arguments=given)
    if settings.namespace != namespace:
        raise ValueError(f"namespace {settings.namespace!r}, not --namespace {namespace!r}: not this task's")
    return settings


def _jobs(connection: dict[str, Any], settings: JrsSettings, ttl: float) -> RedisJobNamespace:
    """On a client whose every socket operation ends within ``ttl/6``, without retries of its
    own: the beat loop retries, and must always get back in time to fence itself."""
    return RedisJobNamespace(bounded_client(connection, ttl / 6), settings, connection)


def _settled(jobs: JobNamespace) -> JobNamespace:
    """The namespace on a client with the ``[jrs]`` timeouts and retries (close it after use):
    spark-submit has ended, so no beat must get back in time, and a durable write's wait
    (``durability_timeout``) must fit within the client's read timeout."""
    if not isinstance(jobs, RedisJobNamespace) or jobs.connection is None:
        return jobs.fresh()
    return RedisJobNamespace(policy_client(jobs.connection, jobs.settings), jobs.settings, jobs.connection)


def supervise(
    command: Sequence[str],
    jobs: JobNamespace,
    job_id: str,
    fence: int,
    ttl: float,
    *,
    control_dir: str | None = None,
    stop_timeout: float | None = None,
    grace: float = STOP_GRACE,
) -> int:
    """Run ``command`` while keeping the heartbeat; returns its exit code (128+N for signal N)."""
    ttl_ms = int(ttl * 1000)
    beats = jobs.heartbeats
    host, pid, parent = socket.gethostname(), os.getpid(), os.getppid()
    # Before Spark: the attempt must still hold the job's lease, and Redis must answer. Nothing
    # runs yet, so a store that does not answer (a failover: a new primary within seconds) is
    # asked again for up to ttl/3; a lost lease is final at once.
    first_until, said = clock() + ttl / 3, False
    while True:
        try:
            beats.beat(job_id, fence, ttl_ms, host=host, pid=pid, child=0, first=True)
            break
        except StaleHeartbeat:
            _say(f"job {job_id}: fence {fence} lost the lease before spark-submit started; not starting a second copy")
            return LOST_BEFORE_START
        except Exception as exc:
            if clock() + FIRST_BEAT_PAUSE >= first_until:
                _say(f"cannot keep the heartbeat of job {job_id} ({exc}); not starting spark-submit")
                return LOST_BEFORE_START
            if not said:
                _say(f"could not write the first heartbeat of job {job_id} (will retry for {ttl / 3:.0f} s): {exc}")
                said = True
            sleep(FIRST_BEAT_PAUSE)
    child = subprocess.Popen(
        list(command),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=partial(_die_with_parent, pid),
    )
    relay_output = threading.Thread(target=_relay, args=(child.stdout,), name="jrs-supervisor-relay", daemon=True)
    relay_output.start()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda s, _f: child.send_signal(s))
    if control_dir is None:
        control_dir = control_dir_of(jobs, job_id, fence)
    relay = Relay(jobs.stop_requests, job_id, fence, control_dir, stop_timeout, grace)
    # One beat is two socket operations at most (connect, then the script), each bounded by
    # ttl/6 (:func:`_jobs`): a beat is only started when it ends before the self-fence
    # deadline, so a beat that would succeed after the key expired never starts.
    beat_bound, every = ttl / 3, min(ttl / 3, REQUEST_POLL)
    fence_at = clock() + SELF_FENCE_SHARE * ttl  # no renewal by then: kill, before the key expires
    while child.poll() is None:
        if clock() + beat_bound > fence_at:
            stop_child(child, "the heartbeat could not be renewed in time (self-fencing before it expires)", grace=0)
            break
        kind = None
        try:
            kind = beats.beat(job_id, fence, ttl_ms, host=host, pid=pid, child=child.pid)
            fence_at = clock() + SELF_FENCE_SHARE * ttl
        except HeartbeatGone:
            stop_child(
                child, "its heartbeat expired early (a clock step or failover on the Redis side, a pause)", grace=0
            )
            break
        except StaleHeartbeat:
            stop_child(child, "a newer attempt owns the job", grace=min(grace, max(0.0, fence_at - clock())))
            break
        except Exception as exc:
            _say(f"could not renew the heartbeat (will retry): {exc}")
        if relay.act(kind, child, budget=max(0.0, fence_at - clock())):
            break
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(beat_pause(every, fence_at - beat_bound - clock()))
    code = child.wait()
    relay_output.join(5)
    code = 128 - code if code < 0 else code
    if relay.request is not None and os.getppid() != parent:  # the task is gone: nobody else records
        from airflow_jrs.launch.deploy_modes.registry import names_cluster_driver
        from airflow_jrs.protocol.orphan import record_orphan_outcome

        settled = _settled(jobs)
        try:
            record_orphan_outcome(settled, job_id, fence, relay.request, control_dir, ttl, code,
                                  cluster_driver=names_cluster_driver, say=_say)  # fmt: skip
        finally:
            settled.close()
    try:
        beats.end(job_id, fence, code)
    except Exception as exc:  # the heartbeat expires by its TTL
        _say(f"could not record the end of spark-submit ({exc})")
    return code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m airflow_jrs.launch.supervisor", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--fence", type=Fence.parse, required=True, help="<token> or <token>:<nonce>")
    parser.add_argument("--ttl", type=float, required=True)
    parser.add_argument("--control-dir", help="a stream's control folder: stops are forwarded to its driver")
    parser.add_argument("--stop-timeout", type=float, help="seconds a stream's stop may take (default: as asked)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    detach_stdin()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command after --")
    raw = os.environ.pop(SUPERVISOR_ENV, None)  # not passed on to spark-submit
    if not raw:
        parser.error(f"{SUPERVISOR_ENV} is not set: the operator passes the Redis connection there")
    try:
        settings = supervisor_settings(os.environ.pop(SETTINGS_ENV, None), args.namespace, args.ttl)
    except (TypeError, ValueError) as exc:
        parser.error(f"{SETTINGS_ENV} is not the task's [jrs] settings ({exc})")
    jobs = _jobs(json.loads(raw), settings, args.ttl)
    try:
        return supervise(
            command,
            jobs,
            args.job_id,
            args.fence,
            args.ttl,
            control_dir=args.control_dir,
            stop_timeout=args.stop_timeout,
        )
    finally:
        jobs.close()


if __name__ == "__main__":
    raise SystemExit(main())
