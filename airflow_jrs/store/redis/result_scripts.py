"""The result scripts: create, clean, forget, quarantine, release, rewrite and purge a job's entry.

Shared codes and the fence check: :mod:`~airflow_jrs.store.redis.lua`; the preludes that
read a clean reference and move an entry are the results' own, below. Scripts know nothing of
the entry encoding: what they compare or rewrite by prefix (the state member, see
:mod:`~airflow_jrs.store.results.serde`) reaches them through ARGV from serde. Every script that
moves an entry to the job's history appends its note (who, when, why: ``serde.history_note``)
with ``to_history``; the note comes through ARGV, built by serde.
"""

from __future__ import annotations

from airflow_jrs.store.redis.lua import FENCE_CHECK
from airflow_jrs.store.results import reference

# Prelude: a clean reference (format version 3, results/reference.py), recognised by its prefix.
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
-- A job's entry: its own key, else its field in the namespace's reference bucket (a clean
-- reference that does not expire, keys.reference_bucket). Returns the bytes (false: none).
local function read_entry(result_key, bucket_key, job_id)
  local v = redis.call('GET', result_key)
  if v then return v end
  return redis.call('HGET', bucket_key, job_id)
end
"""

# Prelude: moving an entry. ``to_history`` pushes the bytes to the job's history (capped), with
# their note (serde.history_note: who, when, why) appended as the last member; only to what
# looks like a JSON object: a reference gets it after a newline, as ``{"h":...}``, and other
# bytes (a released quarantine) go as they were. The entry's first bytes, its state prefix, stay
# in place. ``drop_entry`` takes the job's entry out of its slot and out of every index (what a
# forget, a quarantine and a purge all do), from its key and its reference bucket alike.
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
local function drop_entry(result_key, bucket_key, dirty_key, unsuccessful_key, index_key, job_id)
  redis.call('DEL', result_key)
  redis.call('HDEL', bucket_key, job_id)
  redis.call('SREM', dirty_key, job_id)
  redis.call('SREM', unsuccessful_key, job_id)
  redis.call('ZREM', index_key, job_id)
end
"""
)

