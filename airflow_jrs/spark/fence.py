"""A lease's identity: the fencing token, the owner nonce, the rule that compares them, and the
name they give files.

The token comes from the namespace's counter (``INCR``) and orders holders; it is what results,
the UI and the CLI show. But a counter can go back: a failover to a replica that had not
received the last ``INCR``, or a crash with ``appendfsync everysec`` that loses the last second,
hands the same token to a second attempt. So each lease also carries a random *owner nonce*
(:func:`airflow_jrs.store.leases.fence.new_nonce`), and the two together are the holder's
identity::

    t0  A acquires                  lease{token=7, nonce=a1..}   counter=7
    t1  failover: the replica has neither the lease nor the INCR  counter=6
    t2  B acquires                  lease{token=7, nonce=c3..}
    t3  A renews, writes, beats     "7:a1.." != "7:c3.."  -> refused: A lost the lease

The fenced scripts compare identities (``fence_ok`` in :mod:`airflow_jrs.store.redis.lua`), and
so does Python's ``==`` on a :class:`Fence`. (It used to be the integer's, and every check of
"the same holder?" had to remember a helper, ``same_fence``; one that forgot let A act for B.)
:class:`Fence` stays an ``int`` so that order, ``int(fence)``, formatting and JSON, all of which
mean the token, keep working unchanged. The rule, for ``a == b`` where either is a
:class:`Fence`:

* the same token **and** the same nonce, a plain ``int`` counting as a fence without a nonce
  (what a stored result, a lease taken by a version without nonces, or a person names). So
  ``Fence(7, "a1") == Fence(7, "a1")`` and ``Fence(7) == 7``, but ``Fence(7, "a1") != Fence(7,
  "c3")`` (A and B above) and ``Fence(7, "a1") != 7``: a bare 7 cannot say which of the two it
  means, and a check that cannot tell must not answer "the same holder". This is an equivalence
  (it is the equality of :attr:`Fence.identity` strings), so sets and dicts stay consistent.
* ``hash`` is the token's, so a fence without a nonce and the plain ``int`` it equals share a
  hash; two holders of one token merely collide.
* ``<``, ``<=``, ``>``, ``>=``, arithmetic, ``format``, ``str``, ``repr`` and JSON stay the
  integer's: order is by token (who came later), never by nonce, and everything that shows a fence
  shows the token (so a failed ``assert a == b`` of A and B reads ``7 == 7``: compare
  :attr:`Fence.identity` to see the nonces). Anything that is not an ``int`` (a string, ``None``)
  is left to Python's own comparison.

To compare tokens only, say so: ``int(a) == int(b)`` (a view matching a result, which stores
the token alone, to the attempt in flight). A request a person makes names a bare token and
matches every holder of it: that is :func:`airflow_jrs.store.stop_requests.addresses`, a
matching rule, not equality.

Defined here, not in the store, because a PySpark driver needs it (its stream's control files are
named after its fence, :mod:`airflow_jrs.spark.control`) and must not import the store: the
driver's Python may have neither ``redis`` nor Airflow. The store's helpers
(:mod:`airflow_jrs.store.leases.fence`) and the paths (:mod:`airflow_jrs.domain.paths`) import it
from here, so there is one definition. Standard library only.
"""

from __future__ import annotations

import re
from typing import Any

_IDENTITY = re.compile(r"^(\d+)(?::([0-9a-f]+))?$")

#: What every attempt's staging folder, spec and stream outcome file name starts with.
FENCE_PREFIX = "fence-"


class Fence(int):
    """A fencing token (the ``int``) and the owner nonce of the lease that handed it out; ``==``
    compares both (the module's rule), order and display are the token's."""

    nonce: str | None

    def __new__(cls, token: int, nonce: str | None = None) -> Fence:
        self = super().__new__(cls, int(token))
        if nonce is not None and not re.fullmatch(r"[0-9a-f]+", nonce):
            raise ValueError(f"an owner nonce is lower-case hex, got {nonce!r}")
        self.nonce = nonce or None
        return self

    @property
    def identity(self) -> str:
        """``"<token>:<nonce>"`` (or the bare token without a nonce): what fenced scripts compare."""
        return f"{int(self)}:{self.nonce}" if self.nonce else str(int(self))

    @classmethod
    def parse(cls, raw: str) -> Fence:
        """The inverse of :attr:`identity`; raises ``ValueError`` for anything else."""
        match = _IDENTITY.match(raw.strip())
        if match is None:
            raise ValueError(f"not a fence (<token> or <token>:<nonce>): {raw!r}")
        return cls(int(match.group(1)), match.group(2))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, int):
            return NotImplemented
        return int(self) == int(other) and self.nonce == nonce_of(other)

    def __ne__(self, other: object) -> bool:  # int's own ``__ne__`` would ignore the nonce
        if not isinstance(other, int):
            return NotImplemented
        return not self == other

    def __hash__(self) -> int:  # equal fences have one token, so the token's hash keeps sets right
        return int.__hash__(self)

    def __reduce__(self) -> tuple[Any, ...]:  # copy, deepcopy (dataclasses.asdict), pickle
        return (Fence, (int(self), self.nonce))


def nonce_of(fence: int | None) -> str | None:
    """The owner nonce ``fence`` carries, if any."""
    return fence.nonce if isinstance(fence, Fence) else None


def fence_name(fence: int) -> str:
    """``fence-<token>-<nonce>``: the name of one attempt's staging folder (and spec, plus
    ``.json``); ``fence-<token>`` for a fence without a nonce (a plain ``int``)."""
    nonce = nonce_of(fence)
    return f"{FENCE_PREFIX}{int(fence)}-{nonce}" if nonce else f"{FENCE_PREFIX}{int(fence)}"
