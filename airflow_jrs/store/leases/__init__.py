"""Leases: at most one attempt works on a job (:mod:`.lease`), its Lua (:mod:`.scripts`), and
the identity a holder writes with (:mod:`.fence`).

Imports nothing itself: the other nouns import :mod:`.fence` without loading the lease.
"""
