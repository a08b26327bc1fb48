"""One date is one job, whatever kind of run computes it (a manual run for a past date included).

Two layers. First the rule itself (:func:`airflow_jrs.domain.identity.default_job_id`) on
contexts shaped as Airflow 3.3's Task SDK builds them for each run type (``logical_date`` and
``data_interval_*`` come together or not at all; ``dag_run.run_type``; ``partition_key``).
Then the installed Airflow's own timetables: what their scheduled and backfill runs get
(``next_dagrun_info_v2``/``iter_partition_dagrun_infos``) and the data interval a manual run
gets (``infer_manual_data_interval``, called as ``airflow dags trigger`` calls it, with the
trigger time, and as the REST API and the UI call it, with the logical date). The real-scheduler
version is ``tests/airflow/test_manual_run_identity.py``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_jrs.compat import AIRFLOW_V_3_3_PLUS, AIRFLOW_VERSION_TEXT, next_dagrun_info
from airflow_jrs.domain.identity import default_job_id, run_key

DATE = datetime(2024, 1, 2, tzinfo=UTC)
#: When the user typed ``airflow dags trigger`` (a user's report).
NOW = datetime(2026, 11, 27, 8, 35, 47, tzinfo=UTC)
JOB = "newbie_sales.sales.submit.2024-01-02"


def run(run_type: str, run_id: str, logical_date=None, interval=None, partition_key=None) -> dict[str, Any]:
    """The fields of a task's template context the rule may read, as the Task SDK fills them."""
    dag_run = SimpleNamespace(
        run_type=run_type, run_id=run_id, logical_date=logical_date, partition_key=partition_key,
        data_interval_start=interval[0] if interval else None, data_interval_end=interval[1] if interval else None,
    )  # fmt: skip
    context: dict[str, Any] = {
        "ti": SimpleNamespace(dag_id="newbie_sales", task_id="sales.submit", map_index=-1),
        "run_id": run_id,
        "dag_run": dag_run,
        "partition_key": partition_key,
    }
    if logical_date is not None:  # task_runner.py: "logical_date and data_interval either coexist or be None"
        context |= {"logical_date": logical_date, "data_interval_start": interval[0], "data_interval_end": interval[1]}
    return context


DAY = timedelta(days=1)


@pytest.mark.parametrize(
    "context",
    [
        run("scheduled", "scheduled__2024-01-02T00:00:00+00:00", DATE, (DATE, DATE + DAY)),  # cron data interval
        run("scheduled", "scheduled__2024-01-02T00:00:00+00:00", DATE, (DATE, DATE)),  # cron trigger
        run("backfill", "backfill__2024-01-02T00:00:00+00:00", DATE, (DATE, DATE + DAY)),
        # `airflow dags trigger --logical-date 2024-01-02`: interval inferred from the trigger time
        run("manual", "manual__2026-11-27T08:35:47+00:00", DATE, (NOW - DAY, NOW)),
        # the REST API and the UI on a cron data-interval @daily: [L - 1 day, L]
        run("manual", "manual__2026-11-27T08:35:47.5+00:00", DATE, (DATE - DAY, DATE)),
        # a backfill with --reprocess-behavior completed over that manual run: type relabelled, interval kept
        run("backfill", "manual__2026-11-27T08:35:47+00:00", DATE, (NOW - DAY, NOW)),
        run("operator_triggered", "trig__1", DATE, (NOW, NOW)),  # TriggerDagRunOperator(logical_date=...)
        run("asset_materialization", "asset_materialization__x", DATE, (DATE - DAY, DATE)),
    ],
    ids=[
        "scheduled-interval",
        "scheduled-trigger",
        "backfill",
        "manual-cli",
        "manual-rest",
        "reprocessed-manual",
        "operator-triggered",
        "asset-materialization",
    ],
)
def test_every_run_of_one_logical_date_is_one_job(context: dict[str, Any]) -> None:
    assert default_job_id(context) == JOB


