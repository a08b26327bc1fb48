"""Lua scripts: every state transition of a job is exactly one of these, run atomically by Redis.

Each script receives all its keys through KEYS (they come from ``keys.KeySpace``) so it
works on Redis Cluster: all keys of a namespace share one hash slot. Scripts use only
commands that Redis 6.2 and 7.0 both support. Fenced scripts compare the caller's fence
identity (fencing token and owner nonce, :mod:`~airflow_jrs.store.fence`) with the ``token``
and ``nonce`` fields of the job's lease *inside* the script (``fence_ok``): a holder that lost
its lease (expired while it was paused, taken over, or re-issued its token by a failover that
lost the counter's INCR) can no longer write anything.

Scripts know nothing of the entry encoding: what they compare or rewrite by prefix (the
state member, see :mod:`~airflow_jrs.store.serde`) reaches them through ARGV from serde.

Return codes, named here and nowhere else as numbers: the result scripts share ``OK``,
``NOOP`` (nothing to do / refused by state), ``QUARANTINED``, ``STALE_FENCE`` and
``UNRECOGNISED`` (the stored entry is not in a form the script recognises: the caller
decodes it, and quarantines it when corrupt); a few scripts add their own below.

Every script that moves an entry to the job's history appends its note (who, when, why:
``serde.history_note``) with the ``noted`` prelude; the note comes through ARGV, built by serde.
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
#: FORGET_RESULT: the entry is not the one the caller read (nothing forgotten).
CHANGED = -4

# Shared Lua prelude: the fence check. A fence argument is the holder's identity in ONE
# argument, ``"<token>:<nonce>"`` (store/fence.py ``fence_arg``): the token alone can be handed
# out twice after a failover that lost its INCR, the owner nonce cannot. A bare ``"<token>"``
# only matches a lease taken by a version without nonces (a rolling upgrade); ``''`` is an
# unfenced write and passes (scripts that require a fence test for '' first).
_FENCE_CHECK = """
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

# Shared Lua prelude: an entry on its way to history gets its note (serde.history_note: who,
# when, why) appended as its last member. Only to what looks like a JSON object: other bytes (a
# released quarantine) go as they were. The entry's first bytes, its state prefix, stay in place.
_HISTORY_NOTE = """
local function noted(raw, note)
  if note == '' or string.sub(raw, 1, 2) ~= '{"' then return raw end
  local body = string.match(raw, '^(.*)}%s*$')
  if not body then return raw end
  return body .. note .. '}'
end
"""

