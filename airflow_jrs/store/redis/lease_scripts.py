"""The lease scripts: acquire, take over, renew and release a job's lease (:mod:`airflow_jrs.store.leases.lease`).

Shared codes and the fence check: :mod:`~airflow_jrs.store.redis.lua`.
"""

from __future__ import annotations

from airflow_jrs.store.redis.lua import FENCE_CHECK

# Prelude of the two scripts that hand out a lease. ``held_reply``: the lease is held; a lease
# that carries the caller's nonce is the caller's own (redis-py sent the command again because
# the reply to the first one was lost: a retried acquire), so it gets its token back and a fresh
# TTL instead of waiting for "another attempt" that is itself; any other holder is named.
# ``grant``: a new lease for the caller, with the next token of the namespace's counter.
_HAND_OUT = """
local function held_reply(lease_key, held, nonce, ttl)
  if held[2] and held[2] == nonce then
    redis.call('PEXPIRE', lease_key, ttl)
    return {1, held[1]}
  end
  return {0, held[1], redis.call('HGET', lease_key, 'owner'), redis.call('PTTL', lease_key), held[2] or ''}
end
local function grant(lease_key, counter_key, owner, ttl, now, nonce)
  local token = redis.call('INCR', counter_key)
  redis.call('DEL', lease_key)
  -- ttl_ms: the TTL every renewal sets again, so a reader tells how long ago the holder renewed
  -- (ttl_ms - PTTL) without a clock of its own; a lease taken before it was kept has none
  redis.call('HSET', lease_key, 'token', token, 'owner', owner, 'acquired_ms', now, 'ttl_ms', ttl)
  if nonce and nonce ~= '' then redis.call('HSET', lease_key, 'nonce', nonce) end
  redis.call('PEXPIRE', lease_key, ttl)
  return token
end
"""
ACQUIRE_LEASE = (
    _HAND_OUT
    + """
-- Take a job's lease if nobody holds it; the fencing token comes from the namespace's counter,
-- which only grows: no token is ever handed out twice in a namespace, so a job purged and
-- created again cannot meet an old one, and no counter is left behind per job.
-- The caller's owner nonce (store/leases/fence.py) is kept beside the token: fenced scripts compare
-- both. A lease that already carries the caller's nonce is the caller's own (``held_reply``).
-- KEYS[1] - lease hash      KEYS[2] - namespace fence counter
-- ARGV[1] - owner JSON      ARGV[2] - TTL in ms         ARGV[3] - now in ms
-- ARGV[4] - the caller's owner nonce ('' none: a caller without nonces)
-- return {1, token} acquired (or already ours), or
--        {0, holder token, holder owner JSON, holder TTL in ms, holder nonce ('' none)}
local held = redis.call('HMGET', KEYS[1], 'token', 'nonce')
if held[1] then return held_reply(KEYS[1], held, ARGV[4], ARGV[2]) end
return {1, grant(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4])}
"""
)

TAKE_OVER_LEASE = (
    FENCE_CHECK
    + _HAND_OUT
    + """
-- Take a job's lease from a holder the caller proved dead, before its TTL runs out. A
-- compare-and-set on the dead holder's token: of two successors that saw the same dead holder
-- only the first takes over (the second sees a newer token); the new token comes from the same
-- counter as ACQUIRE_LEASE's, so every write of the dead holder is fenced off from here on.
-- KEYS - exactly ACQUIRE_LEASE's: KEYS[1] - lease hash   KEYS[2] - namespace fence counter
-- Like ACQUIRE_LEASE, a lease that carries the caller's nonce is its own (a retried command).
-- ARGV[1] - the dead holder's identity ("<token>:<nonce>", or its bare token without a nonce)
-- ARGV[2] - owner JSON   ARGV[3] - TTL in ms   ARGV[4] - now in ms
-- ARGV[5] - the caller's owner nonce ('' none)
-- return {1, token} taken over (or already ours), {0} no lease any more (acquire it), or
--        {0, holder token, holder owner JSON, holder TTL in ms, holder nonce} another holder has it
local held = redis.call('HMGET', KEYS[1], 'token', 'nonce')
if not held[1] then return {0} end
if not fence_ok(KEYS[1], ARGV[1]) then return held_reply(KEYS[1], held, ARGV[5], ARGV[3]) end
local token = grant(KEYS[1], KEYS[2], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
redis.call('HSET', KEYS[1], 'taken_from', fence_token(ARGV[1]))  -- the token people see
return {1, token}
"""
)

RENEW_LEASE = (
    FENCE_CHECK
    + """
-- Extend the lease if, and only if, the caller still holds it (token and owner nonce).
-- KEYS[1] - lease hash
-- ARGV[1] - the holder's identity ("<token>:<nonce>")   ARGV[2] - TTL in ms
-- return 1 renewed, 0 lost (expired, or held by another holder, even one with the same token)
if ARGV[1] ~= '' and fence_ok(KEYS[1], ARGV[1]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""
)

RELEASE_LEASE = (
    FENCE_CHECK
    + """
-- Give the lease back; a stale holder cannot release a newer holder's lease.
-- KEYS[1] - lease hash
-- ARGV[1] - the holder's identity ("<token>:<nonce>")
-- return 1 released, 0 not held by this holder
if ARGV[1] ~= '' and fence_ok(KEYS[1], ARGV[1]) then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
"""
)