CREATE_DIRTY_RESULT = (
    FENCE_CHECK
    + ENTRY_MOVES
    + """
-- Write a job's result as a dirty entry, once; drop the job's intent in the same step.
-- KEYS[1] - result key           KEYS[2] - dirty set       KEYS[3] - index zset
-- KEYS[4] - quarantine key       KEYS[5] - lease hash      KEYS[6] - intent key
-- KEYS[7] - history list       KEYS[8] - unsuccessful set
-- KEYS[9] - the job's reference bucket (a clean reference there is the job's entry too)
-- ARGV[1] - entry JSON (state "dirty" first)
-- ARGV[2] - job id               ARGV[3] - created time in ms
-- ARGV[4] - fence identity ("<token>:<nonce>", store/leases/fence.py), or '' for an unfenced write
-- ARGV[5] - supersede: '1' moves an existing entry to history when it is not SUCCEEDED or
--           its fingerprint differs from ARGV[6]; 'u' (unsuccessful only: a stop or cancel)
--           moves it only when it is not SUCCEEDED, whatever its fingerprint ("done is
--           done": a canceled run of new code never displaces the old code's good result);
--           '0' never replaces
-- ARGV[6] - fingerprint of the new result ('' when none)
-- ARGV[7] - history length cap  ARGV[8] - events channel   ARGV[9] - event message
-- ARGV[10] - the JSON schema versions the caller reads, comma-separated (serde.READ_VERSIONS_ARG;
--            an entry of another version is never replaced: -3). Every one keeps 'st', 'f', 'F'.
-- ARGV[11] - '1' the new result is SUCCEEDED (its job joins the dirty set: cleanup pending),
--            '0' it is not (the job joins the unsuccessful set instead, and leaves the dirty one)
-- ARGV[12] - most recent creations the index keeps ('0': all); at most 100 older ones are
--            dropped per call, so that a lowered index_limit shrinks the index without a long script
-- ARGV[13] - the fingerprint in its compact form (serde.compact_fingerprint, '' when it has
--            none): what an entry stores as 'F'; ARGV[6] is compared with 'f'
-- ARGV[14] - history note of an unsuccessful entry moved aside (reason 'rerun')
-- ARGV[15] - history note of a SUCCEEDED entry of another fingerprint (reason 'superseded')
-- An existing clean reference (store/results/reference.py) is compared by its fingerprint prefix and
-- moved to history as it is (its document stays: documents are immutable per fence).
-- return 1 created, 0 an entry exists, -1 quarantined, -2 stale fence, -3 existing entry unreadable
if not fence_ok(KEYS[5], ARGV[4]) then return -2 end
if redis.call('EXISTS', KEYS[4]) == 1 then return -1 end
local existing = read_entry(KEYS[1], KEYS[9], ARGV[2])
if existing then
  if ARGV[5] ~= '1' and ARGV[5] ~= 'u' then return 0 end
  local old_status, old_fp, new_fp
  if is_reference(existing) then
    -- a clean reference (version 3): always SUCCEEDED; it keeps the first 22 characters of
    -- 'F' ('' when the result had no fingerprint, compared with ARGV[6] as a missing 'f' is)
    local created, fence, fp = reference_fields(existing)
    if not fp then return -3 end
    old_status, old_fp, new_fp = 'SUCCEEDED', fp, ARGV[6]
    if fp ~= '' then new_fp = string.sub(ARGV[13], 1, string.len(fp)) end
  else
    local ok, doc = pcall(cjson.decode, existing)
    if not ok or type(doc) ~= 'table' then return -3 end
    local readable = false
    for version in string.gmatch(ARGV[10], '[0-9]+') do
      if doc['v'] == tonumber(version) then readable = true end
    end
    if not readable then return -3 end
    -- status is left out when SUCCEEDED; a SHA-256 hex fingerprint is stored (and compared) as 'F'
    old_status, old_fp, new_fp = doc['st'] or 'SUCCEEDED', doc['f'], ARGV[6]
    if doc['F'] ~= nil then old_fp, new_fp = doc['F'], ARGV[13] end
    if type(old_fp) ~= 'string' then old_fp = '' end
  end
  if old_status == 'SUCCEEDED' and (old_fp == new_fp or ARGV[5] == 'u') then return 0 end
  local note = ARGV[14]
  if old_status == 'SUCCEEDED' then note = ARGV[15] end
  to_history(KEYS[7], existing, note, ARGV[7])
end
-- a job's entry is its key or its field, never both: a field left beside a key (an older
-- airflow-jrs, which does not look in buckets, wrote the key) would come back once the key goes
redis.call('HDEL', KEYS[9], ARGV[2])
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
    ENTRY_MOVES
    + """
-- Turn a dirty entry clean (cleanup finished). Idempotent: an already clean entry is a no-op.
-- KEYS[1] - result key      KEYS[2] - dirty set     KEYS[3] - index zset
-- KEYS[4] - quarantine key  KEYS[5] - history list   KEYS[6] - the job's reference bucket
-- ARGV[1] - job id
-- ARGV[2] - TTL in ms for the clean entry ('0' keeps it forever, the default)
-- ARGV[3] - '1' deletes the entry instead (Flink's delete-on-commit), moving it to history
--           clean, so that a second call still sees it committed; '0' keeps it
-- ARGV[4] - events channel  ARGV[5] - event message
-- ARGV[6] - the dirty prefix with the caller's schema version (serde.DIRTY_VERSION_PREFIX):
--           an entry of another version is never rewritten by prefix (-3: the caller decodes)
-- ARGV[7] - history length cap
-- ARGV[8] - the clean state prefix (serde.CLEAN_PREFIX), as long as the dirty one
-- ARGV[9] - the dirty entry's bytes as the caller read them (a cleanup: what its work was
--            for), or '' to mark whatever entry is there. With bytes it is a compare-and-set:
--            another entry, dirty or clean, is left as it is (-4); the same entry already
--            clean (its body after the state prefix unchanged) is a no-op (2)
-- ARGV[10] - history note of the entry deleted on commit (serde.history_note; '' none)
-- ARGV[11] - the clean reference of the caller's entry (reference.encode_reference; '' when it
--            has none): an entry already committed as that reference is a no-op (2)
-- ARGV[12] - '1' commit as the reference ARGV[11] (its result document is written: the caller
--            wrote it first), '0' flip the state prefix in place (version 2, the default). A
--            reference that does not expire moves to the bucket KEYS[6] (a field costs half a
--            key); one with a TTL stays in the result key, whose TTL Redis 7.0 can expire
-- An entry that is a reference already is clean: a no-op (2) for a caller without bytes, with
-- the same entry's (its dirty bytes or the reference itself), another entry for a caller with
-- other bytes (-4); bytes that only start like a reference are unrecognised (-3: the caller's
-- read quarantines them).
-- return 1 marked clean, 2 was already clean, 0 no entry, -1 quarantined, -3 unrecognised,
--        -4 the entry is not the one the caller read (nothing changed)
local clean = ARGV[8]
local n = string.len(clean)
local expected = ARGV[9]
local function is_clean(raw)
  return string.sub(raw, 1, n) == clean
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
local v = read_entry(KEYS[1], KEYS[6], ARGV[1])
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
if is_reference(v) then
  if not reference_fields(v) then return -3 end
  if expected == '' or v == expected or v == ARGV[11] then return 2 end
  return -4
