"""The calendar's shape (views/calendar.py): states, a mapped task as one cell, the runs of a date."""

from __future__ import annotations

from datetime import UTC, datetime

from airflow_jrs.views.calendar import CalendarJob, calendar_json, cell_state

DAY1, DAY2 = datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 2, tzinfo=UTC)


def test_a_planned_status_reads_as_the_calendar_state_running_first():
    assert cell_state("committed", "SUCCEEDED", running=False) == "committed"
    assert cell_state("failed", "CANCELED", running=False) == "canceled"
    assert cell_state("failed", "STOPPED", running=False) == "stopped"
    assert cell_state("failed", "FAILED", running=False) == "failed"
    assert cell_state("unreadable", None, running=False) == "quarantined"
    assert cell_state("failed", "FAILED", running=True) == "running"  # its retry holds the lease


def test_a_mapped_task_is_one_cell_showing_its_most_urgent_map_index_with_counts():
    jobs = [
        CalendarJob(DAY1, "ingest", "d.ingest.1", "committed"),
        CalendarJob(DAY1, "per", "d.per.1.map-0", "committed", 0),
        CalendarJob(DAY1, "per", "d.per.1.map-1", "missing", 1),
        CalendarJob(DAY1, "per", "d.per.1.map-2", "failed", 2),
        CalendarJob(DAY2, "ingest", "d.ingest.2", "missing"),
        CalendarJob(DAY2, "per", "d.per.2.map-0", "committed", 0),
    ]
    doc = calendar_json("d", jobs, {DAY1.timestamp(): ["scheduled__1", "manual__1"]})
    assert doc["jobs"] == [{"task_id": "ingest", "label": "ingest"}, {"task_id": "per", "label": "per (mapped)"}]
    first, second = doc["dates"]
    assert first["logical_date"] == DAY1.isoformat() and first["run_ids"] == ["scheduled__1", "manual__1"]
    assert first["run_key"] == "2024-01-01"  # the job id's date part (domain/identity.py)
    assert first["cells"]["ingest"] == {"state": "committed", "job_id": "d.ingest.1"}
    assert first["cells"]["per"] == {
        "state": "failed", "job_id": "d.per.1.map-2",
        "map": {"count": 3, "states": {"committed": 1, "missing": 1, "failed": 1}},
    }  # fmt: skip
    assert second["run_ids"] == [] and second["cells"]["per"]["state"] == "committed"