CREATE_DIRTY_RESULT = (
    _FENCE_CHECK
    + _HISTORY_NOTE
    + """
-- Write a job's result as a dirty entry, once; drop the job's intent in the same step.
-- KEYS[1] - result key           KEYS[2] - dirty set       KEYS[3] - index zset
-- KEYS[4] - quarantine key       KEYS[5] - lease hash      KEYS[6] - intent key
-- KEYS[7] - history list       KEYS[8] - unsuccessful set
-- ARGV[1] - entry JSON (state "dirty" first)
-- ARGV[2] - job id               ARGV[3] - created time in ms
-- ARGV[4] - fence identity ("<token>:<nonce>", store/fence.py), or '' for an unfenced write
-- ARGV[5] - supersede: '1' moves an existing entry to history when it is not SUCCEEDED or
--           its fingerprint differs from ARGV[6]; 'u' (unsuccessful only: a stop or cancel)
--           moves it only when it is not SUCCEEDED, whatever its fingerprint ("done is
--           done": a canceled run of new code never displaces the old code's good result);
--           '0' never replaces
-- ARGV[6] - fingerprint of the new result ('' when none)
-- ARGV[7] - history length cap  ARGV[8] - events channel   ARGV[9] - event message
-- ARGV[10] - highest schema version the caller understands (a newer entry is never replaced)
-- ARGV[11] - '1' the new result is SUCCEEDED (its job joins the dirty set: cleanup pending),
--            '0' it is not (the job joins the unsuccessful set instead, and leaves the dirty one)
-- ARGV[12] - most recent creations the index keeps ('0': all); at most 100 older ones are
--            dropped per call, so that a long legacy index shrinks without a long script
-- ARGV[13] - the fingerprint in its compact form (serde.compact_fingerprint, '' when it has
--            none): what a version-2 entry stores as 'F'; ARGV[6] is compared with 'f'
-- ARGV[14] - history note of an unsuccessful entry moved aside (reason 'rerun')
-- ARGV[15] - history note of a SUCCEEDED entry of another fingerprint (reason 'superseded')
-- return 1 created, 0 an entry exists, -1 quarantined, -2 stale fence, -3 existing entry unreadable
if not fence_ok(KEYS[5], ARGV[4]) then return -2 end
if redis.call('EXISTS', KEYS[4]) == 1 then return -1 end
local existing = redis.call('GET', KEYS[1])
if existing then
  if ARGV[5] ~= '1' and ARGV[5] ~= 'u' then return 0 end
  local ok, doc = pcall(cjson.decode, existing)
  if not ok or type(doc) ~= 'table' then return -3 end
  if type(doc['v']) ~= 'number' or doc['v'] > tonumber(ARGV[10]) then return -3 end
  -- version 1 nests the result; version 2 keeps status (left out: SUCCEEDED) and fingerprint
  -- (a SHA-256 hex one as 'F', compared in that form) at the top level
  local old_status, old_fp, new_fp = doc['st'] or 'SUCCEEDED', doc['f'], ARGV[6]
  if doc['v'] == 1 then
    if type(doc['result']) ~= 'table' then return -3 end
    old_status, old_fp = doc['result']['status'], doc['result']['fingerprint']
  elseif doc['F'] ~= nil then
    old_fp, new_fp = doc['F'], ARGV[13]
  end
  if type(old_fp) ~= 'string' then old_fp = '' end
  if old_status == 'SUCCEEDED' and (old_fp == new_fp or ARGV[5] == 'u') then return 0 end
  local note = ARGV[14]
  if old_status == 'SUCCEEDED' then note = ARGV[15] end
  redis.call('LPUSH', KEYS[7], noted(existing, note or ''))
  redis.call('LTRIM', KEYS[7], 0, tonumber(ARGV[7]) - 1)
end
redis.call('SET', KEYS[1], ARGV[1])
if ARGV[11] == '1' then
  redis.call('SADD', KEYS[2], ARGV[2])
  redis.call('SREM', KEYS[8], ARGV[2])
else
  redis.call('SADD', KEYS[8], ARGV[2])
  redis.call('SREM', KEYS[2], ARGV[2])
end
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[2])
local cap = tonumber(ARGV[12])
if cap > 0 then
  local excess = redis.call('ZCARD', KEYS[3]) - cap
  if excess > 0 then redis.call('ZREMRANGEBYRANK', KEYS[3], 0, math.min(excess, 100) - 1) end
end
if ARGV[4] ~= '' then redis.call('DEL', KEYS[6]) end
redis.call('PUBLISH', ARGV[8], ARGV[9])
return 1
"""
)

