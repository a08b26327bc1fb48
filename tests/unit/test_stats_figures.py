"""Spark time spent and avoided (views/stats.py): the one rule the CLI, dashboard and calendar show."""

from __future__ import annotations

from datetime import UTC, datetime

from airflow_jrs.domain.model import Attempt, EntryState, JobResult, JobStatus
from airflow_jrs.domain.payload import SKIPPED_RESULT_KEY, result_payload
from airflow_jrs.views.stats import PayloadRow, default_since, duration, outcome, stats_json
from airflow_jrs.views.stats import dates_json as dates

DAY1, DAY2 = datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 2, tzinfo=UTC)


def payload(seconds: float | None, *, reused: bool, job: str = "d.t.2024-01-01", **extra: object) -> dict:
    """A submit task's real payload (domain/payload.py), of a result that ran ``seconds``."""
    start = datetime(2024, 1, 1, 3, 0, tzinfo=UTC)
    end = start.fromtimestamp(start.timestamp() + seconds, UTC) if seconds is not None else None
    result = JobResult(
        job_id=job, status=JobStatus.SUCCEEDED, start_time=start, end_time=end,
        attempt=Attempt("d", "t", "scheduled__2024-01-01", 1),
    )  # fmt: skip
    return result_payload(result, EntryState.CLEAN, skipped=reused, **extra)


def row(value: object, *, dag: str = "d", run: str = "r1", task: str = "t", index: int = -1,
        key: str = "return_value", when: datetime | None = DAY1) -> PayloadRow:  # fmt: skip
    return PayloadRow(dag, run, task, index, key, value, when)


def test_computed_results_count_their_run_time_as_spent_and_reused_ones_as_avoided():
    doc = stats_json(
        [
            row(payload(600, reused=False)),
            row(payload(600, reused=True), run="r2"),
            row(payload(600, reused=True), run="r3"),
        ],
        since=DAY1,
    )
    total = doc["total"]
    assert (total["computed"], total["reused"], total["adopted"], total["untimed"]) == (1, 2, 0, 0)
    assert total["spent_seconds"] == 600.0 and total["avoided_seconds"] == 1200.0
    assert total["spent"] == "10 min 00 s" and total["avoided"] == "20 min 00 s"
    assert doc["since"] == DAY1.isoformat() and doc["dags"] == [{"dag_id": "d", **total}]


def test_an_adopted_output_is_computed_once_and_counted_as_adopted():
    one = outcome(payload(90, reused=False, adopted_from=7))
    assert one is not None and one.adopted and not one.reused and one.seconds == 90.0
    total = stats_json([row(payload(90, reused=False, adopted_from=7))], since=None)["total"]
    assert (total["computed"], total["adopted"], total["spent_seconds"]) == (1, 1, 90.0)


def test_a_task_that_skipped_counts_once_from_its_jrs_result_payload():
    skipped = payload(30, reused=True, decided_in="triggerer")
    rows = [row(skipped, key=SKIPPED_RESULT_KEY), row(skipped, key=SKIPPED_RESULT_KEY, task="t2")]
    # both keys of one task instance (should never happen): the return value wins
    rows += [row(payload(5, reused=False), task="t2")]
    total = stats_json(rows, since=None)["total"]
    assert (total["reused"], total["computed"], total["avoided_seconds"], total["spent_seconds"]) == (1, 1, 30.0, 5.0)


def test_what_is_not_a_submit_payload_is_not_counted():
    rows = [
        row([payload(10, reused=False)], task="cleanup"),  # a cleanup's list of payloads
        row({"job_id": "x"}, task="old"),  # no reused flag: not a submit task's payload
        row("s3://bucket/xcom/123", task="custom_backend"),  # a custom XCom backend's reference
        row(None, task="none"),
        row({**payload(10, reused=False), "guarded": False}, task="unguarded"),  # ran without the store
    ]
    assert stats_json(rows, since=None)["total"]["computed"] == 0


def test_a_result_without_times_or_ending_before_it_started_is_counted_without_time():
    skewed = payload(60, reused=True)
    skewed["end_time"], skewed["start_time"] = skewed["start_time"], skewed["end_time"]
    total = stats_json([row(payload(None, reused=False)), row(skewed, run="r2")], since=None)["total"]
    assert (total["computed"], total["reused"], total["untimed"]) == (1, 1, 2)
    assert total["spent_seconds"] == total["avoided_seconds"] == 0.0


def test_each_map_index_is_a_task_instance_of_its_own():
    rows = [row(payload(10, reused=i > 0, job=f"d.t.2024-01-01.map-{i}"), index=i) for i in range(3)]
    total = stats_json(rows, since=None)["total"]
    assert (total["computed"], total["reused"], total["avoided_seconds"]) == (1, 2, 20.0)


def test_dags_are_listed_by_time_avoided_and_dates_by_logical_date():
    rows = [
        row(payload(10, reused=True), dag="small"),
        row(payload(100, reused=True), dag="big"),
        row(payload(100, reused=False), dag="big", run="r0", when=DAY2),
        row(payload(7, reused=True), dag="big", run="manual", when=None),  # a run without a logical date
    ]
    assert [d["dag_id"] for d in stats_json(rows, since=None)["dags"]] == ["big", "small"]
    doc = dates([r for r in rows if r.dag_id == "big"], dag_id="big", start=DAY1, end=DAY2)
    assert list(doc["dates"]) == [DAY1.isoformat(), DAY2.isoformat()]  # the calendar's logical_date
    assert doc["dates"][DAY1.isoformat()]["avoided_seconds"] == 100.0
    assert doc["dates"][DAY2.isoformat()]["spent_seconds"] == 100.0
    assert doc["total"]["reused"] == 2 and doc["start"] == "2024-01-01" and doc["end"] == "2024-01-02"


def test_durations_read_in_two_units_at_most_and_the_default_window_starts_at_midnight():
    assert [duration(s) for s in (0, 12.4, 247, 3720, 93784)] == ["0 s", "12 s", "4 min 07 s", "1 h 02 min", "1 d 2 h"]
    assert default_since(datetime(2024, 3, 31, 17, 5, tzinfo=UTC)) == datetime(2024, 3, 1, tzinfo=UTC)
