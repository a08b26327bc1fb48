"""When a recompute request first met a job: the request time the rule of :mod:`airflow_jrs.recompute` needs.

A DAG run's conf may ask to recompute its jobs, and keeps asking on every retry, clear and
backfill of that run. The request must act once: it is met by any result created at or after
the request. A task's context does not carry the run's creation time, so the first attempt
that meets the request for a job records the time here, and every later attempt of the same
run reads it back: ``HSETNX`` makes the first writer win, so the time never moves.

One hash per job (``jrs:{ns}:recompute:<job id>``, :class:`~.keys.KeySpace`), one field per
request key (the caller's name for the request: the operator uses the DAG run's id). It
expires :data:`REQUEST_TTL` after its last write: a run re-run more than that later meets its
old request again. Times are the writer's clock, as entries' ``created_at`` are.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow_jrs.exceptions import redis_errors
from airflow_jrs.store.entries import as_str
from airflow_jrs.store.keys import KeySpace
from airflow_jrs.store.model import utcnow

#: Seconds a job's request times are kept after the last request was recorded (400 days).
REQUEST_TTL = 400 * 24 * 3600


def _time(raw: Any) -> datetime | None:
    if raw is None:
        return None
    try:
        return datetime.fromisoformat(as_str(raw))
    except ValueError:
        return None  # unreadable: the request counts as not seen, so it acts (never a wrong reuse)


class RecomputeRequests:
    """Request times of one namespace, on a sync redis-py client."""

    def __init__(self, client: Any, namespace: str) -> None:
        self.client = client
        self.keys = KeySpace(namespace)

    def first_seen(self, job_id: str, request_key: str, now: datetime | None = None) -> datetime:
        """The time ``request_key`` first met ``job_id``: ``now`` when this is the first time (or
        when the stored time is unreadable: it is replaced, so the request still acts once)."""
        key = self.keys.recompute_requests(job_id)
        stamp = (now or utcnow()).isoformat()
        with redis_errors("record the recompute request", namespace=self.keys.namespace, job_id=job_id):
            pipe = self.client.pipeline(transaction=True)
            pipe.hsetnx(key, request_key, stamp)
            pipe.hget(key, request_key)
            pipe.expire(key, REQUEST_TTL)
            _, raw, _ = pipe.execute()
            first = _time(raw)
            if first is None:  # unreadable (written by hand?): this meeting is the first; keep it
                self.client.hset(key, request_key, stamp)
        return first or datetime.fromisoformat(stamp)

    def seen(self, job_id: str, request_key: str) -> datetime | None:
        """When ``request_key`` first met ``job_id``, ``None`` if it has not (it is still due)."""
        with redis_errors("read the recompute request", namespace=self.keys.namespace, job_id=job_id):
            return _time(self.client.hget(self.keys.recompute_requests(job_id), request_key))


async def seen_async(client: Any, namespace: str, job_id: str, request_key: str) -> datetime | None:
    """:meth:`RecomputeRequests.seen` on a ``redis.asyncio`` client (the triggerer's)."""
    keys = KeySpace(namespace)
    with redis_errors("read the recompute request", namespace=namespace, job_id=job_id):
        return _time(await client.hget(keys.recompute_requests(job_id), request_key))