def test_a_run_without_a_logical_date_is_its_own_job_and_its_clears_reuse_it() -> None:
    manual = run("manual", "manual__2026-11-27T08:35:47.123456+00:00")
    assert run_key(manual) == "run-manual__2026-11-27T08:35:47.123456+00:00"
    assert default_job_id(manual) == "newbie_sales.sales.submit.run-manual__2026-11-27T08:35:47.123456+00:00"
    assert default_job_id(manual) == default_job_id(run("manual", "manual__2026-11-27T08:35:47.123456+00:00"))
    asset = run("asset_triggered", "asset_triggered__2026-11-27T08:40:00+00:00")
    assert default_job_id(asset) != default_job_id(manual)
    assert run_key(asset) == "run-asset_triggered__2026-11-27T08:40:00+00:00"


def test_a_partition_key_names_the_job_whatever_made_the_run() -> None:
    keys = {
        default_job_id(run(kind, f"{kind}__x", partition_key="2024-01-02T00:00:00"))
        for kind in ("scheduled", "backfill", "manual", "asset_triggered")
    }
    assert keys == {"newbie_sales.sales.submit.2024-01-02T00:00:00"}
    assert default_job_id(run("manual", "m", DATE, (NOW, NOW), partition_key="eu")).endswith(".eu")


def test_an_off_grid_logical_date_keeps_its_time() -> None:
    noon = DATE + timedelta(hours=12)
    assert run_key(run("manual", "m", noon, (NOW, NOW))) == "2024-01-02T120000Z"


@pytest.mark.parametrize(
    ("instant", "key"),
    [
        (datetime(2024, 1, 2, tzinfo=UTC), "2024-01-02"),
        (datetime(2024, 1, 2, 6, 0, 0, tzinfo=UTC), "2024-01-02T060000Z"),
        (datetime(2026, 11, 27, 8, 35, 47, tzinfo=UTC), "2026-11-27T083547Z"),
        # another zone: the same instant, the same key
        (datetime(2024, 1, 2, 1, 0, tzinfo=timezone(timedelta(hours=1))), "2024-01-02"),
        (datetime(2024, 1, 2, 7, 0, tzinfo=timezone(timedelta(hours=1))), "2024-01-02T060000Z"),
    ],
)
def test_whole_second_dates_keep_the_job_ids_stored_results_have(instant: datetime, key: str) -> None:
    # Pinned literally: results already in a store are found under exactly these ids.
    assert run_key(run("scheduled", "s", instant, (instant, instant))) == key
    assert default_job_id(run("scheduled", "s", instant, (instant, instant))) == f"newbie_sales.sales.submit.{key}"


def test_whole_second_pendulum_dates_keep_their_job_ids() -> None:
    import pendulum

    assert run_key(run("scheduled", "s", pendulum.datetime(2024, 1, 2), (DATE, DATE))) == "2024-01-02"
    at_six = pendulum.datetime(2024, 1, 2, 7, tz="Europe/Paris")
    assert run_key(run("scheduled", "s", at_six, (DATE, DATE))) == "2024-01-02T060000Z"


def test_two_runs_less_than_a_second_apart_are_two_jobs() -> None:
    # TriggerDagRunOperator stamps each run it triggers with the trigger time (microseconds and all).
    first, second = NOW + timedelta(microseconds=250_000), NOW + timedelta(microseconds=750_000)
    a = run("manual", "manual__a", first, (first, first))
    b = run("manual", "manual__b", second, (second, second))
    assert run_key(a) == "2026-11-27T083547.250000Z"
    assert run_key(b) == "2026-11-27T083547.750000Z"
    assert default_job_id(a) == "newbie_sales.sales.submit.2026-11-27T083547.250000Z"
    assert default_job_id(a) != default_job_id(b)
    assert default_job_id(a) != default_job_id(run("manual", "manual__c", NOW, (NOW, NOW)))


def test_a_fraction_of_a_second_after_midnight_is_not_the_days_job() -> None:
    just_after = DATE + timedelta(microseconds=1)
    assert run_key(run("manual", "m", just_after, (NOW, NOW))) == "2024-01-02T000000.000001Z"
    assert default_job_id(run("manual", "m", just_after, (NOW, NOW))) != JOB


