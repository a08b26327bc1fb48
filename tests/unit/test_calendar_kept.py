"""The Job calendar's kept rows (airflow_jrs/plugins/calendar.py) answer what a fresh plan answers.

A real redis-server (the session's); the DAG is parsed by Airflow's DagBag from a temporary
folder and planned in its serialized form, as the page plans it. After every kind of write of
an entry (create, clean, forget, purge, quarantine, release), a lease taken and an entry's
retention ending, the kept calendar must equal the calendar planned from nothing
(:func:`airflow_jrs.actions.planning.jobs.plan_range` + :func:`airflow_jrs.views.calendar.calendar_json`),
and it must read no entry while nothing changed (Redis's own command counts: effects, not calls).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from airflow_jrs.actions.planning.dags import load_dag
from airflow_jrs.actions.planning.jobs import plan_range
from airflow_jrs.plugins import calendar as kept_calendar
from airflow_jrs.settings import resolve
from airflow_jrs.store import Attempt, JobResult, JobStatus
from airflow_jrs.store.namespace import JobNamespace
from airflow_jrs.store.redis.changes import ResultChanges
from airflow_jrs.store.redis.namespace import RedisJobNamespace
from airflow_jrs.views.calendar import CalendarJob, calendar_json, cell_state, date_facts, job_detail
from jrs_testbench.helpers import wait_until

DAG = """
from datetime import datetime, UTC
from airflow.sdk import DAG
from airflow_jrs.operators import JrsSparkSubmitOperator

with DAG("jrs_kept", schedule="@daily", start_date=datetime(2024, 1, 1, tzinfo=UTC), catchup=False):
    JrsSparkSubmitOperator(task_id="a", application="/nowhere/app.py", conn_id="spark_local", job_id="a.{{ ds }}")
    JrsSparkSubmitOperator(task_id="b", application="/nowhere/app.py", conn_id="spark_local", job_id="b.{{ ds }}")
