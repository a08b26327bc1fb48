"""Stop and cancel requests on Redis: a hash per job, written by one Lua script that checks the attempt runs.

The rules are the contract's (:mod:`airflow_jrs.store.stop_requests`); each script below has its
KEYS/ARGV/return header.
"""

from __future__ import annotations

import time
from typing import Any

from airflow_jrs.spark.control import KINDS  # the kinds' one definition
from airflow_jrs.store.leases.fence import Fence, fence_arg
from airflow_jrs.store.redis.errors import redis_errors
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.lua import FENCE_CHECK, NOOP
from airflow_jrs.store.redis.replies import as_str
from airflow_jrs.store.stop_requests import KEEP_MS, StopRequest, StopRequests, addresses

_FIELDS = ("fence", "kind", "by", "at_ms", "reason", "stop_timeout")


# Prelude (after FENCE_CHECK): which attempt a request addresses. Also the BEAT's
# (:mod:`.heartbeats`): the supervisor obeys exactly the requests this rule gives it.
ADDRESSING = """
-- The owner nonce of a fence identity ("<token>:<nonce>"), or nil for a bare token.
local function fence_nonce(fence)
  return string.match(fence, '^%d+:(%x+)$')
end
-- Does a request for fence ``asked`` address the attempt of fence ``held``? With a nonce on both
-- sides the whole identities must be equal: a failover that lost the counter's INCR hands one
-- token to two attempts, and the request of one (its on_kill, a successor) must not reach the
-- other. A bare token (a person's request: the CLI and the UI show the integer; or an attempt
-- of a version without nonces) matches by token.
local function addresses(asked, held)
  if asked == '' or held == '' or fence_token(asked) ~= fence_token(held) then return false end
  local a, h = fence_nonce(asked), fence_nonce(held)
  return a == nil or h == nil or a == h
end
"""


REQUEST_CONTROL = (
    FENCE_CHECK
    + ADDRESSING
    + """
-- Ask the running attempt of fence ARGV[1] to stop (at a batch boundary, for a stream) or to
-- cancel (at once): the one place every stop and cancel goes (CLI, UI, on_kill, a successor).
-- The supervisor of that fence reads it with its beat and acts on the host. One request per job,
-- for one fence: a request for another fence replaces it (that attempt is over); a cancel is
-- never downgraded (a stop after a cancel leaves the cancel; a cancel after a stop upgrades).
-- KEYS[1] - control hash    KEYS[2] - intent key     KEYS[3] - heartbeat hash
-- ARGV[1] - the fence of the attempt asked: its identity "<token>:<nonce>" (on_kill, a
--           successor: only that attempt, see ``addresses``), or a bare token (a person names
--           an attempt by the token the CLI and the UI show)
-- ARGV[2] - 'stop' or 'cancel'
-- ARGV[3] - who asks        ARGV[4] - when, in ms    ARGV[5] - why
-- ARGV[6] - how long to keep the request, in ms
-- ARGV[7] - a stop only: seconds the supervisor gives the stop before it kills ('' : no limit,
--           the stop waits for the batch boundary; a cancel can always follow)
-- return {1, kind} recorded, {2, 'cancel'} a cancel stays in force, {0, ''} no attempt of that
--        fence runs (neither its intent nor a running heartbeat of it is there)
local running = false
local raw = redis.call('GET', KEYS[2])
if raw then
  local ok, doc = pcall(cjson.decode, raw)
  if ok and type(doc) == 'table' and doc['fence'] ~= nil then
    local fence = tostring(doc['fence'])
    if type(doc['nonce']) == 'string' then fence = fence .. ':' .. doc['nonce'] end
    if addresses(ARGV[1], fence) then running = true end
  end
end
local beat = redis.call('HMGET', KEYS[3], 'fence', 'state')
if beat[1] and addresses(ARGV[1], beat[1]) and beat[2] == 'running' then
  running = true
end
if not running then return {0, ''} end
if addresses(ARGV[1], redis.call('HGET', KEYS[1], 'fence') or '') then
  if ARGV[2] == 'stop' and redis.call('HGET', KEYS[1], 'kind') == 'cancel' then return {2, 'cancel'} end
else
  redis.call('DEL', KEYS[1])
end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'kind', ARGV[2], 'by', ARGV[3], 'at_ms', ARGV[4], 'reason', ARGV[5])
if ARGV[7] and ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'stop_timeout', ARGV[7]) end
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return {1, ARGV[2]}
"""
)


class RedisStopRequests(StopRequests):
    """Stop and cancel requests as Redis hashes; the beat script reads them."""

    def __init__(self, client: Any, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self.keys = KeySpace(namespace)
        self._ask = client.register_script(REQUEST_CONTROL)

    def ask(
        self, job_id: str, fence: int, kind: str, *, by: str, reason: str = "", stop_timeout: float | None = None
    ) -> StopRequest | None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {list(KINDS)}, got {kind!r}")
        keys = [self.keys.control(job_id), self.keys.intent(job_id), self.keys.heartbeat(job_id)]
        at_ms = int(time.time() * 1000)
        with redis_errors(f"ask job {job_id!r} to {kind}", self.namespace, job_id):
            limit = "" if stop_timeout is None else repr(float(stop_timeout))
            code, _kind = self._ask(keys=keys, args=[fence_arg(fence), kind, by, at_ms, reason, KEEP_MS, limit])
        if int(code) == NOOP:
            return None
        return self.get(job_id, fence)

    def location(self, job_id: str) -> str:
        return self.keys.control(job_id)

    def get(self, job_id: str, fence: int | None = None) -> StopRequest | None:
        with redis_errors(f"read the stop request of job {job_id!r}", self.namespace, job_id):
            values = self.client.hmget(self.keys.control(job_id), _FIELDS)
        doc = {f: as_str(v) for f, v in zip(_FIELDS, values, strict=True) if v is not None}
        try:  # a token, or a fence identity <token>:<nonce>
            named = Fence.parse(doc.get("fence") or "")
        except ValueError:
            return None
        if doc.get("kind") not in KINDS or (fence is not None and not addresses(named, fence)):
            return None
        return StopRequest(
            job_id=job_id,
            fence=named,
            kind=doc["kind"],
            by=doc.get("by", "?"),
            at=int(doc.get("at_ms") or 0) / 1000,
            reason=doc.get("reason", ""),
            stop_timeout=float(doc["stop_timeout"]) if doc.get("stop_timeout") else None,
        )
