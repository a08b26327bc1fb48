"""The heartbeat contract: whether a job's submission still runs, on any backend.

The heartbeat of a running submission: whether what an intent refers to is still alive.

The intent (:mod:`.intents`) says a job may need recovery; the heartbeat says whether the
submission it refers to is still alive, wherever it runs.

An attempt's task process can die (SIGKILL, a lost Celery worker) while its spark-submit
lives on, on *that* host. A successor on another host cannot see that process; it can see
this heartbeat, which the supervisor beside spark-submit (:mod:`airflow_jrs.launch.supervisor`)
keeps in Redis while spark-submit lives::

    jrs:{ns}:heartbeat:<job id>  hash {fence, host, pid, child, state=running|ended, exit_code, stop}

with a TTL the supervisor renews every ``ttl/3``. A successor acts on it, not on a process
list: it waits while the heartbeat is ``running`` (or asks for a stop), and proceeds once it
is ``ended`` or gone. A supervisor that cannot renew for most of the TTL kills its
spark-submit itself before the key can expire (self-fencing), so "the heartbeat expired"
means "nothing of that attempt runs any more", across hosts and without comparing clocks
(the TTL runs on the Redis server). Like the lease, a heartbeat belongs to one fence: an
older supervisor that comes back after a successor's took over is refused and stops.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

#: How long an ended heartbeat keeps its answer (exit code) for a successor to read.
ENDED_KEEP_MS = 3_600_000


#: The exit code an ended heartbeat reports when spark-submit was never started (the
#: supervisor's ``LOST_BEFORE_START``, :mod:`airflow_jrs.launch.supervisor`).
NOT_STARTED_EXIT_CODE = 70


@dataclass(frozen=True)
class Heartbeat:
    """What the supervisor of fence ``fence`` last said."""

    fence: int
    host: str
    pid: int
    child: int | None
    state: str
    exit_code: int | None
    stop_requested: bool
    ttl_ms: int

    @property
    def running(self) -> bool:
        return self.state == "running"


class Heartbeats(abc.ABC):
    """Heartbeats of one namespace's running submissions.

    The contract; on Redis a hash per job with a TTL
    (:class:`airflow_jrs.store.redis.heartbeats.RedisHeartbeats`)."""

    namespace: str

    @abc.abstractmethod
    def beat(
        self, job_id: str, fence: int, ttl_ms: int, *, host: str, pid: int, child: int, first: bool = False
    ) -> str | None:
        """Renew; returns the request in force for ``fence`` (``"stop"``, ``"cancel"``) or ``None``.

        Raises :class:`StaleHeartbeat` when a newer fence owns the job's heartbeat (this
        supervisor's attempt lost the job), or, on the ``first`` beat (before spark-submit
        starts), when the fence no longer holds the lease; :class:`HeartbeatGone` when a later
        beat finds its heartbeat gone (it expired early: a successor may run). Only the first
        beat creates the heartbeat. With ``durability`` set the first beat returns only once the
        replicas (or the disk) have it: spark-submit starts after it, and a successor after a
        failover must see it running."""

    @abc.abstractmethod
    def end(self, job_id: str, fence: int, exit_code: int) -> bool:
        """Record how spark-submit ended; ``False`` when another fence owns the heartbeat."""

    @abc.abstractmethod
    def get(self, job_id: str) -> Heartbeat | None:
        """The job's heartbeat, or ``None`` (never started, or expired: nothing runs)."""
