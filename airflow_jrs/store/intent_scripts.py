"""The intent and heartbeat scripts (:mod:`airflow_jrs.store.intent`): the reference to a running job's
spec, and the supervisor's beat beside spark-submit.

Shared codes and the fence check: :mod:`.lua`; which attempt a stop or cancel request addresses:
:data:`.stop_requests.ADDRESSING`.
"""

from __future__ import annotations

from airflow_jrs.store.lua import FENCE_CHECK
from airflow_jrs.store.stop_requests import ADDRESSING

RECORD_INTENT = (
    FENCE_CHECK
    + """
-- Record (or update) the reference to a running job's spec, under the fence.
-- KEYS[1] - lease hash      KEYS[2] - intent key
-- ARGV[1] - fence identity ("<token>:<nonce>")   ARGV[2] - intent JSON
-- return 1 written, -2 stale fence
if ARGV[1] == '' or not fence_ok(KEYS[1], ARGV[1]) then return -2 end
redis.call('SET', KEYS[2], ARGV[2])
return 1
"""
)

AMEND_INTENT = (
    FENCE_CHECK
    + """
-- Amend the running job's reference once spark-submit reports what it started (its pid, the
-- application or driver id), under the fence. Only an existing intent is amended: the result
-- script deletes the intent, and a late amendment must never bring it back.
-- KEYS[1] - lease hash      KEYS[2] - intent key
-- ARGV[1] - fence identity ("<token>:<nonce>")   ARGV[2] - intent JSON
-- return 1 amended, 0 no intent any more, -2 stale fence
if ARGV[1] == '' or not fence_ok(KEYS[1], ARGV[1]) then return -2 end
if redis.call('SET', KEYS[2], ARGV[2], 'XX') then return 1 end
return 0
"""
)

CLEAR_INTENT = (
    FENCE_CHECK
    + """
-- Drop the intent of an attempt that ends without a result (Spark failed, nothing to recover).
-- KEYS[1] - lease hash      KEYS[2] - intent key
-- ARGV[1] - fence identity ("<token>:<nonce>")
-- return 1 cleared (or nothing there), -2 stale fence
if ARGV[1] == '' or not fence_ok(KEYS[1], ARGV[1]) then return -2 end
redis.call('DEL', KEYS[2])
return 1
"""
)

BEAT = (
    FENCE_CHECK
    + ADDRESSING
    + """
-- The supervisor beside spark-submit says it (and spark-submit) still run; answers with the stop
-- or cancel request in force for its fence (REQUEST_CONTROL).
-- A heartbeat belongs to one fence: an older supervisor (its attempt lost the job) is refused.
-- Only the first beat, before spark-submit starts, creates the heartbeat, and only while the
-- attempt holds the job's lease: an attempt that lost it between its last check and the launch
-- must not start a second copy. A later beat renews, never creates: a heartbeat that expired
-- early (a clock step or failover on the Redis side, a pause longer than the TTL) may already
-- have let a successor start, so its supervisor must stop instead of bringing the key back.
-- (Later beats do not check the lease: an orphan whose task died keeps running until its
-- successor decides.)
-- KEYS[1] - heartbeat hash   KEYS[2] - lease hash   KEYS[3] - control hash (stop/cancel requests)
-- ARGV[1] - the attempt's fence identity ("<token>:<nonce>", store/fence.py): the heartbeat
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
