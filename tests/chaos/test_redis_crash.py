"""The store's Redis dies hard (SIGKILL) while writers are busy: nothing acknowledged is lost.

"Never loses a finished one, whatever crashes" includes the store's own server. The embedded
redis-server (the one the demo, tests and ``airflow-jrs`` use) is append-only; this kills it
mid-write, restarts it from its files and checks every write that was acknowledged before
the kill: results (dirty and clean) and fencing tokens. A fence counter that went back would
hand the next attempt a token a live holder already has (docs/architecture.md invariant 3).
No JVM: it takes about a second.
"""

from __future__ import annotations

import threading
import time

import pytest
import redis

from airflow_jrs.store import JobResult, JobStatus, RedisJobResultStore
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.leases import RedisJobLease
from jrs_testbench.redis_server import EmbeddedRedis

pytestmark = pytest.mark.chaos

NAMESPACE = "crash"
FENCED = "crash.fenced.2013-01-01"


def test_acknowledged_results_and_fences_survive_a_sigkill_of_redis(tmp_path):
    server = EmbeddedRedis(tmp_path / "redis").start()
    acked: list[tuple[str, str]] = []  # (job id, "dirty" | "clean"), in acknowledgement order
    tokens: list[int] = []
    stop = threading.Event()

    def write() -> None:
        """Create, clean and fence until the server goes away; record only what Redis acknowledged."""
        store = RedisJobResultStore(server.url, NAMESPACE)
        client = redis.Redis.from_url(server.url)
        i = 0
        try:
            while not stop.is_set():
                job_id = f"crash.job.{i:06d}"
                store.create_dirty_result(JobResult(job_id=job_id, status=JobStatus.SUCCEEDED))
                acked.append((job_id, "dirty"))
                if i % 2 == 0:
                    store.mark_result_as_clean(job_id)
                    acked.append((job_id, "clean"))
                lease = RedisJobLease(client, NAMESPACE, FENCED, ttl=30)
                tokens.append(lease.acquire())
                lease.release()
                i += 1
        except Exception:
            return  # the kill: whatever was in flight was never acknowledged
        finally:
            client.close()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        deadline = time.monotonic() + 300  # a liveness guard only: every write is fsynced
        while len(tokens) < 50:  # kill mid-stream, once a fair number of writes went through
            assert writer.is_alive(), "the writer stopped before the kill"
            assert time.monotonic() < deadline, f"the writer is stuck after {len(tokens)} rounds"
            time.sleep(0.01)
        server.crash()
        stop.set()
        writer.join(timeout=30)
        assert not writer.is_alive()
        snapshot, last_token = list(acked), tokens[-1]

        server.start()
        store = RedisJobResultStore(server.url, NAMESPACE)
        client = redis.Redis.from_url(server.url)
        try:
            final = {job_id: state for job_id, state in snapshot}  # clean overrides dirty
            lost = []
            for job_id, state in final.items():
                entry = store.get_entry(job_id)
                if entry is None or (state == "clean" and not entry.is_clean):
                    lost.append((job_id, state, entry))
            assert not lost, f"{len(lost)} of {len(final)} acknowledged writes lost, e.g. {lost[:3]}"
            assert int(client.get(KeySpace(NAMESPACE).fence_counter)) >= last_token
            # The kill may have landed between an acquire and its release: that lease survives
            # (as it should) until its TTL; let it expire, then the next token must be newer.
            client.delete(KeySpace(NAMESPACE).lease(FENCED))
            assert RedisJobLease(client, NAMESPACE, FENCED, ttl=30).acquire() > last_token
            # Every dirty entry is still indexed, so the cleanup can find it. (A clean whose reply
            # the kill swallowed may have landed: such a job is clean now, which is fine.)
            indexed = {r.job_id for r in store.get_dirty_results()}
            dirty = {j for j in final if not store.get_entry(j).is_clean}
            assert dirty <= indexed, f"dirty but not indexed: {sorted(dirty - indexed)[:3]}"
        finally:
            client.close()
    finally:
        stop.set()
        server.stop()
