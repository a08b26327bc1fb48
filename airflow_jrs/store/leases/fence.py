"""A lease's identity on the script side: the owner nonce a lease draws, and the one argument a
fenced script receives.

What a fence *is* (the token, the owner nonce, why a failover makes both necessary, and the rule
``==`` follows) lives in :mod:`airflow_jrs.spark.fence`, because a PySpark driver needs it
without the store; :class:`Fence` and :func:`nonce_of` are re-exported here for the store's
modules, so there is one definition. Every fenced script compares identities (``fence_ok`` in
:mod:`~airflow_jrs.store.redis.lua`), and what it receives is :func:`fence_arg`:
``"<token>:<nonce>"`` in ONE argument, or the bare token for a lease taken by a version without
nonces (a rolling upgrade), or ``''`` for no fence.
"""

from __future__ import annotations

import secrets

from airflow_jrs.spark.fence import Fence, nonce_of

__all__ = ["Fence", "fence_arg", "new_nonce", "nonce_of"]


def new_nonce() -> str:
    """A fresh owner nonce: 16 hex digits, never meant to repeat (64 random bits), drawn per
    :class:`~airflow_jrs.store.leases.lease.JobLease`."""
    return secrets.token_hex(8)


def fence_arg(fence: int | None) -> str:
    """The fence as a script argument: the identity of a :class:`Fence`, a plain integer as is,
    ``''`` for none (an unfenced write)."""
    if fence is None:
        return ""
    if isinstance(fence, Fence):
        return fence.identity
    return str(int(fence))
