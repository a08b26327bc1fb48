"""The store on Redis: every contract of :mod:`airflow_jrs.store` kept by one Redis backend.

The namespace that hands the nouns out (:mod:`.namespace`); each noun's Redis class with its Lua
beside it (:mod:`.results` with :mod:`.result_scripts`, :mod:`.result_reads`, :mod:`.purge`,
:mod:`.refusals`, :mod:`.read_rules`, :mod:`.batch_read`, :mod:`.changes` and the async
:mod:`.results_aio`; :mod:`.leases` with :mod:`.lease_scripts`; :mod:`.intents`,
:mod:`.heartbeats`, :mod:`.stop_requests`, :mod:`.recompute_requests`, :mod:`.recoveries`); and what
they share: how a client is built (:mod:`.clients`, :mod:`.sentinel`), how redis-py's errors
become ours and what they say (:mod:`.errors`, :mod:`.diagnosis`), where every key is spelled
(:mod:`.keys`), the scripts' codes and fence check (:mod:`.lua`), how a reply is read
(:mod:`.replies`), durable writes (:mod:`.durability`) and what the server promises
(:mod:`.server`). A second backend is a package beside this one that passes the same contract
suite (docs/architecture.md, "Where a change goes").
"""
