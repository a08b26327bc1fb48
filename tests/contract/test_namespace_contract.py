"""The namespace contract (:mod:`airflow_jrs.store.namespace`): every noun beside the results, on
every backend of ``BACKENDS``, through the contract's methods only.

What a second backend must keep (docs/architecture.md, "Where a change goes"): one holder per
job and a fence that refuses a stale one, an intent written and cleared under the fence, a
heartbeat that says whether the submission runs, requests addressed to the attempt in flight, a
recompute request's first meeting kept once, a recovery log only the holder appends to, and the
facts ``doctor`` judges. Raw views of a backend stay in the harness; nothing here names Redis.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import Backend

from airflow_jrs.exceptions import LeaseHeldError, LeaseLostError
from airflow_jrs.store import JobNamespace
from airflow_jrs.store.intents import Intent
from airflow_jrs.store.recoveries import RecoveryStep
from airflow_jrs.store.server_facts import Namespaces, ServerFacts

JOB = "daily.2024-01-01"


@pytest.fixture
def jobs(backend: Backend, namespace: str, tmp_path: Path) -> JobNamespace:
    return backend.make_namespace(namespace, tmp_path)


def _intent(jobs: JobNamespace, fence: int, tmp_path: Path) -> Intent:
    return Intent(
        job_id=JOB, fence=fence, spec_uri=jobs.intents.spec_uri(JOB, fence), staging=str(tmp_path / "staging"),
        app_name="jrs-daily", host="h", pid=1, started_at=0.0,
    )  # fmt: skip


# -- leases -------------------------------------------------------------------------------
def test_one_holder_per_job_and_a_later_holder_gets_a_greater_token(jobs: JobNamespace) -> None:
    first = jobs.lease(JOB, ttl=10)
    token = first.acquire()
    assert token.nonce
    with pytest.raises(LeaseHeldError):
        jobs.lease(JOB, ttl=10).acquire()
    holder = first.peek()
    assert holder is not None and holder.fence == token
    assert set(jobs.held_leases()) == {JOB}
    assert first.renew()
    assert first.release()
    assert first.peek() is None and jobs.held_leases() == {}
    second = jobs.lease(JOB, ttl=10)
    assert int(second.acquire()) > int(token)
    second.release()


def test_a_take_over_fences_the_dead_holder_off(jobs: JobNamespace) -> None:
    dead = jobs.lease(JOB, ttl=10)
    dead.acquire()
    holder = dead.peek()
    assert holder is not None
    successor = jobs.lease(JOB, ttl=10)
    fence = successor.take_over(holder)
    assert fence is not None and fence != dead.token and int(fence) > int(holder.fence)
    assert not dead.renew() and dead.lost.is_set()
    with pytest.raises(LeaseLostError):
        dead.check()
    assert successor.check() == fence
    successor.release()


# -- intents ------------------------------------------------------------------------------
def test_an_intent_lives_under_its_fence(jobs: JobNamespace, tmp_path: Path) -> None:
    lease = jobs.lease(JOB, ttl=10)
    fence = lease.acquire()
    intent = _intent(jobs, fence, tmp_path)
    jobs.intents.record(intent, {"application": "app.py"})
    assert jobs.intents.get(JOB) == intent
    assert jobs.intents.read_spec(intent.spec_uri)["application"] == "app.py"
    assert set(jobs.intents.list_intents()) == {JOB}
    assert any(name.startswith("fence-") for name in jobs.intents.live_fences(JOB))
    assert jobs.intents.amend(_intent(jobs, fence, tmp_path))
    jobs.intents.clear(JOB, fence)
    assert jobs.intents.get(JOB) is None
    assert not jobs.intents.amend(intent)  # a late amendment never brings it back
    lease.release()


def test_a_stale_fence_writes_no_intent(jobs: JobNamespace, tmp_path: Path) -> None:
    lease = jobs.lease(JOB, ttl=10)
    fence = lease.acquire()
    lease.release()
    with pytest.raises(LeaseLostError):
        jobs.intents.update(_intent(jobs, fence, tmp_path))
    assert jobs.intents.get(JOB) is None


# -- heartbeats and stop requests ----------------------------------------------------------
def test_a_heartbeat_says_the_submission_runs_until_it_ends(jobs: JobNamespace, tmp_path: Path) -> None:
    lease = jobs.lease(JOB, ttl=10)
    fence = lease.acquire()
    assert jobs.heartbeats.get(JOB) is None
    assert jobs.heartbeats.beat(JOB, fence, 10_000, host="h", pid=1, child=2, first=True) is None
    beat = jobs.heartbeats.get(JOB)
    assert beat is not None and beat.running and beat.fence == fence
    assert jobs.heartbeats.end(JOB, fence, 0)
    ended = jobs.heartbeats.get(JOB)
    assert ended is not None and not ended.running and ended.exit_code == 0
    lease.release()


def test_a_stop_request_reaches_the_attempt_in_flight_only(jobs: JobNamespace, tmp_path: Path) -> None:
    lease = jobs.lease(JOB, ttl=10)
    fence = lease.acquire()
    assert jobs.stop_requests.ask(JOB, fence, "stop", by="test") is None  # nothing of that fence runs
    jobs.intents.record(_intent(jobs, fence, tmp_path), {})
    assert jobs.heartbeats.beat(JOB, fence, 10_000, host="h", pid=1, child=2, first=True) is None
    asked = jobs.stop_requests.ask(JOB, fence, "cancel", by="test", reason="contract")
    assert asked is not None and asked.cancel and asked.fence == fence
    seen = jobs.stop_requests.get(JOB, fence)
    assert seen is not None and seen.kind == "cancel" and seen.reason == "contract"
    assert jobs.heartbeats.beat(JOB, fence, 10_000, host="h", pid=1, child=2) == "cancel"
    lease.release()


# -- recompute requests and recoveries -----------------------------------------------------
def test_a_recompute_request_first_meets_a_job_once(jobs: JobNamespace) -> None:
    assert jobs.recompute_requests.seen(JOB, "run-1") is None
    first = jobs.recompute_requests.first_seen(JOB, "run-1")
    assert jobs.recompute_requests.first_seen(JOB, "run-1") == first
    assert jobs.recompute_requests.seen(JOB, "run-1") == first
    assert jobs.recompute_requests.seen(JOB, "run-2") is None


def test_only_the_holder_appends_to_the_recovery_log(jobs: JobNamespace) -> None:
    lease = jobs.lease(JOB, ttl=10)
    fence = lease.acquire()
    assert jobs.recoveries.record(JOB, fence, RecoveryStep(event="adopted", text="output found", predecessor=1))
    lease.release()
    assert not jobs.recoveries.record(JOB, fence, RecoveryStep(event="adopted", text="too late"))
    [step] = jobs.recoveries.get(JOB)
    assert (step.event, step.text, step.predecessor, int(step.fence or 0)) == ("adopted", "output found", 1, int(fence))


# -- the server and handing on -------------------------------------------------------------
def test_the_facts_doctor_judges(jobs: JobNamespace) -> None:
    assert not jobs.in_use()  # a fresh namespace reads as unused, not as an empty store
    lease = jobs.lease(JOB, ttl=10)
    lease.acquire()
    assert jobs.in_use()
    assert isinstance(jobs.server_facts(), ServerFacts)
    found = jobs.namespaces_on_server()
    assert isinstance(found, Namespaces) and jobs.namespace in found.names
    assert jobs.failover_facts() is None  # no failover manager in front of these backends
    assert jobs.ping_latency(2) > 0
    lease.release()


def test_a_namespace_hands_itself_on(jobs: JobNamespace) -> None:
    assert json.loads(json.dumps(jobs.connection_kwargs())) == jobs.connection_kwargs()
    fresh = jobs.fresh()
    try:
        assert fresh.namespace == jobs.namespace and fresh.settings == jobs.settings
        lease = fresh.lease(JOB, ttl=10)
        lease.acquire()
        assert set(jobs.held_leases()) == {JOB}  # the same store, on connections of its own
        lease.release()
    finally:
        fresh.close()
