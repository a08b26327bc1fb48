"""The recompute rule (:func:`airflow_jrs.domain.recompute.verdict`): a run's request acts once.

Pure: no Redis, no Airflow. The worker, the triggerer and ``airflow-jrs plan`` call this one
function, so this table is what all three do."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_jrs.domain.recompute import Request, RequestSeen, choose, read_request, verdict
from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.store import EntryState, JobResult, JobResultEntry, JobStatus

T0 = datetime(2024, 3, 1, 12, tzinfo=UTC)
JOB = "d.t.2024-03-01"


def entry(created: datetime | None, fence: int | None = None) -> JobResultEntry:
    result = JobResult(job_id=JOB, status=JobStatus.SUCCEEDED, fence=fence)
    return JobResultEntry(result, EntryState.CLEAN, created_at=created)


def seen(at: datetime, fence: int | None = None, in_flight: int | None = None) -> RequestSeen:
    return RequestSeen(at, fence, in_flight)


@pytest.mark.parametrize(
    ("conf", "created", "first_seen", "recompute"),
    [
        ({}, T0, None, False),  # no request
        ({"jrs_recompute": ["other"]}, T0, None, False),  # names another task
        ({"jrs_recompute": True}, T0, None, True),  # not met yet: acts now
        # a mark of an older version (a time only), or a result without a fence: times decide
        ({"jrs_recompute": True}, T0 - timedelta(seconds=1), seen(T0), True),  # result older than the request
        ({"jrs_recompute": True}, None, seen(T0), True),  # unknown age: never reused against a request
        ({"jrs_recompute": True}, T0, seen(T0), False),  # created at the request: met
        ({"jrs_recompute": ["t"]}, T0 + timedelta(days=9), seen(T0), False),  # later result (retry, clear, backfill)
        ({"jrs_recompute": [JOB]}, T0 + timedelta(days=9), seen(T0), False),
        ({"jrs_recompute": True}, T0 + timedelta(days=9), seen(T0, fence=5), False),  # result without a fence
        # the conf's own time wins over the recorded first meeting
        ({"jrs_recompute": True, "jrs_recompute_at": "2024-03-02T00:00:00Z"}, T0, seen(T0 - timedelta(days=1)), True),
        ({"jrs_recompute": "yes", "jrs_recompute_at": "2024-03-01T00:00:00"}, T0, None, False),  # naive is UTC
    ],
)
def test_a_request_recomputes_only_results_created_before_it(conf, created, first_seen, recompute):
    found = verdict(read_request(conf), task_id="t", job_id=JOB, entry=entry(created), first_seen=first_seen)
    assert found.recompute is recompute, found.reason


def test_a_met_request_says_when_it_was_met_and_that_it_acts_once():
    found = verdict(Request(everything=True), task_id="t", job_id=JOB, entry=entry(T0), first_seen=seen(T0))
    assert "met already" in found.reason and "acts once" in found.reason
    found = verdict(Request(everything=True), task_id="t", job_id=JOB, entry=entry(T0, 6), first_seen=seen(T0, 5))
    assert "met already" in found.reason and "fence 6 was taken after it" in found.reason


EARLY, LATE = T0 - timedelta(hours=1), T0 + timedelta(hours=1)


@pytest.mark.parametrize(
    ("created", "fence", "mark", "recompute"),
    [
        # fences decide, whatever the two hosts' clocks stamped (finding 7)
        (EARLY, 6, seen(T0, 5), False),  # a lease taken after the request; the writer's clock is slow
        (LATE, 5, seen(T0, 5), True),  # a lease taken before the request; the writer's clock is fast
        (LATE, 4, seen(T0, 5), True),
        (EARLY, 3, seen(T0, 5, in_flight=3), False),  # the computation in flight when the request came
        (LATE, 2, seen(T0, 5, in_flight=3), True),  # an older result, not the one in flight
    ],
)
def test_fences_order_a_request_and_a_result_not_clocks(created, fence, mark, recompute):
    found = verdict(Request(everything=True), task_id="t", job_id=JOB, entry=entry(created, fence), first_seen=mark)
    assert found.recompute is recompute, found.reason


def test_a_conf_time_is_compared_with_the_results_time_even_when_fences_are_known():
    request = read_request({"jrs_recompute": True, "jrs_recompute_at": "2024-03-01T13:00:00Z"})
    assert verdict(request, task_id="t", job_id=JOB, entry=entry(T0, 9), first_seen=seen(LATE, 1)).recompute


@pytest.mark.parametrize(
    ("conf", "match"),
    [
        ({"jrs_recompute": {"t": 1}}, "must be true/false or a list"),
        ({"jrs_recompute": True, "jrs_recompute_at": "tomorrow"}, "must be an ISO-8601 time"),
    ],
)
def test_an_unreadable_request_is_refused_by_name(conf, match):
    with pytest.raises(JrsConfigError, match=match):
        read_request(conf)


def test_a_request_is_read_from_a_task_context_or_a_bare_conf():
    class Run:
        conf = {"jrs_recompute": ["t"]}

    assert read_request({"dag_run": Run()}) == Request(everything=False, names=frozenset({"t"}))
    assert read_request({"jrs_recompute": "false"}) is None
    assert read_request(None) is None


def _choice(found: JobResultEntry | None, conf: dict, first_seen: RequestSeen | None = None, fp: str | None = None):
    return choose(found, fp, accept_changed_fingerprint=False, request=read_request(conf), task_id="t",
                  first_seen=first_seen)  # fmt: skip


def test_choose_is_the_table_then_the_request_in_one_policy():
    # The attempt (before and under its lease) and the start-in-triggerer trigger all call choose().
    assert not _choice(None, {}).reuse and not _choice(None, {}).recompute
    assert _choice(None, {}).reason == "no result in the store"
    reused = _choice(entry(T0), {})
    assert reused.reuse and not reused.recompute and reused.decision.entry is not None
    asked = _choice(entry(T0), {"jrs_recompute": True})
    assert asked.recompute and not asked.reuse and "asks to recompute" in asked.reason
    met = _choice(entry(T0 + timedelta(days=1), fence=7), {"jrs_recompute": True}, seen(T0, fence=5))
    assert met.reuse and met.verdict is not None and "met already" in met.verdict.reason
    failed = JobResultEntry(JobResult(job_id=JOB, status=JobStatus.FAILED), EntryState.CLEAN, created_at=T0)
    rerun = _choice(failed, {"jrs_recompute": True})
    assert not rerun.reuse and not rerun.recompute and rerun.decision.supersede and rerun.verdict is None
    changed = JobResultEntry(JobResult(job_id=JOB, status=JobStatus.SUCCEEDED, fingerprint="a" * 64), EntryState.CLEAN)
    assert "the job changed" in _choice(changed, {}, fp="b" * 64).reason
