"""The recovery log contract: what successors did about dead attempts, per job.

What a job's successors did about a dead predecessor: a short log per job, for people.

When an attempt dies mid-flight (``kill -9``, a lost worker), the next one takes its lease over,
finds its intent, waits for or stops what it left running, and adopts its output or submits
again (:mod:`airflow_jrs.protocol.recovery`, :mod:`~airflow_jrs.protocol.takeover`). Each of those
steps was only a line in the successor's task log, so the job page, ``airflow-jrs show`` and the
JSON API could not say which try died and what became of its work. The protocol records each
step here; the views list them (:mod:`airflow_jrs.views.job`).

Nothing decides from this log: it is history for the on-call engineer, so a write that fails is
logged by the caller and never fails the attempt. Writes are fenced like every other write (the
writer must hold the job's lease: a holder that lost it records nothing), and stamped with the
Redis server's ``TIME`` (one clock for every host).

One list per job (``jrs:{ns}:recoveries:<job id>``,
:class:`~airflow_jrs.store.redis.keys.KeySpace`), newest first, each item versioned JSON::

    {"v": 1, "at_ms": <Redis TIME>, "event": "adopted", "fence": 12, "predecessor": 11,
     "text": "adopted the finished output of fence 11 (application local-1700000000000)",
     "facts": {"application_id": "local-1700000000000", ...}}

Bounded: at most :data:`RECOVERY_LIMIT` items (each write trims), and the list expires
:data:`RECOVERY_TTL` after its last write, so a job that stopped dying leaves nothing behind
(``forget`` and ``purge`` do not touch it).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

RECOVERY_VERSION = 1


#: Items kept per job (a recovery writes two to four).
RECOVERY_LIMIT = 40


#: Seconds the list is kept after its last write (30 days).
RECOVERY_TTL = 30 * 24 * 3600


#: What a successor did, in the order it happens.
TOOK_OVER, FOUND, WAITED, STOPPED, ADOPTED, RESUBMITTED, RECORDED = (
    "took_over",
    "found",
    "waited",
    "stopped",
    "adopted",
    "resubmitted",
    "recorded",
)


@dataclass(frozen=True)
class RecoveryStep:
    """One thing a successor did about a predecessor of the job.

    ``fence``: the writer's token (the successor, or the supervisor that recorded its own
    attempt's outcome); ``predecessor``: the token of the attempt it acted on."""

    event: str
    text: str
    fence: int | None = None
    predecessor: int | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    at: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at.isoformat() if self.at is not None else None,
            "event": self.event,
            "fence": self.fence,
            "predecessor": self.predecessor,
            "text": self.text,
            "facts": self.facts,
        }


class Recoveries(abc.ABC):
    """The recovery logs of one namespace, on a sync redis-py client.

    The contract; on Redis a capped list per job
    (:class:`airflow_jrs.store.redis.recoveries.RedisRecoveries`)."""

    @abc.abstractmethod
    def record(self, job_id: str, fence: int, step: RecoveryStep) -> bool:
        """Append ``step`` as the holder of ``fence`` (the job's lease); ``False`` when that fence
        no longer holds it (nothing written). Redis errors raise
        (:class:`~airflow_jrs.exceptions.JrsStoreUnavailableError`): the caller logs and goes on."""

    @abc.abstractmethod
    def get(self, job_id: str) -> list[RecoveryStep]:
        """The job's recovery steps, newest first (empty when it never recovered, or long ago)."""
