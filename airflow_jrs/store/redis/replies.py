"""How a Redis reply is read: redis-py answers bytes or str, depending on how the client was built.

A client built with ``decode_responses=True`` (a caller's own, or a test's) answers ``str``; the
store's own clients answer ``bytes``. Every noun reads its replies through these two, so none of
them depends on how its client was built.
"""

from __future__ import annotations

from typing import Any


def as_bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def as_str(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
