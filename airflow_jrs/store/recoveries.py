"""What a job's successors did about a dead predecessor: a short log per job, for people.

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

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from airflow_jrs.store.leases.fence import fence_arg
from airflow_jrs.store.redis import lua
from airflow_jrs.store.redis.errors import redis_errors
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.replies import as_str

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

RECORD_RECOVERY = (
    lua.FENCE_CHECK
    + """
-- Append one step of a recovery to the job's recovery log, under the writer's fence, stamped
-- with the server's TIME; keep the newest ARGV[3] items and expire the list ARGV[4] s after this.
-- KEYS[1] - lease hash      KEYS[2] - recovery list
-- ARGV[1] - writer's fence identity ("<token>:<nonce>")
-- ARGV[2] - the step as a JSON object with at least one member ('{"v":1,...}')
-- ARGV[3] - items kept      ARGV[4] - TTL in s
-- return 1 recorded, -2 stale fence (nothing written)
if ARGV[1] == '' or not fence_ok(KEYS[1], ARGV[1]) then return -2 end
local now = redis.call('TIME')
local at_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local item = '{"at_ms":' .. string.format('%d', at_ms) .. ',' .. string.sub(ARGV[2], 2)
redis.call('LPUSH', KEYS[2], item)
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[3]) - 1)
redis.call('EXPIRE', KEYS[2], ARGV[4])
return 1
"""
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


def _step(raw: Any) -> RecoveryStep:
    """An item as stored; one that cannot be read is shown as such (never silently dropped)."""
    text = as_str(raw)
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict) or doc.get("v") != RECOVERY_VERSION:
            raise ValueError(f"version {doc.get('v') if isinstance(doc, dict) else None!r}")
        facts = doc.get("facts")
        return RecoveryStep(
            event=str(doc["event"]),
            text=str(doc.get("text") or ""),
            fence=None if doc.get("fence") is None else int(doc["fence"]),
            predecessor=None if doc.get("predecessor") is None else int(doc["predecessor"]),
            facts=facts if isinstance(facts, dict) else {},
            at=datetime.fromtimestamp(int(doc["at_ms"]) / 1000, tz=UTC),
        )
    except (ValueError, TypeError, KeyError) as exc:
        return RecoveryStep(event="unreadable", text=f"an item this version cannot read ({exc}): {text[:200]}")


class Recoveries:
    """The recovery logs of one namespace, on a sync redis-py client."""

    def __init__(self, client: Any, namespace: str) -> None:
        self.client = client
        self.keys = KeySpace(namespace)
        self._record = client.register_script(RECORD_RECOVERY)

    def record(self, job_id: str, fence: int, step: RecoveryStep) -> bool:
        """Append ``step`` as the holder of ``fence`` (the job's lease); ``False`` when that fence
        no longer holds it (nothing written). Redis errors raise
        (:class:`~airflow_jrs.exceptions.JrsStoreUnavailableError`): the caller logs and goes on."""
        doc = {
            "v": RECOVERY_VERSION,
            "event": step.event,
            "fence": int(step.fence if step.fence is not None else fence),
            "predecessor": None if step.predecessor is None else int(step.predecessor),
            "text": step.text,
            "facts": step.facts,
        }
        keys = [self.keys.lease(job_id), self.keys.recoveries(job_id)]
        args = [fence_arg(fence), json.dumps(doc, separators=(",", ":"), default=str), RECOVERY_LIMIT, RECOVERY_TTL]
        with redis_errors("record a recovery step", namespace=self.keys.namespace, job_id=job_id):
            return int(self._record(keys=keys, args=args)) == lua.OK

    def get(self, job_id: str) -> list[RecoveryStep]:
        """The job's recovery steps, newest first (empty when it never recovered, or long ago)."""
        with redis_errors("read the recovery log", namespace=self.keys.namespace, job_id=job_id):
            raw = self.client.lrange(self.keys.recoveries(job_id), 0, RECOVERY_LIMIT - 1)
        return [_step(item) for item in raw]
