"""Job results, the contract: the state machine and its methods (:mod:`.base`), the entry's
encoding (:mod:`.serde`, :mod:`.reference`) and result documents (:mod:`.documents`). None of it
names a backend: the Redis store (its writes, reads, purge, async and batched reads, Lua and
refusals) is in :mod:`airflow_jrs.store.redis`.

The public names are re-exported by :mod:`airflow_jrs.store`; this package imports nothing
itself, so that importing one of its modules stays cheap.
"""