end
if expected ~= '' and v ~= expected then return -4 end
if string.sub(v, 1, string.len(ARGV[6])) ~= ARGV[6] then return -3 end
redis.call('SREM', KEYS[2], ARGV[1])
-- the dirty entry is in the key; a field beside it is stale (see CREATE_DIRTY_RESULT): dropped
redis.call('HDEL', KEYS[6], ARGV[1])
if ARGV[12] == '1' and ARGV[11] ~= '' and expected ~= '' then
  if tonumber(ARGV[2]) > 0 then
    redis.call('SET', KEYS[1], ARGV[11], 'PX', ARGV[2])
  else
    redis.call('HSET', KEYS[6], ARGV[1], ARGV[11])
    redis.call('DEL', KEYS[1])
  end
elseif ARGV[3] == '1' then
  to_history(KEYS[5], clean .. string.sub(v, n + 1), ARGV[10], ARGV[7])
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

QUARANTINE_ENTRY = (
    ENTRY_MOVES
    + """
-- Move an unreadable entry aside so it blocks its job (fail closed) without blocking others.
-- KEYS[1] - result key      KEYS[2] - quarantine key   KEYS[3] - dirty set
-- KEYS[4] - index zset      KEYS[5] - quarantined set   KEYS[6] - unsuccessful set
-- KEYS[7] - the job's reference bucket
-- ARGV[1] - job id          ARGV[2] - the raw bytes the caller could not read
-- ARGV[3] - events channel  ARGV[4] - event message
-- return 1 moved, 0 the entry changed meanwhile (nothing moved; the caller re-reads)
local v = read_entry(KEYS[1], KEYS[7], ARGV[1])
if v ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[2], v)
drop_entry(KEYS[1], KEYS[7], KEYS[3], KEYS[6], KEYS[4], ARGV[1])
redis.call('SADD', KEYS[5], ARGV[1])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
"""
)

REWRITE_ENTRY = """
-- Replace an entry by its canonical encoding (same content), if nobody changed it meanwhile.
-- Used when an entry reads fine but is not byte-canonical (e.g. edited by hand), so that the
-- prefix-based MARK_RESULT_AS_CLEAN can handle it.
-- A rewrite can change what the job reads as (an entry without its creation time gets one), and
-- a cleanup that dies before its commit leaves it as the last write: it is announced too.
-- KEYS[1] - result key
-- ARGV[1] - the raw bytes the caller read   ARGV[2] - the canonical encoding
-- ARGV[3] - events channel                  ARGV[4] - event message
-- return 1 rewritten (TTL kept), 0 the entry changed meanwhile
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
"""

