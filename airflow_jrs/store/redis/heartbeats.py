"""Heartbeats on Redis: a hash per running job, renewed under the fence by one Lua script.

The rules are the contract's (:mod:`airflow_jrs.store.heartbeats`); each script below has its
KEYS/ARGV/return header.
"""

from __future__ import annotations

from typing import Any

import redis as redis_lib

from airflow_jrs.exceptions import HeartbeatGone, StaleHeartbeat
from airflow_jrs.store.heartbeats import ENDED_KEEP_MS, NOT_STARTED_EXIT_CODE, Heartbeat, Heartbeats
from airflow_jrs.store.leases.fence import Fence, fence_arg
from airflow_jrs.store.redis import lua
from airflow_jrs.store.redis.durability import DurableWrites
from airflow_jrs.store.redis.errors import redis_errors
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.lua import FENCE_CHECK
from airflow_jrs.store.redis.replies import as_str
from airflow_jrs.store.redis.stop_requests import ADDRESSING

BEAT = (
    FENCE_CHECK
    + ADDRESSING
    + """
-- The supervisor beside spark-submit says it (and spark-submit) still run; answers with the stop
-- or cancel request in force for its fence (REQUEST_CONTROL, stop_requests.py).
-- A heartbeat belongs to one fence: an older supervisor (its attempt lost the job) is refused.
-- Only the first beat, before spark-submit starts, creates the heartbeat, and only while the
-- attempt holds the job's lease: an attempt that lost it between its last check and the launch
-- must not start a second copy. A later beat renews, never creates: a heartbeat that expired
-- early (a clock step or failover on the Redis side, a pause longer than the TTL) may already
-- have let a successor start, so its supervisor must stop instead of bringing the key back.
-- (Later beats do not check the lease: an orphan whose task died keeps running until its
-- successor decides.)
-- KEYS[1] - heartbeat hash   KEYS[2] - lease hash   KEYS[3] - control hash (stop/cancel requests)
-- ARGV[1] - the attempt's fence identity ("<token>:<nonce>", store/leases/fence.py): the heartbeat
--           keeps it whole, so two attempts handed the same token still own different heartbeats
-- ARGV[2] - TTL in ms    ARGV[3] - host    ARGV[4] - supervisor pid
-- ARGV[5] - spark-submit pid (0: not started yet)   ARGV[6] - '1' on the first beat
-- return {1, request ('' none, 'stop', 'cancel')} beating; {-2, ''} stale: a newer fence owns
--        the heartbeat, or (first beat) the lease is not held by this fence; {-4, ''} (later
--        beat) the heartbeat of this fence is gone or ended
local held = redis.call('HGET', KEYS[1], 'fence')
if ARGV[6] == '1' then
  if not fence_ok(KEYS[2], ARGV[1]) then return {-2, ''} end
  if held and fence_token(held) > fence_token(ARGV[1]) then return {-2, ''} end
  if held ~= ARGV[1] then redis.call('DEL', KEYS[1]) end
else
  if not held then return {-4, ''} end
  if held ~= ARGV[1] then return {-2, ''} end
  if redis.call('HGET', KEYS[1], 'state') ~= 'running' then return {-4, ''} end
end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'host', ARGV[3], 'pid', ARGV[4], 'child', ARGV[5], 'state', 'running')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local request = ''
-- a request with a nonce is for that attempt only (another one may hold the same token after a
-- failover); a bare token, what people name, for whichever attempt holds it (``addresses``)
if KEYS[3] and addresses(redis.call('HGET', KEYS[3], 'fence') or '', ARGV[1]) then
  request = redis.call('HGET', KEYS[3], 'kind') or request
end
return {1, request}
"""
)


END_HEARTBEAT = """
-- The supervisor's spark-submit ended: say how, and keep that answer a while for the successor.
-- KEYS[1] - heartbeat hash
-- ARGV[1] - fence identity ("<token>:<nonce>")    ARGV[2] - exit code
-- ARGV[3] - how long to keep it, in ms
-- return 1 recorded, 0 the heartbeat belongs to another fence (nothing written)
local held = redis.call('HGET', KEYS[1], 'fence')
if held and held ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'state', 'ended', 'exit_code', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""


_FIELDS = ("fence", "host", "pid", "child", "state", "exit_code", "stop")


class RedisHeartbeats(Heartbeats):
    """Heartbeats as Redis hashes with a TTL; a beat also answers the stop request in force."""

    def __init__(self, client: redis_lib.Redis, namespace: str, *, durable: DurableWrites | None = None) -> None:
        self.client = client
        self.namespace = namespace
        self.keys = KeySpace(namespace)
        #: ``durability`` for the first beat (``None``: acknowledged in memory)
        self.durable = durable
        self._beat = client.register_script(BEAT)
        self._end = client.register_script(END_HEARTBEAT)

    def beat(
        self, job_id: str, fence: int, ttl_ms: int, *, host: str, pid: int, child: int, first: bool = False
    ) -> str | None:
        keys = [self.keys.heartbeat(job_id), self.keys.lease(job_id), self.keys.control(job_id)]
        with redis_errors(f"renew the heartbeat of job {job_id!r}", self.namespace, job_id):
            args: list[str | int] = [fence_arg(fence), ttl_ms, host, pid, child, "1" if first else "0"]
            if self.durable is None or not first:
                code, request = self._beat(keys=keys, args=args)
            else:
                code, request = self.durable.run(
                    self.client, self._beat, keys=keys, args=args, written=lambda reply: int(reply[0]) == lua.OK,
                    what=f"the first heartbeat of job {job_id!r}", namespace=self.namespace, job_id=job_id,
                    then="spark-submit was not started (the heartbeat now says so); the task's retry starts it once "
                    "the store is healthy",
                    undo=lambda _reply: self._end(
                        keys=[keys[0]], args=[fence_arg(fence), NOT_STARTED_EXIT_CODE, ENDED_KEEP_MS]
                    ),
                )  # fmt: skip
        if int(code) == lua.STALE_FENCE:
            raise StaleHeartbeat(job_id, fence)
        if int(code) == lua.HEARTBEAT_GONE:
            raise HeartbeatGone(job_id, fence)
        return as_str(request) or None

    def end(self, job_id: str, fence: int, exit_code: int) -> bool:
        with redis_errors(f"record the end of job {job_id!r}'s submission", self.namespace, job_id):
            args: list[str | int] = [fence_arg(fence), exit_code, ENDED_KEEP_MS]
            return bool(self._end(keys=[self.keys.heartbeat(job_id)], args=args))

    def get(self, job_id: str) -> Heartbeat | None:
        key = self.keys.heartbeat(job_id)
        with redis_errors(f"read the heartbeat of job {job_id!r}", self.namespace, job_id):
            pipe = self.client.pipeline(transaction=False)
            pipe.hmget(key, _FIELDS)  # HMGET, not HGETALL: the documented ACL rule grants it
            pipe.pttl(key)
            values, ttl_ms = pipe.execute()
        doc: dict[str, Any] = {f: as_str(v) for f, v in zip(_FIELDS, values, strict=True) if v is not None}
        if not doc:
            return None
        return Heartbeat(
            fence=Fence.parse(doc.get("fence", "0")),
            host=doc.get("host", "?"),
            pid=int(doc.get("pid", 0)),
            child=int(doc["child"]) if doc.get("child") else None,
            state=doc.get("state", "running"),
            exit_code=int(doc["exit_code"]) if doc.get("exit_code") not in (None, "") else None,
            stop_requested=bool(doc.get("stop")),
            ttl_ms=int(ttl_ms),
        )
