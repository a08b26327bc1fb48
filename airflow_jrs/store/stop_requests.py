"""The stop and cancel request contract: what a person or a successor asks of a running attempt.

Stop and cancel requests: one path for the CLI, the UI, ``on_kill`` and a successor.

Whoever wants a running attempt to end (``airflow-jrs stop|cancel``, the Job results page, the
operator's ``on_kill``, a successor with ``predecessor="stop"``) writes one request to one place,
the job's control hash in Redis::

    jrs:{ns}:control:<job id>  hash {fence, kind=stop|cancel, by, at_ms, reason}   (TTL: a day)

through one script (:data:`REQUEST_CONTROL`): the request names the
fence of the attempt it is for (a request for an attempt that no longer runs is refused, and a
later attempt never obeys an older one), and a cancel is never downgraded to a stop (a cancel
after a stop upgrades it; a stop after a cancel leaves the cancel). An attempt names itself by
its whole fence identity (token and owner nonce, :mod:`~airflow_jrs.store.leases.fence`), so
after a failover that handed its token to a second attempt its ``on_kill`` cannot cancel that
one; a person names the token the CLI and the UI show, which reaches whichever attempt holds it
(:func:`addresses`).

The supervisor beside spark-submit (:mod:`airflow_jrs.launch.supervisor`) reads the request with each
beat and is the relay on the host: for a stream it forwards a stop to the driver's control file
(:mod:`airflow_jrs.spark.control`: the query stops at a batch boundary) and kills spark-submit
only on a cancel or when the stop did not finish within ``stop_timeout``; for a batch job it
terminates spark-submit (SIGTERM, then SIGKILL after a grace period). When the task is gone
(an orphan), the supervisor records the STOPPED or CANCELED result itself.

Airflow-free: redis-py and the standard library (docs/architecture.md invariant 8).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

from airflow_jrs.spark.control import CANCEL  # the kinds' one definition
from airflow_jrs.store.leases.fence import nonce_of

#: Default seconds a stream gets to stop at a batch boundary (``on_kill``, a successor) before a cancel.
DEFAULT_STOP_TIMEOUT = 30.0


#: How long a request is kept (who asked stays readable after the attempt ended).
KEEP_MS = 86_400_000


def addresses(asked: int, held: int) -> bool:
    """Does a request for fence ``asked`` address the attempt of fence ``held``? The rule of the
    scripts' ``addresses``: the same token, and the same owner nonce when both carry one (a
    failover can hand one token to two attempts); a bare token, what people name, matches by token."""
    if int(asked) != int(held):
        return False
    a, h = nonce_of(asked), nonce_of(held)
    return a is None or h is None or a == h


@dataclass(frozen=True)
class StopRequest:
    """A request in force for the attempt of ``fence``: what, who asked, when (epoch s) and why.

    ``fence`` is the :class:`~airflow_jrs.store.leases.fence.Fence` the request named: with the owner
    nonce when an attempt or a successor asked, the bare token when a person did."""

    job_id: str
    fence: int
    kind: str
    by: str
    at: float
    reason: str = ""
    #: a stop only: seconds the supervisor gives it before it kills (``None``: no limit)
    stop_timeout: float | None = None

    @property
    def cancel(self) -> bool:
        return self.kind == CANCEL

    def describe(self) -> str:
        why = f" ({self.reason})" if self.reason else ""
        return f"{self.kind} requested by {self.by}{why}"


class StopRequests(abc.ABC):
    """The stop and cancel requests of one namespace's running attempts.

    The contract; on Redis a hash per job, answered by the attempt's heartbeat
    (:class:`airflow_jrs.store.redis.stop_requests.RedisStopRequests`)."""

    namespace: str

    @abc.abstractmethod
    def ask(
        self, job_id: str, fence: int, kind: str, *, by: str, reason: str = "", stop_timeout: float | None = None
    ) -> StopRequest | None:
        """Ask the running attempt of ``fence`` to stop or cancel; returns the request in force
        (a cancel when one was asked before a stop), or ``None`` when no attempt of that fence
        runs (no intent of it and no running heartbeat). ``stop_timeout``: how long a stream's
        stop may take before its supervisor kills it (``None``: until the batch boundary).

        A :class:`~airflow_jrs.store.leases.fence.Fence` with its nonce (``on_kill``, a successor) asks
        that attempt only, never another one a failover handed the same token; a plain integer
        (a person at the CLI or the UI) asks whichever attempt holds that token."""

    @abc.abstractmethod
    def location(self, job_id: str) -> str:
        """Where a stop or cancel request of ``job_id`` is kept, for a person to look (``redis-cli
        HGETALL``): the store names its keys, nobody above it spells one."""

    @abc.abstractmethod
    def get(self, job_id: str, fence: int | None = None) -> StopRequest | None:
        """The request kept for the job (only one that addresses ``fence``, when given: see
        :func:`addresses`), or ``None``."""
