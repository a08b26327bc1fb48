"""Recompute requests on Redis: a hash per job, the first meeting written once by one Lua script.

The rules are the contract's (:mod:`airflow_jrs.store.recompute_requests`); the script below has
its KEYS/ARGV/return header. :func:`seen_async` is the triggerer's read of the same hash.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from airflow_jrs.domain.recompute import RequestSeen
from airflow_jrs.store.recompute_requests import REQUEST_TTL, RecomputeRequests
from airflow_jrs.store.redis.errors import redis_errors
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.replies import as_str

RECORD_REQUEST = """
-- Record that a request first met a job, unless it has already (the first meeting wins), in one
-- step with reading the fence counter and the job's lease holder: a lease taken after this step
-- gets a token above the counter read here, whatever any host's clock says.
-- KEYS[1] - the job's recompute-request hash   KEYS[2] - namespace fence counter
-- KEYS[3] - the job's lease hash
-- ARGV[1] - request key   ARGV[2] - TTL in s   ARGV[3] - '1' to replace a stored value the
--           caller could not read ('0' keep it)
-- return the stored value: the first meeting's, or this one's
local old = redis.call('HGET', KEYS[1], ARGV[1])
if old and ARGV[3] ~= '1' then
  redis.call('EXPIRE', KEYS[1], ARGV[2])
  return old
end
local now = redis.call('TIME')
local at_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local counter = tonumber(redis.call('GET', KEYS[2])) or 0
local holder = tonumber(redis.call('HGET', KEYS[3], 'token'))
local value = '{"at_ms":' .. string.format('%d', at_ms) .. ',"fence":' .. string.format('%d', counter)
  .. ',"in_flight":' .. (holder and string.format('%d', holder) or 'null') .. '}'
redis.call('HSET', KEYS[1], ARGV[1], value)
redis.call('EXPIRE', KEYS[1], ARGV[2])
return value
"""


def _seen(raw: Any) -> RequestSeen | None:
    """The stored mark, ``None`` when absent or unreadable (the request counts as not seen, so it
    acts: never a wrong reuse)."""
    if raw is None:
        return None
    text = as_str(raw)
    try:
        doc = json.loads(text)
        in_flight = doc.get("in_flight")
        return RequestSeen(
            at=datetime.fromtimestamp(int(doc["at_ms"]) / 1000, tz=UTC),
            fence=int(doc["fence"]),
            in_flight=None if in_flight is None else int(in_flight),
        )
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


async def seen_async(client: Any, namespace: str, job_id: str, request_key: str) -> RequestSeen | None:
    """:meth:`RecomputeRequests.seen` on a ``redis.asyncio`` client (the triggerer's)."""
    keys = KeySpace(namespace)
    with redis_errors("read the recompute request", namespace=namespace, job_id=job_id):
        return _seen(await client.hget(keys.recompute_requests(job_id), request_key))


class RedisRecomputeRequests(RecomputeRequests):
    """Recompute requests as Redis hashes."""

    def __init__(self, client: Any, namespace: str) -> None:
        self.client = client
        self.keys = KeySpace(namespace)
        self._record = client.register_script(RECORD_REQUEST)

    def first_seen(self, job_id: str, request_key: str) -> RequestSeen:
        keys = [self.keys.recompute_requests(job_id), self.keys.fence_counter, self.keys.lease(job_id)]
        with redis_errors("record the recompute request", namespace=self.keys.namespace, job_id=job_id):
            seen = _seen(self._record(keys=keys, args=[request_key, REQUEST_TTL, "0"]))
            if seen is None:  # unreadable (written by hand?): this meeting is the first; keep it
                seen = _seen(self._record(keys=keys, args=[request_key, REQUEST_TTL, "1"]))
        if seen is None:  # pragma: no cover - the script writes what _seen reads
            raise AssertionError(f"unreadable recompute request mark for job {job_id!r}")
        return seen

    def seen(self, job_id: str, request_key: str) -> RequestSeen | None:
        with redis_errors("read the recompute request", namespace=self.keys.namespace, job_id=job_id):
            return _seen(self.client.hget(self.keys.recompute_requests(job_id), request_key))
