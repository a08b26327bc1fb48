"""What every Lua script of the store shares: its return codes and its preludes.

Every state transition of a job is exactly one script, run atomically by Redis. The scripts
live beside the noun they serve (:mod:`.result_scripts`, :mod:`.lease_scripts`,
:mod:`.intent_scripts`, :mod:`.stop_requests`, :mod:`.requests`); each is a named constant
whose header says ``KEYS[n] - ... / ARGV[n] - ... / return ...``.

Each script receives all its keys through KEYS (they come from ``keys.KeySpace``) so it
works on Redis Cluster: all keys of a namespace share one hash slot. Scripts use only
commands that Redis 6.2 and 7.0 both support. Fenced scripts compare the caller's fence
identity (fencing token and owner nonce, :mod:`~airflow_jrs.store.fence`) with the ``token``
and ``nonce`` fields of the job's lease *inside* the script (``fence_ok``): a holder that lost
its lease (expired while it was paused, taken over, or re-issued its token by a failover that
lost the counter's INCR) can no longer write anything.

Return codes, named here and nowhere else as numbers: the result scripts share ``OK``,
``NOOP`` (nothing to do / refused by state), ``QUARANTINED``, ``STALE_FENCE`` and
``UNRECOGNISED`` (the stored entry is not in a form the script recognises: the caller
decodes it, and quarantines it when corrupt); a few scripts add their own below.
"""

from __future__ import annotations

from airflow_jrs.store import reference

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
# ``"<token>:<nonce>"`` (store/fence.py ``fence_arg``): the token alone can be handed out twice
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

# Prelude: a clean reference (format version 3, store/reference.py), recognised by its prefix.
# ``reference_fields`` returns its creation time, fence and fingerprint fields (strings, base36
# and base64url as written), or nil when ``raw`` is no *valid* reference: bytes that only start
# like one are corrupt, and a script must not act on them as a result (the caller's read
# quarantines them, as :func:`.reference.decode_reference` refuses them).
REFERENCES = f"""
local REFERENCE_PREFIX = '{reference.PREFIX}'
local REFERENCE_NOTE_SEPARATOR = '\\n'
local REFERENCE_FINGERPRINT_CHARS = {reference.FINGERPRINT_CHARS}
local function is_reference(raw)
  return string.sub(raw, 1, string.len(REFERENCE_PREFIX)) == REFERENCE_PREFIX
end
local function reference_fields(raw)
  if not is_reference(raw) then return nil end
  local created, fence, fp = string.match(
    string.sub(raw, string.len(REFERENCE_PREFIX) + 1), '^([0-9a-z]+);([0-9a-z]*);([A-Za-z0-9_-]*)$')
  if not created or (fp ~= '' and string.len(fp) ~= REFERENCE_FINGERPRINT_CHARS) then return nil end
  return created, fence, fp
end
"""

# Prelude: moving an entry. ``to_history`` pushes the bytes to the job's history (capped), with
# their note (serde.history_note: who, when, why) appended as the last member; only to what
# looks like a JSON object: a reference gets it after a newline, as ``{"h":...}``, and other
# bytes (a released quarantine) go as they were. The entry's first bytes, its state prefix, stay
# in place. ``drop_entry`` takes the job's entry out of its slot and out of every index (what a
# forget, a quarantine and a purge all do).
ENTRY_MOVES = (
    REFERENCES
    + """
local function noted(raw, note)
  if note ~= '' and is_reference(raw) then
    return raw .. REFERENCE_NOTE_SEPARATOR .. '{' .. string.sub(note, 2) .. '}'
  end
  if note == '' or string.sub(raw, 1, 2) ~= '{"' then return raw end
  local body = string.match(raw, '^(.*)}%s*$')
  if not body then return raw end
  return body .. note .. '}'
end
local function to_history(history_key, raw, note, cap)
  redis.call('LPUSH', history_key, noted(raw, note or ''))
  redis.call('LTRIM', history_key, 0, tonumber(cap) - 1)
end
local function drop_entry(result_key, dirty_key, unsuccessful_key, index_key, job_id)
  redis.call('DEL', result_key)
  redis.call('SREM', dirty_key, job_id)
  redis.call('SREM', unsuccessful_key, job_id)
  redis.call('ZREM', index_key, job_id)
end
"""
)
