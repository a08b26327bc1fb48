"""The recovery log on Redis: a capped list per job, appended under the fence by one Lua script.

The rules are the contract's (:mod:`airflow_jrs.store.recoveries`); the script below has its
KEYS/ARGV/return header.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from airflow_jrs.store.leases.fence import fence_arg
from airflow_jrs.store.recoveries import RECOVERY_LIMIT, RECOVERY_TTL, RECOVERY_VERSION, Recoveries, RecoveryStep
from airflow_jrs.store.redis import lua
from airflow_jrs.store.redis.errors import redis_errors
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.replies import as_str

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


class RedisRecoveries(Recoveries):
    """The recovery log as capped Redis lists."""

    def __init__(self, client: Any, namespace: str) -> None:
        self.client = client
        self.keys = KeySpace(namespace)
        self._record = client.register_script(RECORD_RECOVERY)

    def record(self, job_id: str, fence: int, step: RecoveryStep) -> bool:
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
        with redis_errors("read the recovery log", namespace=self.keys.namespace, job_id=job_id):
            raw = self.client.lrange(self.keys.recoveries(job_id), 0, RECOVERY_LIMIT - 1)
        return [_step(item) for item in raw]
