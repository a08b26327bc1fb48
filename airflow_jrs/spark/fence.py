"""A lease's identity as the driver sees it: the token, the owner nonce, and the name they give files.

Defined here, not in the store, because a PySpark driver needs it (its stream's control files are
named after its fence, :mod:`airflow_jrs.spark.control`) and must not import the store: the
driver's Python may have neither ``redis`` nor Airflow. The store (:mod:`airflow_jrs.store.leases.fence`,
which explains the nonce and a failover's timeline) and the paths (:mod:`airflow_jrs.domain.paths`)
import these from here, so there is one definition. Standard library only.
"""

from __future__ import annotations

import re
from typing import Any

_IDENTITY = re.compile(r"^(\d+)(?::([0-9a-f]+))?$")

#: What every attempt's staging folder, spec and stream outcome file name starts with.
FENCE_PREFIX = "fence-"


class Fence(int):
    """A fencing token (the ``int``) and the owner nonce of the lease that handed it out."""

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