MARK_RESULT_AS_CLEAN = (
    _HISTORY_NOTE
    + """
-- Turn a dirty entry clean (cleanup finished). Idempotent: an already clean entry is a no-op.
-- KEYS[1] - result key      KEYS[2] - dirty set     KEYS[3] - index zset
-- KEYS[4] - quarantine key  KEYS[5] - history list
-- ARGV[1] - job id
-- ARGV[2] - TTL in ms for the clean entry ('0' keeps it forever, the default)
-- ARGV[3] - '1' deletes the entry instead (Flink's delete-on-commit), moving it to history
--           clean, so that a second call still sees it committed; '0' keeps it
-- ARGV[4] - events channel  ARGV[5] - event message
-- ARGV[6] - the dirty prefix with the caller's schema version (serde.DIRTY_VERSION_PREFIX):
--           an entry of another version is never rewritten by prefix (-3: the caller decodes)
-- ARGV[7] - history length cap
-- ARGV[8] - the clean state prefix (serde.CLEAN_PREFIX), as long as the dirty one
-- ARGV[9] - the clean state prefix of schema version 1 (serde.V1_CLEAN_PREFIX): still clean
-- ARGV[10] - the dirty entry's bytes as the caller read them (a cleanup: what its work was
--            for), or '' to mark whatever entry is there. With bytes it is a compare-and-set:
--            another entry, dirty or clean, is left as it is (-4); the same entry already
--            clean (its body after the state prefix unchanged) is a no-op (2)
-- ARGV[11] - history note of the entry deleted on commit (serde.history_note; '' none)
-- return 1 marked clean, 2 was already clean, 0 no entry, -1 quarantined, -3 unrecognised,
--        -4 the entry is not the one the caller read (nothing changed)
local clean = ARGV[8]
local n = string.len(clean)
local expected = ARGV[10]
local function is_clean(raw)
  return string.sub(raw, 1, n) == clean or string.sub(raw, 1, string.len(ARGV[9])) == ARGV[9]
end
-- the expected entry once committed: its bytes with the clean prefix; in history (delete on
-- commit) a note may follow its last member, so there it is compared up to its closing brace
local function same_entry_clean(raw, in_history)
  if expected == '' then return true end
  local committed = clean .. string.sub(expected, n + 1)
  if not in_history then return raw == committed end
  local body = string.sub(committed, 1, -2)
  return string.sub(raw, 1, string.len(body)) == body
end
local v = redis.call('GET', KEYS[1])
if not v then
  if redis.call('EXISTS', KEYS[4]) == 1 then return -1 end
  if ARGV[3] == '1' then
    local last = redis.call('LINDEX', KEYS[5], 0)
    if last and is_clean(last) then
      if same_entry_clean(last, true) then return 2 end
      return -4
    end
  end
  return 0
end
if is_clean(v) then
  if same_entry_clean(v, false) then return 2 end
  return -4
end
if expected ~= '' and v ~= expected then return -4 end
if string.sub(v, 1, string.len(ARGV[6])) ~= ARGV[6] then return -3 end
redis.call('SREM', KEYS[2], ARGV[1])
if ARGV[3] == '1' then
  redis.call('LPUSH', KEYS[5], noted(clean .. string.sub(v, n + 1), ARGV[11] or ''))
  redis.call('LTRIM', KEYS[5], 0, tonumber(ARGV[7]) - 1)
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[3], ARGV[1])
else
  redis.call('SET', KEYS[1], clean .. string.sub(v, n + 1))
  if tonumber(ARGV[2]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
end
redis.call('PUBLISH', ARGV[4], ARGV[5])
return 1
"""
)

QUARANTINE_ENTRY = """
-- Move an unreadable entry aside so it blocks its job (fail closed) without blocking others.
-- KEYS[1] - result key      KEYS[2] - quarantine key   KEYS[3] - dirty set
-- KEYS[4] - index zset      KEYS[5] - quarantined set   KEYS[6] - unsuccessful set
-- ARGV[1] - job id          ARGV[2] - the raw bytes the caller could not read
-- return 1 moved, 0 the entry changed meanwhile (nothing moved; the caller re-reads)
local v = redis.call('GET', KEYS[1])
if v ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[2], v)
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[3], ARGV[1])
redis.call('SREM', KEYS[6], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('SADD', KEYS[5], ARGV[1])
return 1
"""

REWRITE_ENTRY = """
-- Replace an entry by its canonical encoding (same content), if nobody changed it meanwhile.
-- Used when an entry reads fine but is not byte-canonical (e.g. edited by hand), so that the
-- prefix-based MARK_RESULT_AS_CLEAN can handle it.
-- KEYS[1] - result key
-- ARGV[1] - the raw bytes the caller read   ARGV[2] - the canonical encoding
-- return 1 rewritten (TTL kept), 0 the entry changed meanwhile
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
return 1
"""

RELEASE_QUARANTINE = (
    _HISTORY_NOTE
    + """
-- An operator has inspected a quarantined entry: drop it so the job may run again.
-- KEYS[1] - quarantine key  KEYS[2] - quarantined set   KEYS[3] - history list
-- ARGV[1] - job id          ARGV[2] - history length cap
-- ARGV[3] - history note (reason 'released'; '' none): appended to a JSON object only
-- return the raw bytes that were released, or false when nothing was quarantined
local v = redis.call('GET', KEYS[1])
if not v then return false end
redis.call('LPUSH', KEYS[3], noted(v, ARGV[3] or ''))
redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[2]) - 1)
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[1])
return v
"""
)

