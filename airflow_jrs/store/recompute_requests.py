"""The recompute request contract: when a run's request to compute a job again first met it.

When a recompute request first met a job: the mark the rule of :mod:`airflow_jrs.domain.recompute` needs.

A DAG run's conf may ask to recompute its jobs, and keeps asking on every retry, clear and
backfill of that run. The request must act once: it is met by any result computed after the
request. A task's context does not carry the run's creation time, so the first attempt that
meets the request for a job records a mark here, and every later attempt of the same run reads
it back: the first writer wins, so the mark never moves.

The mark is ordered by the namespace's fencing counter (``jrs:{ns}:fence``), not by a clock:
hosts' clocks differ, and a request stamped by a fast worker clock while the result was stamped
by a slow one would recompute twice (or never). :data:`RECORD_REQUEST` reads, in the one step
that records the request, the counter (every lease taken later gets a greater token) and the
token of the job's lease if one is held (the computation in flight when the request came, whose
result is written after it). The time is kept too, from Redis ``TIME`` (the server's one
clock), for display and for rows written before fences were recorded.

Two edges, both on the side of one more recompute or one earlier reuse, never of two holders:
a counter that went back (a failover that lost an ``INCR``, see :mod:`~airflow_jrs.spark.fence`) can re-issue a
token at or below a recorded counter, so a result of that lease does not meet the request and
the job is recomputed once more; and a result written by the lease in flight just before the
request met the job (its lease not yet released) meets the request.

One hash per job (``jrs:{ns}:recompute:<job id>``, :class:`~airflow_jrs.store.redis.keys.KeySpace`), one field per
request key (the caller's name for the request: the operator uses the DAG run's id), valued
``{"at_ms": <Redis TIME>, "fence": <counter>, "in_flight": <holder token or null>}``. It expires
:data:`REQUEST_TTL` after its last write: a run re-run more than that later meets its old request
again.
"""

from __future__ import annotations

import abc

from airflow_jrs.domain.recompute import RequestSeen

#: Seconds a job's request marks are kept after the last request was recorded (400 days).
REQUEST_TTL = 400 * 24 * 3600


class RecomputeRequests(abc.ABC):
    """Request marks of one namespace, on a sync redis-py client.

    The contract; on Redis a hash per job of request keys and first meetings
    (:class:`airflow_jrs.store.redis.recompute_requests.RedisRecomputeRequests`)."""

    @abc.abstractmethod
    def first_seen(self, job_id: str, request_key: str) -> RequestSeen:
        """When ``request_key`` first met ``job_id``: now, if this is the first time (or if the
        stored mark is unreadable: it is replaced, so the request still acts once)."""

    @abc.abstractmethod
    def seen(self, job_id: str, request_key: str) -> RequestSeen | None:
        """When ``request_key`` first met ``job_id``, ``None`` if it has not (it is still due)."""
