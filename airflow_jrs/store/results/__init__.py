"""Job results: the contract (:mod:`.base`), the Redis store's writes (:mod:`.redis`), reads
(:mod:`.reads`) and purge (:mod:`.purge`), the async read side (:mod:`.aio`), their Lua
(:mod:`.scripts`), the entry's encoding (:mod:`.serde`, :mod:`.reference`) and read rules
(:mod:`.read_rules`), what a refused write raises (:mod:`.refusals`), result documents
(:mod:`.documents`) and batched reads (:mod:`.batch_read`).

The public names are re-exported by :mod:`airflow_jrs.store`; this package imports nothing
itself, so that importing one of its modules stays cheap.
"""