FORGET_RESULT = (
    _FENCE_CHECK
    + _HISTORY_NOTE
    + """
-- Forget a job's result on purpose (so it may run again); the entry is kept in history with its
-- note. A compare-and-set on what the caller read: the entry must still be those bytes (a result
-- written since is never forgotten in its place). An attempt that recomputes also passes its
-- fence: after its lease was taken over, its late forget is refused (issue 18, defect 3).
-- KEYS[1] - result key      KEYS[2] - history list     KEYS[3] - dirty set
-- KEYS[4] - index zset      KEYS[5] - unsuccessful set KEYS[6] - lease hash
-- ARGV[1] - job id          ARGV[2] - history length cap
-- ARGV[3] - events channel  ARGV[4] - event message
-- ARGV[5] - fencing token, or '' for a person's forget (CLI, UI: no lease)
-- ARGV[6] - the raw bytes of the entry the caller read
-- ARGV[7] - history note (serde.history_note)
-- return 1 forgotten, 0 no entry, -2 stale fence, -4 the entry is not the one the caller read
if not fence_ok(KEYS[6], ARGV[5]) then return -2 end
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
if v ~= ARGV[6] then return -4 end
redis.call('LPUSH', KEYS[2], noted(v, ARGV[7]))
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[2]) - 1)
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[3], ARGV[1])
redis.call('SREM', KEYS[5], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
"""
)

PURGE_CLEAN_ENTRY = """
-- Delete a clean entry on purpose (retention) and every per-job key it leaves, if it is still
-- the entry the caller read (and judged clean and old enough); dirty ones are never purged.
-- The job's legacy per-job fence counter is folded into the namespace counter before it goes,
-- so a job created again later can never be handed a token it had before.
-- KEYS[1] - result key      KEYS[2] - index zset       KEYS[3] - history list
-- KEYS[4] - unsuccessful set                           KEYS[5] - legacy per-job fence counter
-- KEYS[6] - namespace fence counter
-- ARGV[1] - job id          ARGV[2] - the raw bytes the caller read
-- return 1 purged, 0 the entry changed meanwhile (kept)
if redis.call('GET', KEYS[1]) ~= ARGV[2] then return 0 end
redis.call('DEL', KEYS[1], KEYS[3])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('SREM', KEYS[4], ARGV[1])
local legacy = tonumber(redis.call('GET', KEYS[5]))
if legacy then
  if legacy > (tonumber(redis.call('GET', KEYS[6])) or 0) then redis.call('SET', KEYS[6], legacy) end
  redis.call('DEL', KEYS[5])
end
return 1
"""

ACQUIRE_LEASE = """
-- Take a job's lease if nobody holds it; the fencing token comes from the namespace's counter,
-- which only grows: no token is ever handed out twice in a namespace, so a job purged and
-- created again cannot meet an old one, and no counter is left behind per job.
-- A job that still has a per-job counter (fence:<job id>, written before the namespace counter
-- existed) gets a token above it, and that counter follows, so that an attempt of the older
-- version (rolling upgrade) that INCRs it still gets a token above every token the job had.
-- The per-job counter is never created for a job that has none.
-- The caller's owner nonce (store/fence.py) is kept beside the token: fenced scripts compare
-- both. A lease that already carries the caller's nonce is the caller's own: redis-py sent this
-- command again because the reply to the first one was lost (issue 18, defect 9), so it gets
-- its token back (and a fresh TTL) instead of waiting for "another attempt" that is itself.
-- KEYS[1] - lease hash      KEYS[2] - namespace fence counter   KEYS[3] - legacy per-job counter
-- ARGV[1] - owner JSON      ARGV[2] - TTL in ms         ARGV[3] - now in ms
-- ARGV[4] - the caller's owner nonce ('' none: a caller without nonces)
-- return {1, token} acquired (or already ours), or
--        {0, holder token, holder owner JSON, holder TTL in ms, holder nonce ('' none)}
local held = redis.call('HMGET', KEYS[1], 'token', 'nonce')
if held[1] then
  if held[2] and held[2] == ARGV[4] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, held[1]}
  end
  return {0, held[1], redis.call('HGET', KEYS[1], 'owner'), redis.call('PTTL', KEYS[1]), held[2] or ''}
end
local token = redis.call('INCR', KEYS[2])
local legacy = tonumber(redis.call('GET', KEYS[3]))
if legacy then
  if legacy >= token then
    token = legacy + 1
    redis.call('SET', KEYS[2], token)
  end
  redis.call('SET', KEYS[3], token)
end
redis.call('HSET', KEYS[1], 'token', token, 'owner', ARGV[1], 'acquired_ms', ARGV[3])
if ARGV[4] and ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'nonce', ARGV[4]) end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, token}
"""

