"""Job identity (stable per data interval) and the decision table, without Redis or Spark."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from types import SimpleNamespace

import pytest

from airflow_jrs.domain.decision import Action, decide
from airflow_jrs.domain.identity import default_job_id, fingerprint
from airflow_jrs.store import EntryState, JobResult, JobResultEntry, JobStatus

DAY = datetime(2013, 1, 1, tzinfo=UTC)


def ctx(run_id="scheduled__2013-01-01", map_index=-1, **extra):
    ti = SimpleNamespace(dag_id="flights", task_id="ingest.submit", map_index=map_index)
    return {"ti": ti, "run_id": run_id, **extra}


def test_scheduled_backfill_and_cleared_runs_of_one_date_are_the_same_job():
    ids = {
        default_job_id(ctx(run_id, data_interval_start=DAY, logical_date=DAY))
        for run_id in ("scheduled__2013-01-01", "backfill__2013-01-01", "manual__2026-11-22T07:00:00")
    }
    assert ids == {"flights.ingest.submit.2013-01-01"}


def test_partition_key_wins_over_dates():
    assert default_job_id(ctx(partition_key="us-east", data_interval_start=DAY)) == "flights.ingest.submit.us-east"


def test_logical_date_is_used_when_the_interval_is_absent_and_times_keep_their_hour():
    when = datetime(2013, 1, 1, 6, 30, tzinfo=timezone(timedelta(hours=1)))
    assert default_job_id(ctx(logical_date=when)) == "flights.ingest.submit.2013-01-01T053000Z"


def test_manual_run_without_logical_date_falls_back_to_its_run_id():
    job_id = default_job_id(ctx(run_id="manual__2026-11-22T07:00:00+00:00", logical_date=None))
    assert job_id == "flights.ingest.submit.run-manual__2026-11-22T07:00:00+00:00"


def test_mapped_task_instances_are_distinct_jobs():
    assert default_job_id(ctx(map_index=3, data_interval_start=DAY)).endswith("2013-01-01.map-3")


def test_unsafe_characters_are_replaced_and_long_ids_are_shortened_with_a_hash():
    # replaced characters add a digest of the key as given: "a;b" and "a<b" stay two jobs
    assert default_job_id(ctx(partition_key="a b{c}")) == "flights.ingest.submit.a_b_c_-h429cf96eb03a"
    assert default_job_id(ctx(partition_key="a;b")) != default_job_id(ctx(partition_key="a<b"))
    long_a = default_job_id(ctx(partition_key="x" * 300 + "a"))
    long_b = default_job_id(ctx(partition_key="x" * 300 + "b"))
    assert len(long_a) <= 200 and long_a != long_b


def test_fingerprint_covers_code_args_and_version_but_not_resources():
    base = {"application_bytes": b"print(1)", "application": "app.py", "application_args": ["--date", "d"]}
    fp = fingerprint(**base, job_version=None)
    assert fingerprint(**base, job_version=None) == fp
    assert fingerprint(**{**base, "application_bytes": b"print(2)"}, job_version=None) != fp
    assert fingerprint(**{**base, "application_args": ["--date", "e"]}, job_version=None) != fp
    assert fingerprint(**base, job_version="2") != fp


def entry(status=JobStatus.SUCCEEDED, state=EntryState.CLEAN, fp="fp1"):
    return JobResultEntry(JobResult(job_id="j", status=status, fingerprint=fp), state)


@pytest.mark.parametrize(
    ("found", "fp", "accept", "action", "supersede"),
    [
        (None, "fp1", False, Action.RUN, False),
        (entry(), "fp1", False, Action.SKIP, False),
        (entry(state=EntryState.DIRTY), "fp1", False, Action.SKIP, False),  # dirty: cleanup only
        (entry(), "fp2", False, Action.RUN, True),  # the job changed
        (entry(), "fp2", True, Action.SKIP, False),  # ... unless old results are accepted
        (entry(fp=None), "fp2", False, Action.SKIP, False),  # no fingerprint: never recompute on missing data
        (entry(status=JobStatus.FAILED), "fp1", False, Action.RUN, True),
        (entry(status=JobStatus.CANCELED, state=EntryState.DIRTY), "fp1", False, Action.RUN, True),
        (entry(status=JobStatus.STOPPED), "fp1", True, Action.RUN, True),
    ],
)
def test_decision_table(found, fp, accept, action, supersede):
    decision = decide(found, fp, accept_changed_fingerprint=accept)
    assert (decision.action, decision.supersede) == (action, supersede)
    assert decision.reason
