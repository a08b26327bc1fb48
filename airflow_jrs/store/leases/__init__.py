"""Leases, the contract: at most one attempt works on a job (:mod:`.lease`), and the identity a
holder writes with (:mod:`.fence`). The Redis lease and its Lua are
:mod:`airflow_jrs.store.redis.leases` and :mod:`airflow_jrs.store.redis.lease_scripts`.

Imports nothing itself: the other nouns import :mod:`.fence` without loading the lease.
"""