# -- the installed Airflow's timetables ----------------------------------------------------------


def _timetables() -> list[tuple[str, Any]]:
    from airflow.timetables.interval import CronDataIntervalTimetable, DeltaDataIntervalTimetable
    from airflow.timetables.trigger import CronTriggerTimetable, DeltaTriggerTimetable

    return [
        ("cron data interval", CronDataIntervalTimetable("0 0 * * *", UTC)),
        ("cron trigger", CronTriggerTimetable("0 0 * * *", timezone=UTC)),
        ("cron trigger, interval 1 day", CronTriggerTimetable("0 0 * * *", timezone=UTC, interval=DAY)),
        ("delta data interval", DeltaDataIntervalTimetable(DAY)),
        ("delta trigger", DeltaTriggerTimetable(DAY)),
        ("hourly cron trigger", CronTriggerTimetable("0 * * * *", timezone=UTC)),
    ]


def _scheduled_infos(timetable: Any) -> list[Any]:
    import pendulum
    from airflow.timetables.base import TimeRestriction

    restriction = TimeRestriction(pendulum.instance(DATE - DAY), pendulum.instance(DATE + DAY), catchup=True)
    infos, info = [], None
    while (info := next_dagrun_info(timetable, info, restriction)) is not None:
        infos.append(info)
    return infos


def _old_rule(context: dict[str, Any]) -> str:
    """The earlier rule, before a manual run became its date's job: the data interval's start first."""
    return run_key({k: v for k, v in context.items() if k != "logical_date"})


@pytest.mark.parametrize("name", [name for name, _ in _timetables()])
def test_scheduled_runs_keep_their_job_ids_and_manual_runs_of_their_dates_meet_them(name: str) -> None:
    import pendulum

    timetable = dict(_timetables())[name]
    infos = _scheduled_infos(timetable)
    assert infos
    for info in infos:
        # The scheduler and a backfill create the run with info.logical_date and info.data_interval.
        interval = (info.data_interval.start, info.data_interval.end)
        scheduled = run("scheduled", "scheduled__x", info.logical_date, interval)
        backfilled = run("backfill", "backfill__x", info.logical_date, interval)
        assert default_job_id(scheduled) == default_job_id(backfilled)
        assert run_key(scheduled) == _old_rule(scheduled)  # job ids already stored stay valid

        logical = info.logical_date
        now = pendulum.instance(NOW)
        from_cli = timetable.infer_manual_data_interval(run_after=now)  # api/common/trigger_dag.py
        from_rest = timetable.infer_manual_data_interval(run_after=logical)  # core_api datamodels/dag_run.py
        for interval in (from_cli, from_rest):
            manual = run("manual", "manual__x", logical, (interval.start, interval.end))
            assert default_job_id(manual) == default_job_id(scheduled), (name, interval)
    # The reported bug, pinned on this Airflow: the manual run's interval is not its date's.
    manual_interval = timetable.infer_manual_data_interval(run_after=pendulum.instance(NOW))
    assert manual_interval.start != infos[-1].logical_date


@pytest.mark.skipif(
    not AIRFLOW_V_3_3_PLUS,
    reason=f"iter_partition_dagrun_infos arrived in Airflow 3.3 (this is {AIRFLOW_VERSION_TEXT})",
)
def test_partitioned_timetable_runs_are_keyed_by_their_partition() -> None:
    from airflow.timetables.trigger import CronPartitionTimetable

    timetable = CronPartitionTimetable("0 0 * * *", timezone=UTC)
    infos = list(timetable.iter_partition_dagrun_infos(earliest=DATE, latest=DATE + DAY))
    assert [i.partition_key for i in infos] == ["2024-01-02T00:00:00", "2024-01-03T00:00:00"]
    for info in infos:
        assert info.logical_date is None and info.data_interval is None
        job_id = default_job_id(run("scheduled", "scheduled__x", partition_key=info.partition_key))
        assert job_id == default_job_id(run("manual", "manual__y", partition_key=info.partition_key))
