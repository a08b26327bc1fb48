"""What every Lua script of the store shares: its return codes and the fence check.

Every state transition of a job is exactly one script, run atomically by Redis. The scripts
live beside the noun they serve (:mod:`airflow_jrs.store.redis.result_scripts`,
:mod:`airflow_jrs.store.redis.lease_scripts`, and in :mod:`~airflow_jrs.store.intents`,
:mod:`~airflow_jrs.store.heartbeats`, :mod:`~airflow_jrs.store.stop_requests`,
:mod:`~airflow_jrs.store.recompute_requests`); each is a named constant whose header says
``KEYS[n] - ... / ARGV[n] - ... / return ...``. A prelude only one noun uses lives with it
(the results' reference and entry-move preludes, the stop requests' ``ADDRESSING``).

Each script receives all its keys through KEYS (they come from ``keys.KeySpace``) so it
works on Redis Cluster: all keys of a namespace share one hash slot. Scripts use only
commands that Redis 6.2 and 7.0 both support. Fenced scripts compare the caller's fence
identity (fencing token and owner nonce, :mod:`~airflow_jrs.store.leases.fence`) with the ``token``
and ``nonce`` fields of the job's lease *inside* the script (``fence_ok``): a holder that lost
its lease (expired while it was paused, taken over, or re-issued its token by a failover that
lost the counter's INCR) can no longer write anything.

Return codes, named here and nowhere else as numbers: the result scripts share ``OK``,
``NOOP`` (nothing to do / refused by state), ``QUARANTINED``, ``STALE_FENCE`` and
``UNRECOGNISED`` (the stored entry is not in a form the script recognises: the caller
decodes it, and quarantines it when corrupt); a few scripts add their own below.
"""

from __future__ import annotations

OK = 1
NOOP = 0
QUARANTINED = -1
STALE_FENCE = -2
UNRECOGNISED = -3
#: MARK_RESULT_AS_CLEAN: the entry was clean already (a retried cleanup).
ALREADY_CLEAN = 2
#: ACQUIRE_LEASE: first element of the reply when the lease was taken.
ACQUIRED = 1
#: FORGET_RESULT, MARK_RESULT_AS_CLEAN: the entry is not the one the caller read (nothing changed).
CHANGED = -4
#: BEAT: the heartbeat is gone (expired early: a clock step on the Redis host, a failover to a
#: replica with another clock, a pause longer than the TTL); its supervisor must stop.
HEARTBEAT_GONE = -4
#: REQUEST_CONTROL: a stop asked after a cancel of the same fence; the cancel stays in force.
CANCEL_KEPT = 2

# Prelude: the fence check. A fence argument is the holder's identity in ONE argument,
# ``"<token>:<nonce>"`` (store/leases/fence.py ``fence_arg``): the token alone can be handed out twice
# after a failover that lost its INCR, the owner nonce cannot. A bare ``"<token>"`` matches a
# lease taken without a nonce (``fence_arg`` of a plain integer); ``''`` is an unfenced write
# and passes (scripts that require a fence test for '' first).
FENCE_CHECK = """
local function fence_token(fence)
  return tonumber(string.match(fence, '^%d+')) or 0
end
local function lease_identity(lease_key)
  local held = redis.call('HMGET', lease_key, 'token', 'nonce')
  if not held[1] then return false end
  if held[2] then return held[1] .. ':' .. held[2] end
  return held[1]
end
local function fence_ok(lease_key, token)
  if token == '' then return true end
  return lease_identity(lease_key) == token
end
"""