"""
START = datetime(2024, 1, 1, tzinfo=UTC)
END = datetime(2024, 1, 10, 23, 59, tzinfo=UTC)
DAYS = [f"2024-01-{d:02d}" for d in range(1, 11)]


@pytest.fixture
def jobs(redis_url: str, namespace: str) -> Iterator[JobNamespace]:
    found = RedisJobNamespace.from_url(redis_url, resolve(arguments={"namespace": namespace}))
    kept_calendar.forget_kept()
    yield found
    found.results.changes().stop(timeout=0)
    found.close()


@pytest.fixture
def dag(dag_folder: Any) -> Any:
    return load_dag("jrs_kept", dag_folder("jrs_kept.py", DAG))


def commit(jobs: JobNamespace, job_id: str, *, clean: bool = True) -> None:
    jobs.results.create_dirty_result(
        JobResult(job_id=job_id, status=JobStatus.SUCCEEDED, attempt=Attempt("jrs_kept", "a", "r", 1))
    )
    if clean:
        jobs.results.mark_result_as_clean(job_id)


def fresh(jobs: JobNamespace, dag: Any) -> dict[str, Any]:
    """The calendar planned from nothing, as the page answered before rows were kept."""
    planned, notes = plan_range(jobs, dag, START, END, versions=None)
    held = jobs.held_leases()
    cells = [
        CalendarJob(p.logical_date, p.task_id, p.job_id,
                    cell_state(p.status, p.result_status, p.job_id in held, stale=p.stale), p.map_index,
                    detail=job_detail(p.entry), fingerprint_known=p.fingerprint_known)
        for p in planned
    ]  # fmt: skip
    doc = calendar_json("jrs_kept", cells, {}, notes)
    for row in doc["dates"]:
        day = [c for c in cells if c.logical_date and c.logical_date.isoformat() == row["logical_date"]]
        row["facts"] = date_facts(day[0].logical_date, day)["cells"]
    return doc


def kept(jobs: JobNamespace, dag: Any) -> dict[str, Any]:
    """The kept calendar, each date's tooltips' facts beside its row (as the page asks them on hover)."""
    doc: dict[str, Any] = json.loads(kept_calendar.calendar_body(jobs, ("v1", "h1"), dag, START, END))
    for row in doc["dates"]:
        text = kept_calendar.calendar_facts(jobs, ("v1", "h1"), dag, START, END, row["logical_date"])
        assert text is not None, row["logical_date"]
        row["facts"] = json.loads(text)["cells"]
    return doc


def state(doc: dict[str, Any], day: str, task: str) -> str:
    row = next(r for r in doc["dates"] if r["logical_date"].startswith(day))
    found: str = row["cells"][task]["state"]
    return found


def reads(jobs: JobNamespace) -> int:
    """How many batch reads of entries (``READ_ENTRIES`` runs) the server has answered."""
    stats = jobs.client.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0)) + int(stats.get("cmdstat_eval", {}).get("calls", 0))


def settled(jobs: JobNamespace, before: int, job_id: str) -> None:
    """Wait until the watcher handled the write of ``job_id`` just made (after epoch ``before``)."""
    changes = jobs.results.changes()
    wait_until(lambda: changes.active and not changes.unchanged_since({job_id}, before), "the write's notification")


def watching(jobs: JobNamespace) -> ResultChanges:
    changes = jobs.results.changes()
    wait_until(lambda: changes.active, "the notifications subscribed")
    return changes


def test_a_kept_calendar_reads_no_entry_until_one_changes_then_only_its_date(jobs, dag):
    for day in DAYS[:6]:
        commit(jobs, f"a.{day}")
    changes = watching(jobs)
    assert kept(jobs, dag) == fresh(jobs, dag)
    before = reads(jobs)
    assert kept(jobs, dag) == fresh(jobs, dag)  # fresh() reads once itself
    assert reads(jobs) - before == 1, "the kept calendar read entries although nothing changed"

    epoch = changes.epoch
    commit(jobs, "b.2024-01-03", clean=False)
    settled(jobs, epoch, "b.2024-01-03")
    before = reads(jobs)
    doc = kept(jobs, dag)
    assert reads(jobs) - before == 1  # one batch: the changed date's two jobs
    assert state(doc, "2024-01-03", "b") == "dirty" and doc == fresh(jobs, dag)


@pytest.mark.parametrize("write", ["create", "clean", "forget", "purge", "quarantine", "release"])
def test_every_write_of_an_entry_reaches_the_kept_calendar(jobs, dag, write):
    commit(jobs, "a.2024-01-02", clean=write != "clean")
    if write == "release":
        jobs.client.set(jobs.results.keys.result("a.2024-01-02"), b"not json")
        with pytest.raises(Exception, match="corrupt"):
            jobs.results.get_entry("a.2024-01-02")  # quarantined by the read
    changes = watching(jobs)
    assert kept(jobs, dag) == fresh(jobs, dag)
    epoch = changes.epoch
    if write == "create":
        commit(jobs, "b.2024-01-05", clean=False)
    elif write == "clean":
        jobs.results.mark_result_as_clean("a.2024-01-02")
    elif write == "forget":
        jobs.results.forget_result("a.2024-01-02", reason="test")
    elif write == "purge":
        assert jobs.results.purge_clean_entries(timedelta(0)) == 1
    elif write == "quarantine":  # another reader (a task) quarantines an entry the page kept
        jobs.client.set(jobs.results.keys.result("a.2024-01-02"), b"not json")
        with pytest.raises(Exception, match="corrupt"):
            jobs.results.get_entry("a.2024-01-02")
    else:
        jobs.results.release_quarantine("a.2024-01-02")
    settled(jobs, epoch, "b.2024-01-05" if write == "create" else "a.2024-01-02")
    assert kept(jobs, dag) == fresh(jobs, dag)


def test_a_lease_taken_or_released_shows_on_the_kept_calendar(jobs, dag, monkeypatch):
    monkeypatch.setattr(kept_calendar, "HELD_FRESH", 0.0)  # every request lists the held leases itself
    monkeypatch.setattr(kept_calendar, "HELD_USABLE", 0.0)
    commit(jobs, "a.2024-01-04")
    watching(jobs)
    kept(jobs, dag)
    lease = jobs.lease("a.2024-01-04")
    lease.acquire()
    doc = kept(jobs, dag)
    assert state(doc, "2024-01-04", "a") == "running" and doc == fresh(jobs, dag)
    lease.release()
    doc = kept(jobs, dag)
    assert state(doc, "2024-01-04", "a") == "committed" and doc == fresh(jobs, dag)


def test_a_lease_shows_within_the_listing_s_freshness_read_in_the_background(jobs, dag, monkeypatch):
    monkeypatch.setattr(kept_calendar, "HELD_FRESH", 600.0)
    commit(jobs, "a.2024-01-04")
    watching(jobs)
    kept(jobs, dag)
    lease = jobs.lease("a.2024-01-04")
    lease.acquire()
    assert state(kept(jobs, dag), "2024-01-04", "a") == "committed"  # the listing is still fresh
    monkeypatch.setattr(kept_calendar, "HELD_FRESH", 0.0)  # now too old: served while read again
    wait_until(lambda: state(kept(jobs, dag), "2024-01-04", "a") == "running", "the lease on the page", timeout=10)
    lease.release()


def test_a_kept_row_goes_when_its_entry_expires_unannounced(jobs, dag):
    commit(jobs, "a.2024-01-07")
    watching(jobs)
    jobs.client.pexpire(jobs.results.keys.result("a.2024-01-07"), 300)  # retention ends, no notification
    assert state(kept(jobs, dag), "2024-01-07", "a") == "committed"
    wait_until(lambda: not jobs.client.exists(jobs.results.keys.result("a.2024-01-07")), "the entry expired")
    doc = kept(jobs, dag)
    assert state(doc, "2024-01-07", "a") == "missing" and doc == fresh(jobs, dag)


def test_a_lost_subscription_makes_everything_read_before_it_stale(jobs):
    changes = watching(jobs)
    before = changes.epoch
    assert changes.unchanged_since({"a.2024-01-01"}, before)
    jobs.client.client_kill_filter(_type="pubsub")  # the watcher's own connection
    wait_until(lambda: changes.active and changes.epoch > before, "subscribed again")
    assert not changes.unchanged_since({"a.2024-01-01"}, before), "a write while unsubscribed would be missed"
    assert changes.unchanged_since({"a.2024-01-01"}, changes.epoch)


def test_nothing_is_kept_before_the_notifications_are_confirmed(redis_url, namespace, dag):
    """A watcher that never subscribed (a server without pub/sub, a lost connection): every
    request plans from the store, so it is never wrong, only as slow as before."""
    jobs = RedisJobNamespace.from_url(redis_url, resolve(arguments={"namespace": namespace}))
    kept_calendar.forget_kept()
    idle = ResultChanges(jobs.client, namespace)  # never started
    jobs.results.changes = lambda: idle  # type: ignore[method-assign]
    try:
        commit(jobs, "a.2024-01-01")
        assert kept(jobs, dag) == fresh(jobs, dag)
        before = reads(jobs)
        kept_calendar.calendar_body(jobs, ("v1", "h1"), dag, START, END)
        assert reads(jobs) - before == 1, "rows were kept without confirmed notifications"
    finally:
        jobs.close()


def test_the_facts_of_a_date_name_what_the_tooltip_shows_and_an_unknown_date_is_none(jobs, dag):
    commit(jobs, "a.2024-01-03")
    watching(jobs)
    doc = kept(jobs, dag)
    facts = next(r for r in doc["dates"] if r["logical_date"].startswith("2024-01-03"))["facts"]
    assert set(facts) == {"a"}, "a job without a result has no facts"
    assert facts["a"]["status"] == "SUCCEEDED" and facts["a"]["committed_at"] and facts["a"]["attempt"] == "r try 1"
    assert "detail" not in json.dumps([r["cells"] for r in doc["dates"]]), "the cells carry no facts themselves"
    assert kept_calendar.calendar_facts(jobs, ("v1", "h1"), dag, START, END, "2023-12-31T00:00:00+00:00") is None


def test_what_was_kept_under_a_replaced_watcher_is_stale_for_the_new_one(jobs):
    """The page reconnects with new settings: a new client, a new watcher. An epoch taken under
    the old one must not pass for unchanged under the new one, whose messages began later."""
    old = watching(jobs)
    kept_at = old.epoch
    for _ in range(3):
        commit(jobs, "a.2024-01-05")  # the old watcher counts these
        jobs.results.forget_result("a.2024-01-05")
    wait_until(lambda: old.epoch > kept_at + 3, "the old watcher's messages")
    # Taken before the new watcher subscribes. An epoch the old one takes *after* that (a late
    # message) is later than the new floor, so it may pass: the new watcher sees every write after it.
    read_under_old = old.epoch
    new = ResultChanges(jobs.client, jobs.namespace).start()
    try:
        wait_until(lambda: new.active, "the new watcher subscribed")
        assert not new.unchanged_since({"a.2024-01-05"}, read_under_old), "an epoch of the old watcher passed"
        assert new.unchanged_since({"a.2024-01-05"}, new.epoch)
    finally:
        new.stop(timeout=0)


def test_an_entry_rewritten_in_canonical_bytes_reaches_the_kept_calendar(jobs, dag, monkeypatch):
    """A cleanup that meets an entry edited by hand rewrites it canonically (REWRITE_ENTRY) before
    it marks it clean; an entry without its creation time gets one then, which the tooltip shows.
    A cleanup that dies between the two leaves that rewrite as the last write: it must announce
    itself like every other write, or the kept row shows the old facts for good."""
    key = jobs.results.keys.result("a.2024-01-06")
    commit(jobs, "a.2024-01-06", clean=False)
    doc = json.loads(jobs.client.get(key))
    del doc["c"]  # edited by hand: no creation time, and not in canonical bytes
    jobs.client.set(key, json.dumps(doc, indent=1))
    changes = watching(jobs)
    assert kept(jobs, dag) == fresh(jobs, dag)
    clean, calls = jobs.results._clean, []

    def dies_before_the_second(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) > 1:
            raise SystemExit("the cleanup's process is gone")
        return clean(*args, **kwargs)

    monkeypatch.setattr(jobs.results, "_clean", dies_before_the_second)
    epoch = changes.epoch
    with pytest.raises(SystemExit):
        jobs.results.mark_result_as_clean("a.2024-01-06")
    assert b'"c":' in jobs.client.get(key), "the rewrite gave the entry its creation time"
    settled(jobs, epoch, "a.2024-01-06")
    assert kept(jobs, dag) == fresh(jobs, dag)


def test_a_resubscription_during_a_check_never_passes_a_changed_job_for_unchanged(jobs):
    """The watcher's thread may begin a subscription (a reconnect) while a request checks a row:
    before it the job had changed since the row's epoch, after it the row is below the floor;
    either way it is stale. The check must not see half of each (the old floor, the emptied
    changes) and keep a row whose notification already arrived."""
    import threading

    changes = watching(jobs)
    kept_at = changes.epoch
    changes._note("a.2024-01-08")  # the row's job changed after it was read
    changes._note("b.2024-01-08")

    class Reconnecting(dict):  # the watcher's thread runs _begin() while the check reads
        def get(self, *args: Any) -> Any:
            thread = threading.Thread(target=changes._begin)
            thread.start()
            thread.join(0.5)
            return super().get(*args)

    changes._changed = Reconnecting(changes._changed)
    assert not changes.unchanged_since({"a.2024-01-08"}, kept_at)


def test_a_forked_child_trusts_no_watcher_it_inherited(jobs):
    """An API server that forks workers after a calendar was asked: the child has no watcher
    thread, so nothing its parent's watcher vouched for may pass for unchanged there."""
    import os

    from airflow_jrs.store.redis.changes import result_changes

    parent = watching(jobs)
    kept_at = parent.epoch
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer on the pipe, then leave without running pytest's teardown
        try:
            fresh_one = result_changes(jobs.client, jobs.namespace)
            said = f"{int(parent.active)}{int(parent.unchanged_since({'x'}, kept_at))}{int(fresh_one is parent)}"
        except BaseException as exc:  # any failure is the test's answer
            said = f"error {exc!r}"
        os.write(write, said.encode())
        os._exit(0)
    os.close(write)
    answer = os.read(read, 200).decode()
    os.waitpid(pid, 0)
    assert answer == "000", f"in the child: active, unchanged, same watcher = {answer}"
    assert parent.active and parent.unchanged_since({"x"}, kept_at)  # the parent's watcher is untouched
