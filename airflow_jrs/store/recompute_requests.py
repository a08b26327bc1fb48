"""When a recompute request first met a job: the mark the rule of :mod:`airflow_jrs.domain.recompute` needs.

A DAG run's conf may ask to recompute its jobs, and keeps asking on every retry, clear and
backfill of that run. The request must act once: it is met by any result computed after the
request. A task's context does not carry the run's creation time, so the first attempt that
meets the request for a job records a mark here, and every later attempt of the same run reads
it back: the first writer wins, so the mark never moves.

The mark is ordered by the namespace's fencing counter (``jrs:{ns}:fence``), not by a clock:
hosts' clocks differ, and a request stamped by a fast worker clock while the result was stamped
by a slow one would recompute twice (or never). :data:`RECORD_REQUEST` reads, in the one step
that records the request, the counter (every lease taken later gets a greater token) and the
token of the job's lease if one is held (the computation in flight when the request came, whose
result is written after it). The time is kept too, from Redis ``TIME`` (the server's one
clock), for display and for rows written before fences were recorded.

Two edges, both on the side of one more recompute or one earlier reuse, never of two holders:
a counter that went back (a failover that lost an ``INCR``, see :mod:`~airflow_jrs.spark.fence`) can re-issue a
token at or below a recorded counter, so a result of that lease does not meet the request and
the job is recomputed once more; and a result written by the lease in flight just before the
request met the job (its lease not yet released) meets the request.

One hash per job (``jrs:{ns}:recompute:<job id>``, :class:`~airflow_jrs.store.redis.keys.KeySpace`), one field per
request key (the caller's name for the request: the operator uses the DAG run's id), valued
``{"at_ms": <Redis TIME>, "fence": <counter>, "in_flight": <holder token or null>}``. It expires
:data:`REQUEST_TTL` after its last write: a run re-run more than that later meets its old request
again.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from airflow_jrs.domain.recompute import RequestSeen
from airflow_jrs.store.redis.errors import redis_errors
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.replies import as_str

#: Seconds a job's request marks are kept after the last request was recorded (400 days).
REQUEST_TTL = 400 * 24 * 3600

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


class RecomputeRequests:
    """Request marks of one namespace, on a sync redis-py client."""

    def __init__(self, client: Any, namespace: str) -> None:
        self.client = client
        self.keys = KeySpace(namespace)
        self._record = client.register_script(RECORD_REQUEST)

    def first_seen(self, job_id: str, request_key: str) -> RequestSeen:
        """When ``request_key`` first met ``job_id``: now, if this is the first time (or if the
        stored mark is unreadable: it is replaced, so the request still acts once)."""
        keys = [self.keys.recompute_requests(job_id), self.keys.fence_counter, self.keys.lease(job_id)]
        with redis_errors("record the recompute request", namespace=self.keys.namespace, job_id=job_id):
            seen = _seen(self._record(keys=keys, args=[request_key, REQUEST_TTL, "0"]))
            if seen is None:  # unreadable (written by hand?): this meeting is the first; keep it
                seen = _seen(self._record(keys=keys, args=[request_key, REQUEST_TTL, "1"]))
        if seen is None:  # pragma: no cover - the script writes what _seen reads
            raise AssertionError(f"unreadable recompute request mark for job {job_id!r}")
        return seen

    def seen(self, job_id: str, request_key: str) -> RequestSeen | None:
        """When ``request_key`` first met ``job_id``, ``None`` if it has not (it is still due)."""
        with redis_errors("read the recompute request", namespace=self.keys.namespace, job_id=job_id):
            return _seen(self.client.hget(self.keys.recompute_requests(job_id), request_key))


async def seen_async(client: Any, namespace: str, job_id: str, request_key: str) -> RequestSeen | None:
    """:meth:`RecomputeRequests.seen` on a ``redis.asyncio`` client (the triggerer's)."""
    keys = KeySpace(namespace)
    with redis_errors("read the recompute request", namespace=namespace, job_id=job_id):
        return _seen(await client.hget(keys.recompute_requests(job_id), request_key))
