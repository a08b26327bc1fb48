"""The Redis plumbing every noun of the store shares, and nothing a noun owns.

How a client is built (:mod:`.clients`), how redis-py's errors become ours and what they say
(:mod:`.errors`, :mod:`.diagnosis`), where every key is spelled (:mod:`.keys`), the return codes
and the fence check every Lua script shares (:mod:`.lua`), how a reply is read (:mod:`.replies`),
durable writes on request (:mod:`.durability`) and what the server promises (:mod:`.server`).
Kept apart so that a noun's module reads as that noun's rules, not as Redis bookkeeping.
"""