RELEASE_QUARANTINE = (
    ENTRY_MOVES
    + """
-- An operator has inspected a quarantined entry: drop it so the job may run again.
-- KEYS[1] - quarantine key  KEYS[2] - quarantined set   KEYS[3] - history list
-- ARGV[1] - job id          ARGV[2] - history length cap
-- ARGV[3] - history note (reason 'released'; '' none): appended to a JSON object only
-- ARGV[4] - events channel  ARGV[5] - event message
-- return the raw bytes that were released, or false when nothing was quarantined
local v = redis.call('GET', KEYS[1])
if not v then return false end
to_history(KEYS[3], v, ARGV[3], ARGV[2])
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('PUBLISH', ARGV[4], ARGV[5])
return v
"""
)

FORGET_RESULT = (
    FENCE_CHECK
    + ENTRY_MOVES
    + """
-- Forget a job's result on purpose (so it may run again); the entry is kept in history with its
-- note. A compare-and-set on what the caller read: the entry must still be those bytes (a result
-- written since is never forgotten in its place). An attempt that recomputes also passes its
-- fence: after its lease was taken over, its late forget is refused.
-- KEYS[1] - result key      KEYS[2] - history list     KEYS[3] - dirty set
-- KEYS[4] - index zset      KEYS[5] - unsuccessful set KEYS[6] - lease hash
-- KEYS[7] - the job's reference bucket
-- ARGV[1] - job id          ARGV[2] - history length cap
-- ARGV[3] - events channel  ARGV[4] - event message
-- ARGV[5] - fencing token, or '' for a person's forget (CLI, UI: no lease)
-- ARGV[6] - the raw bytes of the entry the caller read
-- ARGV[7] - history note (serde.history_note)
-- return 1 forgotten, 0 no entry, -2 stale fence, -4 the entry is not the one the caller read
if not fence_ok(KEYS[6], ARGV[5]) then return -2 end
local v = read_entry(KEYS[1], KEYS[7], ARGV[1])
if not v then return 0 end
if v ~= ARGV[6] then return -4 end
to_history(KEYS[2], v, ARGV[7], ARGV[2])
drop_entry(KEYS[1], KEYS[7], KEYS[3], KEYS[5], KEYS[4], ARGV[1])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
"""
)

PURGE_CLEAN_ENTRY = (
    ENTRY_MOVES
    + """
-- Delete a clean entry on purpose (retention) and every per-job key it leaves, if it is still
-- the entry the caller read (and judged clean and old enough); dirty ones are never purged.
-- KEYS[1] - result key      KEYS[2] - history list     KEYS[3] - dirty set
-- KEYS[4] - index zset      KEYS[5] - unsuccessful set KEYS[6] - the job's reference bucket
-- ARGV[1] - job id          ARGV[2] - the raw bytes the caller read
-- ARGV[3] - events channel  ARGV[4] - event message
-- return 1 purged, 0 the entry changed meanwhile (kept)
if read_entry(KEYS[1], KEYS[6], ARGV[1]) ~= ARGV[2] then return 0 end
drop_entry(KEYS[1], KEYS[6], KEYS[3], KEYS[5], KEYS[4], ARGV[1])
redis.call('DEL', KEYS[2])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
"""
)

READ_ENTRIES = (
    REFERENCES
    + """
-- Many jobs' entries and quarantine markers in one call (a plan's batch read; a read, no write).
-- KEYS[1..n]    - the n jobs' result keys      KEYS[n+1..2n] - their quarantine keys
-- KEYS[2n+1..3n] - their reference buckets     ARGV[1..n] - their job ids
-- return a flat array: for job i, its result bytes (false: none; its key, else its field in
--        its bucket), then 1/0 (its quarantine key exists), then the result key's PTTL in ms
--        (-1: no expiry, -2: no key; a bucket's field never expires): a kept calendar row
--        knows when a clean entry's retention ends (plugins/calendar.py)
-- A key of another type makes GET fail: the whole read fails (closed), as the task's own read does.
local n = #ARGV
local out = {}
for i = 1, n do
  out[3 * i - 2] = read_entry(KEYS[i], KEYS[2 * n + i], ARGV[i])
  out[3 * i - 1] = redis.call('EXISTS', KEYS[n + i])
  out[3 * i] = redis.call('PTTL', KEYS[i])
end
return out
"""
)
