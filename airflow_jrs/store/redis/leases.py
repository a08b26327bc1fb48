"""The Redis lease: a hash per held job, the namespace's fence counter, one Lua script per transition.

The rules (why a token, why a nonce, what a take-over proves) are the contract's,
:mod:`airflow_jrs.store.leases.lease`; this module keeps them on Redis. The token comes from one
``INCR`` counter per namespace (nothing is left behind per job, and a job purged and created again
never meets an old token); the hash holds token, owner, nonce and the TTL each renewal sets.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

import redis as redis_lib

from airflow_jrs.settings import DEFAULT_LEASE_TTL
from airflow_jrs.store.leases.fence import Fence, fence_arg
from airflow_jrs.store.leases.lease import JobLease, LeaseHolder, boot_clock
from airflow_jrs.store.redis import lease_scripts as scripts
from airflow_jrs.store.redis.clients import fresh_client
from airflow_jrs.store.redis.durability import DurableWrites
from airflow_jrs.store.redis.errors import redis_errors
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.lua import ACQUIRED
from airflow_jrs.store.redis.replies import as_str

log = logging.getLogger(__name__)


def _holder(token: Any, owner: Any, ttl_ms: Any, nonce: Any = None, lease_ttl_ms: Any = None) -> LeaseHolder:
    try:
        parsed = json.loads(owner) if owner else {}
        if not isinstance(parsed, dict):
            raise ValueError(owner)
    except ValueError:
        parsed = {"owner": repr(owner)}
    nonce = as_str(nonce) if nonce else None
    try:
        full = int(as_str(lease_ttl_ms)) if lease_ttl_ms else None
    except ValueError:
        full = None
    return LeaseHolder(token=int(token), owner=parsed, ttl_ms=int(ttl_ms), nonce=nonce or None, lease_ttl_ms=full)


class RedisJobLease(JobLease):
    """The lease of one job in one Redis namespace: a hash whose token comes from the namespace's
    fence counter (``INCR``), every transition one Lua script (:mod:`.lease_scripts`)."""

    def __init__(
        self,
        client: redis_lib.Redis,
        namespace: str,
        job_id: str,
        ttl: float = DEFAULT_LEASE_TTL,
        owner: dict[str, Any] | None = None,
        on_lost: Callable[[JobLease], None] | None = None,
        durable: DurableWrites | None = None,
    ) -> None:
        super().__init__(namespace, job_id, ttl, owner, on_lost)
        self.client = client
        #: ``durability`` for acquire and take-over (``None``: acknowledged in memory). A lease lost
        #: in a failover lets a second attempt start beside this one until its next renewal.
        self.durable = durable
        self.keys = KeySpace(namespace)
        self._acquire = client.register_script(scripts.ACQUIRE_LEASE)
        self._take_over = client.register_script(scripts.TAKE_OVER_LEASE)
        self._renew = client.register_script(scripts.RENEW_LEASE)
        self._release = client.register_script(scripts.RELEASE_LEASE)

    def _acquire_keys(self) -> list[str]:
        """The keys of ACQUIRE_LEASE; TAKE_OVER_LEASE uses the same, so both count on one fence."""
        return [self.keys.lease(self.job_id), self.keys.fence_counter]

    def acquire(self) -> Fence:
        sent = boot_clock()
        with redis_errors(f"acquire the lease of job {self.job_id!r}", self.namespace, self.job_id):
            reply = self._hand_out(
                self._acquire, [json.dumps(self.owner), self.ttl_ms, int(time.time() * 1000), self.nonce]
            )
        if int(reply[0]) == ACQUIRED:
            self.token = Fence(int(reply[1]), self.nonce)
            self.renewed_at = sent
            return self.token
        raise self._held(_holder(*reply[1:5]))

    def take_over(self, dead: LeaseHolder) -> Fence | None:
        """Take the lease from ``dead``, a holder the caller proved dead, before its TTL runs out.

        A compare-and-set on ``dead``'s token and nonce that hands out a new token from the fence counter:
        whatever ``dead`` left running can no longer write, and of two successors that proved the
        same holder dead only one gets the lease. Returns the new token; ``None`` when the lease is
        gone meanwhile (call :meth:`acquire`); raises :class:`LeaseHeldError` naming whoever holds
        it now. Proving the holder dead is the caller's business: the lease cannot see processes.
        """
        sent = boot_clock()
        with redis_errors(f"take over the lease of job {self.job_id!r}", self.namespace, self.job_id):
            reply = self._hand_out(
                self._take_over,
                [fence_arg(dead.fence), json.dumps(self.owner), self.ttl_ms, int(time.time() * 1000), self.nonce],
            )
        if int(reply[0]) == ACQUIRED:
            self.token = Fence(int(reply[1]), self.nonce)
            self.renewed_at = sent
            return self.token
        if len(reply) < 4:
            return None
        raise self._held(_holder(*reply[1:5]))

    def _hand_out(self, script: Any, args: list[Any]) -> Any:
        """Run ACQUIRE_LEASE or TAKE_OVER_LEASE; with ``durability`` set, the lease counts as taken
        only once the replicas (or the disk) have it, else it is given back and the call raises
        :class:`~airflow_jrs.exceptions.StoreUnavailableError` (nothing started: a retry takes it)."""
        if self.durable is None:
            return script(keys=self._acquire_keys(), args=args)
        return self.durable.run(
            self.client, script, keys=self._acquire_keys(), args=args,
            written=lambda reply: int(reply[0]) == ACQUIRED,
            what=f"the lease of job {self.job_id!r}", namespace=self.namespace, job_id=self.job_id,
            then="The lease was given back and nothing was started; the task's retry takes it again once the "
            "store is healthy",
            undo=lambda reply: self._release(
                keys=[self.keys.lease(self.job_id)], args=[fence_arg(Fence(int(reply[1]), self.nonce))]
            ),
        )  # fmt: skip

    def peek(self) -> LeaseHolder | None:
        key = self.keys.lease(self.job_id)
        with redis_errors(f"read the lease of job {self.job_id!r}", self.namespace, self.job_id):
            pipe = self.client.pipeline(transaction=False)
            pipe.hmget(key, ["token", "owner", "nonce", "ttl_ms"])
            pipe.pttl(key)
            (token, owner, nonce, lease_ttl), ttl_ms = pipe.execute()
        if token is None:
            return None
        return _holder(as_str(token), as_str(owner) if owner is not None else None, ttl_ms, nonce, lease_ttl)

    def revoke(self) -> bool:
        """Release our lease on a connection of its own; safe inside a signal handler.

        ``on_kill`` runs on the thread that was interrupted, which may be in the middle of a
        command on a pooled connection: reusing it could read that command's reply. A fresh
        connection with the same settings cannot. Never raises: the lease's TTL is the
        fallback, and a kill must not be masked by a Redis error. ``True`` when released.
        """
        self.stop_renewal()
        if self.token is None:
            return False
        try:
            client = fresh_client(self.client)
            try:
                release = client.register_script(scripts.RELEASE_LEASE)
                return bool(release(keys=[self.keys.lease(self.job_id)], args=[fence_arg(self.token)]))
            finally:
                client.close()
        except Exception as exc:
            log.warning("Could not revoke the lease of job %r (it expires by its TTL): %s", self.job_id, exc)
            return False

    def renew(self) -> bool:
        """Extend the lease; ``False`` (and :attr:`lost` set) when it is no longer ours."""
        token = self._require_token()
        sent = boot_clock()
        with redis_errors(f"renew the lease of job {self.job_id!r}", self.namespace, self.job_id):
            ok = bool(self._renew(keys=[self.keys.lease(self.job_id)], args=[fence_arg(token), self.ttl_ms]))
        if not ok:
            self._mark_lost()
        else:
            self.renewed_at = sent
        return ok

    def release(self) -> bool:
        self.stop_renewal()
        if self.token is None:
            return False
        with redis_errors(f"release the lease of job {self.job_id!r}", self.namespace, self.job_id):
            return bool(self._release(keys=[self.keys.lease(self.job_id)], args=[fence_arg(self.token)]))


def held_leases(client: redis_lib.Redis, namespace: str) -> dict[str, LeaseHolder]:
    """Every lease held in ``namespace`` now, by job id: what the on-call engineer asks first
    ("who is running what?"). Leases have no index (they come and go with attempts), so this
    SCANs (never KEYS: a large keyspace must not block the server); a lease that expires
    between the SCAN and the read is left out."""
    keys = KeySpace(namespace)
    with redis_errors("list held leases", namespace):
        found = sorted(as_str(k) for k in client.scan_iter(match=keys.job_pattern("lease"), count=1000))
        pipe = client.pipeline(transaction=False)
        for key in found:
            pipe.hmget(key, ["token", "owner", "nonce", "ttl_ms"])
            pipe.pttl(key)
        replies = pipe.execute() if found else []
    held: dict[str, LeaseHolder] = {}
    for i, key in enumerate(found):
        (token, owner, nonce, lease_ttl), ttl_ms = replies[2 * i], replies[2 * i + 1]
        if token is not None:
            held[keys.job_id_of("lease", key)] = _holder(
                as_str(token), as_str(owner) if owner is not None else None, ttl_ms, nonce, lease_ttl
            )
    return held
