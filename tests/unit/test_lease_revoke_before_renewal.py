"""``revoke()`` never raises, even when the kill lands while the renewal thread is being started.

Found by the fault trials (seed 1, trials 759 and 1750): ``on_kill`` 16 ms after the
lease was taken arrived between the renewal thread's creation and its ``start()``; ``revoke``
joined a thread never started and raised ``RuntimeError`` out of the signal handler, so the lease
was not released and the task failed with "cannot join thread before it is started".
"""

from __future__ import annotations

import threading

import redis

from airflow_jrs.store.redis.leases import RedisJobLease


def test_revoke_releases_the_lease_when_the_renewal_thread_was_created_but_not_started(
    redis_client: redis.Redis, namespace: str
) -> None:
    lease = RedisJobLease(redis_client, namespace, "job-1", ttl=30)
    lease.acquire()
    lease._thread = threading.Thread(target=lambda: None)  # created, the kill lands before start()
    assert lease.revoke() is True
    assert lease.peek() is None
