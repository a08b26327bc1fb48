"""A lease's identity: the fencing token users see, and an owner nonce that cannot repeat.

The token comes from the namespace's counter (``INCR``) and orders holders; it is what results,
the UI and the CLI show. But a counter can go back: a failover to a replica that had not
received the last ``INCR``, or a crash with ``appendfsync everysec`` that loses the last second,
hands the same token to a second attempt. So each lease also carries a random *owner nonce*
(``secrets.token_hex(8)``: 64 bits, drawn per :class:`~airflow_jrs.store.leases.lease.JobLease`), and every
fenced script compares both (``fence_ok`` in :mod:`~airflow_jrs.store.plumbing.lua`)::

    t0  A acquires                  lease{token=7, nonce=a1..}   counter=7
    t1  failover: the replica has neither the lease nor the INCR  counter=6
    t2  B acquires                  lease{token=7, nonce=c3..}
    t3  A renews, writes, beats     "7:a1.." != "7:c3.."  -> refused: A lost the lease

:class:`Fence` is an ``int`` (the token: compared, formatted and JSON-encoded as the integer,
so everything that shows or orders fences is unchanged) that also carries the nonce. What a
script receives is :func:`fence_arg`: ``"<token>:<nonce>"`` in ONE argument, or the bare token
for a lease taken by a version without nonces (a rolling upgrade), or ``''`` for no fence.
:class:`Fence` and :func:`nonce_of` are defined in :mod:`airflow_jrs.spark.fence`: a PySpark
driver needs them without the store.
"""

from __future__ import annotations

import secrets

from airflow_jrs.spark.fence import Fence, nonce_of

__all__ = ["Fence", "fence_arg", "new_nonce", "nonce_of", "same_fence"]


def new_nonce() -> str:
    """A fresh owner nonce: 16 hex digits, never meant to repeat (64 random bits)."""
    return secrets.token_hex(8)


def fence_arg(fence: int | None) -> str:
    """The fence as a script argument: the identity of a :class:`Fence`, a plain integer as is,
    ``''`` for none (an unfenced write)."""
    if fence is None:
        return ""
    if isinstance(fence, Fence):
        return fence.identity
    return str(int(fence))


def same_fence(a: int | None, b: int | None) -> bool:
    """Do ``a`` and ``b`` name the same lease holder? Compares identities (:func:`fence_arg`), never
    the tokens alone: ``Fence(7, "a1") == Fence(7, "c3")`` is ``True`` as integers, yet after a
    failover that lost the ``INCR`` those are two holders, and only one of them may act."""
    return fence_arg(a) == fence_arg(b)
