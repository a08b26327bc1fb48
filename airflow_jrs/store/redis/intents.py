"""The intent on Redis: one string per job in flight, written and cleared under the fence by Lua.

The rules are the contract's (:mod:`airflow_jrs.store.intents`); each script below has its
KEYS/ARGV/return header, and the result's own script deletes the intent in the same step that
writes the result (invariant 4).
"""

from __future__ import annotations

from typing import Any

import redis as redis_lib

from airflow_jrs.domain.paths import fence_name
from airflow_jrs.exceptions import CorruptIntentError, LeaseLostError
from airflow_jrs.store.intents import Intent, IntentStore
from airflow_jrs.store.leases.fence import Fence, fence_arg
from airflow_jrs.store.redis import lua
from airflow_jrs.store.redis.durability import DurableWrites
from airflow_jrs.store.redis.errors import redis_errors
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.lua import FENCE_CHECK
from airflow_jrs.store.redis.replies import as_str

RECORD_INTENT = (
    FENCE_CHECK
    + """
-- Record (or update) the reference to a running job's spec, under the fence.
-- KEYS[1] - lease hash      KEYS[2] - intent key
-- ARGV[1] - fence identity ("<token>:<nonce>")   ARGV[2] - intent JSON
-- return 1 written, -2 stale fence
if ARGV[1] == '' or not fence_ok(KEYS[1], ARGV[1]) then return -2 end
redis.call('SET', KEYS[2], ARGV[2])
return 1
"""
)


AMEND_INTENT = (
    FENCE_CHECK
    + """
-- Amend the running job's reference once spark-submit reports what it started (its pid, the
-- application or driver id), under the fence. Only an existing intent is amended: the result
-- script deletes the intent, and a late amendment must never bring it back.
-- KEYS[1] - lease hash      KEYS[2] - intent key
-- ARGV[1] - fence identity ("<token>:<nonce>")   ARGV[2] - intent JSON
-- return 1 amended, 0 no intent any more, -2 stale fence
if ARGV[1] == '' or not fence_ok(KEYS[1], ARGV[1]) then return -2 end
if redis.call('SET', KEYS[2], ARGV[2], 'XX') then return 1 end
return 0
"""
)


CLEAR_INTENT = (
    FENCE_CHECK
    + """
-- Drop the intent of an attempt that ends without a result (Spark failed, nothing to recover).
-- KEYS[1] - lease hash      KEYS[2] - intent key
-- ARGV[1] - fence identity ("<token>:<nonce>")
-- return 1 cleared (or nothing there), -2 stale fence
if ARGV[1] == '' or not fence_ok(KEYS[1], ARGV[1]) then return -2 end
redis.call('DEL', KEYS[2])
return 1
"""
)


class RedisIntentStore(IntentStore):
    """Intents as Redis strings, each write one fenced script; specs as the contract writes them."""

    def __init__(
        self, client: redis_lib.Redis, namespace: str, spec_root: str, *, durable: DurableWrites | None = None
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.keys = KeySpace(namespace)
        self.spec_root = spec_root.rstrip("/")
        #: ``durability`` for recording the intent (``None``: acknowledged in memory)
        self.durable = durable
        self._record = client.register_script(RECORD_INTENT)
        self._clear = client.register_script(CLEAR_INTENT)
        self._amend = client.register_script(AMEND_INTENT)

    def update(self, intent: Intent) -> None:
        keys = [self.keys.lease(intent.job_id), self.keys.intent(intent.job_id)]
        args = [fence_arg(intent.fence), intent.to_json()]
        with redis_errors(f"record the intent of job {intent.job_id!r}", self.namespace, intent.job_id):
            if self.durable is None:
                code = self._record(keys=keys, args=args)
            else:
                code = self.durable.run(
                    self.client, self._record, keys=keys, args=args, written=lambda code: code == lua.OK,
                    what=f"the intent of job {intent.job_id!r}", namespace=self.namespace, job_id=intent.job_id,
                    then="Spark was not submitted; the task's retry recovers from the intent (nothing ran) once "
                    "the store is healthy",
                )  # fmt: skip
        if code == lua.STALE_FENCE:
            raise LeaseLostError(
                f"job {intent.job_id!r}: fencing token {intent.fence} lost the lease before "
                "its intent was recorded; not submitting Spark.",
                job_id=intent.job_id,
                fence=intent.fence,
            )

    def get(self, job_id: str) -> Intent | None:
        with redis_errors(f"read the intent of job {job_id!r}", self.namespace, job_id):
            raw = self.client.get(self.keys.intent(job_id))
        return self._parse(job_id, raw)

    def _parse(self, job_id: str, raw: Any) -> Intent | None:
        if raw is None:
            return None
        try:
            return Intent.from_json(raw)
        except (ValueError, TypeError) as exc:
            key = self.keys.intent(job_id)
            raise CorruptIntentError(
                f"intent {key!r} is unreadable ({exc}); inspect it, and delete it by hand once no "
                "attempt of the job runs (an intent is only a reference: the job's result is unaffected)",
                job_id=job_id,
                namespace=self.namespace,
                key=key,
            ) from None

    def list_intents(self) -> dict[str, Intent | CorruptIntentError]:
        with redis_errors("list intents", self.namespace):
            found = sorted(as_str(k) for k in self.client.scan_iter(match=self.keys.job_pattern("intent"), count=1000))
            raws = [raw for start in range(0, len(found), 500) for raw in self.client.mget(found[start : start + 500])]
        out: dict[str, Intent | CorruptIntentError] = {}
        for key, raw in zip(found, raws, strict=True):
            job_id = self.keys.job_id_of("intent", key)
            try:
                intent = self._parse(job_id, raw)
            except CorruptIntentError as exc:
                out[job_id] = exc
                continue
            if intent is not None:  # cleared between the SCAN and the read
                out[job_id] = intent
        return out

    def live_fences(self, job_id: str) -> set[str]:
        with redis_errors(f"read the lease and intent of job {job_id!r}", self.namespace, job_id):
            pipe = self.client.pipeline(transaction=False)
            pipe.hmget(self.keys.lease(job_id), ["token", "nonce"])
            pipe.get(self.keys.intent(job_id))
            (token, nonce), raw = pipe.execute()
        live = {fence_name(Fence(int(as_str(token)), as_str(nonce) if nonce else None))} if token is not None else set()
        intent = self._parse(job_id, raw)
        if intent is not None:
            live.add(fence_name(intent.fence))
        return live

    def amend(self, intent: Intent) -> bool:
        with redis_errors(f"amend the intent of job {intent.job_id!r}", self.namespace, intent.job_id):
            code = self._amend(
                keys=[self.keys.lease(intent.job_id), self.keys.intent(intent.job_id)],
                args=[fence_arg(intent.fence), intent.to_json()],
            )
        if code == lua.STALE_FENCE:
            raise LeaseLostError(
                f"job {intent.job_id!r}: fencing token {intent.fence} no longer holds the lease; "
                "its intent is left to the holder",
                job_id=intent.job_id,
                fence=intent.fence,
            )
        return bool(code == lua.OK)

    def clear(self, job_id: str, fence: int) -> None:
        with redis_errors(f"clear the intent of job {job_id!r}", self.namespace, job_id):
            code = self._clear(keys=[self.keys.lease(job_id), self.keys.intent(job_id)], args=[fence_arg(fence)])
        if code == lua.STALE_FENCE:
            raise LeaseLostError(
                f"job {job_id!r}: fencing token {fence} no longer holds the lease; intent left to the holder",
                job_id=job_id,
                fence=fence,
            )
