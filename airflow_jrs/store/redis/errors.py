"""The one place redis-py errors become :class:`~airflow_jrs.exceptions.StoreUnavailableError`.

The store, the lease and the intent wrap their I/O in :func:`redis_errors`, so no redis-py
exception escapes the backend and every caller fails closed on one type (docs/architecture.md invariant 7).
What the error says comes from :func:`~airflow_jrs.store.redis.diagnosis.diagnose`: the case, whether
waiting can fix it, and what to do, in our words (the server's are never shown as they are).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis as redis_lib

from airflow_jrs.exceptions import StoreUnavailableError
from airflow_jrs.store.redis.diagnosis import diagnose

#: What redis-py (and the socket layer under it) raises when Redis failed. A cluster client's
#: ``RedisClusterException`` (no node answers, or none knows the slot) is not a ``RedisError``.
REDIS_FAILURES = (
    redis_lib.exceptions.RedisError,
    redis_lib.exceptions.RedisClusterException,
    ConnectionError,
    TimeoutError,
)


@contextmanager
def redis_errors(what: str, namespace: str, job_id: str | None = None) -> Iterator[None]:
    """Map redis-py errors raised inside the block to :class:`StoreUnavailableError`.

    ``what`` completes "could not ...". Works around ``await`` too: the mapping happens where
    the exception surfaces. ``NoScriptError`` passes through (redis-py reloads the script).
    ``retryable`` is the diagnosis's: a lost or slow connection may heal, a refusal may not.
    """
    try:
        yield
    except redis_lib.exceptions.NoScriptError:
        raise
    except REDIS_FAILURES as exc:
        # The Airflow-facing layer says it again with the connection id and host.
        problem = diagnose(exc)
        raise StoreUnavailableError(
            f"job result store (namespace {namespace!r}) could not {what}: {problem.sentence()}",
            namespace=namespace,
            job_id=job_id,
            retryable=problem.retryable,
            what=what,
            kind=problem.kind,
        ) from exc