TAKE_OVER_LEASE = (
    _FENCE_CHECK
    + """
-- Take a job's lease from a holder the caller proved dead, before its TTL runs out. A
-- compare-and-set on the dead holder's token: of two successors that saw the same dead holder
-- only the first takes over (the second sees a newer token); the new token comes from the same
-- counter(s) and by the same rule as ACQUIRE_LEASE's, so every write of the dead holder is fenced
-- off from here on.
-- KEYS - exactly ACQUIRE_LEASE's: KEYS[1] - lease hash   KEYS[2] - namespace fence counter
--        KEYS[3] - legacy per-job counter (optional)
-- Like ACQUIRE_LEASE, a lease that carries the caller's nonce is its own (a retried command).
-- ARGV[1] - the dead holder's identity ("<token>:<nonce>", or its bare token without a nonce)
-- ARGV[2] - owner JSON   ARGV[3] - TTL in ms   ARGV[4] - now in ms
-- ARGV[5] - the caller's owner nonce ('' none)
-- return {1, token} taken over (or already ours), {0} no lease any more (acquire it), or
--        {0, holder token, holder owner JSON, holder TTL in ms, holder nonce} another holder has it
local held = redis.call('HMGET', KEYS[1], 'token', 'nonce')
if not held[1] then return {0} end
if not fence_ok(KEYS[1], ARGV[1]) then
  if held[2] and held[2] == ARGV[5] then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    return {1, held[1]}
  end
  return {0, held[1], redis.call('HGET', KEYS[1], 'owner'), redis.call('PTTL', KEYS[1]), held[2] or ''}
end
local token = redis.call('INCR', KEYS[2])
if KEYS[3] then
  local legacy = tonumber(redis.call('GET', KEYS[3]))
  if legacy then
    if legacy >= token then
      token = legacy + 1
      redis.call('SET', KEYS[2], token)
    end
    redis.call('SET', KEYS[3], token)
  end
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'token', token, 'owner', ARGV[2], 'acquired_ms', ARGV[4])
redis.call('HSET', KEYS[1], 'taken_from', fence_token(ARGV[1]))  -- the token people see
if ARGV[5] and ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'nonce', ARGV[5]) end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, token}
"""
)

RENEW_LEASE = (
    _FENCE_CHECK
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
    _FENCE_CHECK
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

RECORD_INTENT = (
    _FENCE_CHECK
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
    _FENCE_CHECK
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
    _FENCE_CHECK
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

#: BEAT: the heartbeat is gone (expired early: a clock step on the Redis host, a failover to a
#: replica with another clock, a pause longer than the TTL); its supervisor must stop.
HEARTBEAT_GONE = -4
#: REQUEST_CONTROL: a stop asked after a cancel of the same fence; the cancel stays in force.
CANCEL_KEPT = 2

BEAT = (
    _FENCE_CHECK
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
if redis.call('HGET', KEYS[1], 'stop') then request = 'stop' end  -- asked by an older successor
-- a request names the attempt by its token (the CLI and the UI know no nonce)
if KEYS[3] and fence_token(redis.call('HGET', KEYS[3], 'fence') or '') == fence_token(ARGV[1]) then
  request = redis.call('HGET', KEYS[3], 'kind') or request
end
return {1, request}
"""
)

REQUEST_CONTROL = (
    _FENCE_CHECK
    + """
-- Ask the running attempt of fence ARGV[1] to stop (at a batch boundary, for a stream) or to
-- cancel (at once): the one place every stop and cancel goes (CLI, UI, on_kill, a successor).
-- The supervisor of that fence reads it with its beat and acts on the host. One request per job,
-- for one fence: a request for another fence replaces it (that attempt is over); a cancel is
-- never downgraded (a stop after a cancel leaves the cancel; a cancel after a stop upgrades).
-- KEYS[1] - control hash    KEYS[2] - intent key     KEYS[3] - heartbeat hash
-- ARGV[1] - fencing token of the attempt asked (compared by token: people and successors name an
--           attempt by the token they see; the stale holder of a re-issued token stops anyway,
--           its beats are refused)                   ARGV[2] - 'stop' or 'cancel'
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
    -- by token: the CLI and the UI name an attempt by the token they show
    if fence == ARGV[1] or fence_token(fence) == fence_token(ARGV[1]) then running = true end
  end
end
local beat = redis.call('HMGET', KEYS[3], 'fence', 'state')
if beat[1] and fence_token(beat[1]) == fence_token(ARGV[1]) and beat[2] == 'running' then
  running = true
end
if not running then return {0, ''} end
if fence_token(redis.call('HGET', KEYS[1], 'fence') or '') == fence_token(ARGV[1]) then
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
