"""The JobResultStore contract (FLIP-194), one suite for every backend.

Every test here uses only the public :class:`JobResultStore` API; those that take ``store`` (or
``backend``) run once per backend of ``BACKENDS`` (``conftest.py``), and the few raw views the
contract needs (bytes where an entry lives, a quarantined entry, the expiry, the event feed)
come from the backend's harness (``harness.py``). What only the Redis backend has (literal key
names, hash-tag slots, the index, Lua scripts) is pinned in ``test_redis_store_internals.py``.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
import redis
from harness import GARBAGE, Backend, entry_doc, ok

import airflow_jrs
from airflow_jrs.exceptions import (
    CorruptJobResultError,
    InvalidJobIdError,
    JobResultEntryAlreadyExistsError,
    JobResultEntryChangedError,
    JobResultQuarantinedError,
    LeaseLostError,
    NoSuchJobResultError,
    StoreUnavailableError,
    UnsupportedSchemaVersionError,
)
from airflow_jrs.store import (
    Attempt,
    EntryState,
    JobResult,
    JobResultEntry,
    JobResultStore,
    JobStatus,
)
from airflow_jrs.store.results.base import UNSUCCESSFUL_ONLY

# ---------------------------------------------------------------------------------------------
# JobResult
# ---------------------------------------------------------------------------------------------


def test_job_result_needs_only_job_id_and_status() -> None:
    result = JobResult(job_id="x", status=JobStatus.SUCCEEDED)
    assert result.status is JobStatus.SUCCEEDED
    assert result.outputs == {} and result.metrics == {} and result.fence is None


def test_job_result_status_given_as_string_is_coerced() -> None:
    assert JobResult(job_id="x", status="FAILED").status is JobStatus.FAILED  # type: ignore[arg-type]


@pytest.mark.parametrize("status", ["succeeded", "DONE", "", 1])
def test_job_result_with_unknown_status_raises_value_error(status: object) -> None:
    with pytest.raises(ValueError, match="SUCCEEDED"):
        JobResult(job_id="x", status=status)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# create_dirty_result
# ---------------------------------------------------------------------------------------------


def test_created_result_is_dirty(store: JobResultStore) -> None:
    entry = store.create_dirty_result(ok("j"))
    assert entry.is_dirty and entry.created_at is not None and entry.created_at.tzinfo is not None
    assert store.get_entry("j") == entry


@pytest.mark.parametrize("first_state", ["dirty", "clean"])
def test_second_create_of_a_job_raises_already_exists(store: JobResultStore, first_state: str) -> None:
    store.create_dirty_result(ok("j", application_id="first"))
    if first_state == "clean":
        store.mark_result_as_clean("j")
    with pytest.raises(JobResultEntryAlreadyExistsError) as info:
        store.create_dirty_result(ok("j", application_id="second"))
    assert info.value.job_id == "j" and info.value.namespace == store.namespace
    entry = store.get_full_entry("j")  # a clean reference's full result: in its document
    assert entry is not None and entry.result.application_id == "first"
    assert entry.state is EntryState(first_state)


def test_a_failed_result_also_blocks_a_second_create_without_supersede(store: JobResultStore) -> None:
    store.create_dirty_result(JobResult(job_id="j", status=JobStatus.FAILED))
    with pytest.raises(JobResultEntryAlreadyExistsError):
        store.create_dirty_result(ok("j"))


_CHILD_CREATE = """
import os, sys
from airflow_jrs.exceptions import JobResultEntryAlreadyExistsError
from airflow_jrs.store import JobResult, JobStatus
store = {store_expr}
for job_id in {job_ids!r}:
    print("ready", flush=True)
    sys.stdin.readline()  # the barrier: every process waits here until the parent says go
    app = f"app-{{os.getpid()}}"
    try:
        store.create_dirty_result(JobResult(job_id=job_id, status=JobStatus.SUCCEEDED, application_id=app))
        print("created", job_id, app, flush=True)
    except JobResultEntryAlreadyExistsError:
        print("exists", job_id, app, flush=True)
"""


def test_concurrent_creates_from_many_processes_have_exactly_one_winner(
    backend: Backend, store: JobResultStore
) -> None:
    n_procs, job_ids = 8, ["race.a", "race.b", "race.c"]
    code = _CHILD_CREATE.format(store_expr=backend.child_store_expr(store.namespace), job_ids=job_ids)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(n_procs)
    ]
    outcomes: dict[str, list[tuple[str, str]]] = {j: [] for j in job_ids}
    try:
        for job_id in job_ids:
            for p in procs:  # wait until every process stands at the barrier
                assert p.stdout is not None and p.stderr is not None
                line = p.stdout.readline()
                assert line.strip() == "ready", f"child said {line!r}: {p.stderr.read() if not line else ''}"
            for p in procs:  # release them together
                assert p.stdin is not None
                p.stdin.write("go\n")
                p.stdin.flush()
            for p in procs:
                assert p.stdout is not None
                outcome, got_job, app = p.stdout.readline().split()
                assert got_job == job_id
                outcomes[job_id].append((outcome, app))
        for p in procs:
            _, err = p.communicate(timeout=30)
            assert p.returncode == 0, err
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()

    for job_id in job_ids:
        winners = [app for outcome, app in outcomes[job_id] if outcome == "created"]
        assert len(winners) == 1, outcomes[job_id]
        assert sum(outcome == "exists" for outcome, _ in outcomes[job_id]) == n_procs - 1
        entry = store.get_entry(job_id)
        assert entry is not None and entry.is_dirty
        assert entry.result.application_id == winners[0]
    assert sorted(r.job_id for r in store.get_dirty_results()) == job_ids


# ---------------------------------------------------------------------------------------------
# mark_result_as_clean
# ---------------------------------------------------------------------------------------------


def test_mark_result_as_clean_turns_a_dirty_entry_clean(store: JobResultStore) -> None:
    created = store.create_dirty_result(ok("j"))
    assert store.mark_result_as_clean("j") is True
    entry = store.get_entry("j")
    assert entry is not None and entry.is_clean
    assert entry.result == created.result and entry.created_at == created.created_at


def test_mark_result_as_clean_twice_is_a_noop(store: JobResultStore) -> None:
    store.create_dirty_result(ok("j"))
    assert store.mark_result_as_clean("j") is True
    assert store.mark_result_as_clean("j") is False
    assert store.has_clean_job_result_entry("j")
    assert store.get_dirty_results() == []


def test_mark_result_as_clean_of_unknown_job_raises_no_such_job_result(store: JobResultStore) -> None:
    with pytest.raises(NoSuchJobResultError) as info:
        store.mark_result_as_clean("never.created")
    assert info.value.job_id == "never.created" and info.value.namespace == store.namespace
    assert not store.has_job_result_entry("never.created")


def test_mark_result_as_clean_accepts_every_entry_that_reads_as_dirty(backend: Backend, store: JobResultStore) -> None:
    # e.g. an entry repaired by hand with json.dumps' default separators: '{"state": "dirty", ...'
    backend.write_raw_entry(store, "j", json.dumps(entry_doc("j")).encode())
    assert store.has_dirty_job_result_entry("j")
    assert store.mark_result_as_clean("j") is True
    assert store.has_clean_job_result_entry("j")


# mark_result_as_clean(expected=...): a compare-and-set on the entry a cleanup read


def test_mark_result_as_clean_of_the_entry_read_commits_it(store: JobResultStore) -> None:
    store.create_dirty_result(ok("j"))
    read = store.get_entry("j")
    assert read is not None
    assert store.mark_result_as_clean("j", expected=read) is True
    assert store.has_clean_job_result_entry("j")
    assert store.mark_result_as_clean("j", expected=read) is False  # a retried cleanup: a no-op


def test_mark_result_as_clean_leaves_a_result_written_after_the_read_dirty(store: JobResultStore) -> None:
    store.create_dirty_result(ok("j", fingerprint="a" * 64))
    read = store.get_entry("j")
    assert read is not None
    store.create_dirty_result(ok("j", fingerprint="b" * 64), supersede=True)  # a changed-code run
    with pytest.raises(JobResultEntryChangedError) as info:
        store.mark_result_as_clean("j", expected=read)
    assert info.value.job_id == "j" and info.value.namespace == store.namespace
    now = store.get_entry("j")
    assert now is not None and now.is_dirty and now.result.fingerprint == "b" * 64
    assert [r.job_id for r in store.get_dirty_results()] == ["j"]


def test_mark_result_as_clean_refuses_when_another_result_was_committed_meanwhile(store: JobResultStore) -> None:
    store.create_dirty_result(ok("j", fingerprint="a" * 64))
    read = store.get_entry("j")
    assert read is not None
    store.create_dirty_result(ok("j", fingerprint="b" * 64), supersede=True)
    store.mark_result_as_clean("j")  # the new result's own cleanup committed it
    with pytest.raises(JobResultEntryChangedError):
        store.mark_result_as_clean("j", expected=read)


def test_mark_result_as_clean_of_an_entry_forgotten_after_the_read_raises_no_such_job_result(
    store: JobResultStore,
) -> None:
    store.create_dirty_result(ok("j"))
    read = store.get_entry("j")
    store.forget_result("j")
    with pytest.raises(NoSuchJobResultError):
        store.mark_result_as_clean("j", expected=read)


def test_mark_result_as_clean_compares_a_non_canonical_entry_by_what_it_reads_as(
    backend: Backend, store: JobResultStore
) -> None:
    backend.write_raw_entry(store, "j", json.dumps(entry_doc("j")).encode())  # repaired by hand
    read = store.get_entry("j")
    assert store.mark_result_as_clean("j", expected=read) is True
    assert store.has_clean_job_result_entry("j")


def test_mark_result_as_clean_with_delete_on_commit_retried_with_the_entry_read_is_a_noop(
    backend: Backend, namespace: str
) -> None:
    store = backend.make_store(namespace, delete_on_commit=True)
    store.create_dirty_result(ok("j"))
    read = store.get_entry("j")
    assert store.mark_result_as_clean("j", expected=read) is True
    assert store.mark_result_as_clean("j", expected=read) is False


def test_mark_result_as_clean_needs_an_entry_read_from_the_store_of_that_job(store: JobResultStore) -> None:
    store.create_dirty_result(ok("j"))
    store.create_dirty_result(ok("k"))
    with pytest.raises(ValueError, match="entry of job 'k'"):
        store.mark_result_as_clean("j", expected=store.get_entry("k"))
    with pytest.raises(ValueError, match="read from the store"):
        store.mark_result_as_clean("j", expected=JobResultEntry(result=ok("j"), state=EntryState.DIRTY))
    assert store.has_dirty_job_result_entry("j")


# ---------------------------------------------------------------------------------------------
# has_* and listings
# ---------------------------------------------------------------------------------------------


def test_has_entry_checks_of_a_job_without_entry_are_all_false(store: JobResultStore) -> None:
    assert not store.has_job_result_entry("j")
    assert not store.has_dirty_job_result_entry("j")
    assert not store.has_clean_job_result_entry("j")
    assert store.get_entry("j") is None


def test_has_entry_checks_of_a_dirty_entry(store: JobResultStore) -> None:
    store.create_dirty_result(ok("j"))
    assert store.has_job_result_entry("j")
    assert store.has_dirty_job_result_entry("j")
    assert not store.has_clean_job_result_entry("j")


def test_has_entry_checks_of_a_clean_entry(store: JobResultStore) -> None:
    store.create_dirty_result(ok("j"))
    store.mark_result_as_clean("j")
    assert store.has_job_result_entry("j")
    assert not store.has_dirty_job_result_entry("j")
    assert store.has_clean_job_result_entry("j")


def test_get_dirty_results_returns_only_dirty_entries(store: JobResultStore) -> None:
    for job_id in ["a", "b", "c", "d"]:
        store.create_dirty_result(ok(job_id, application_id=f"app-{job_id}"))
    store.mark_result_as_clean("b")
    store.mark_result_as_clean("d")
    dirty = store.get_dirty_results()
    assert sorted(r.job_id for r in dirty) == ["a", "c"]
    assert all(isinstance(r, JobResult) for r in dirty)
    assert {r.application_id for r in dirty} == {"app-a", "app-c"}
    assert all(e.is_dirty for e in store.get_dirty_entries())


@pytest.mark.parametrize("status", [JobStatus.FAILED, JobStatus.CANCELED, JobStatus.STOPPED])
def test_an_unsuccessful_result_is_listed_as_unsuccessful_not_as_cleanup_pending(
    store: JobResultStore, status: JobStatus
) -> None:
    store.create_dirty_result(ok("done"))
    store.create_dirty_result(JobResult(job_id="gave-up", status=status))
    assert store.has_dirty_job_result_entry("gave-up")  # written dirty, like every result
    assert [r.job_id for r in store.get_dirty_results()] == ["done"]
    assert [(r.job_id, r.status) for r in store.get_unsuccessful_results()] == [("gave-up", status)]
    store.mark_result_as_clean("gave-up")  # a cleanup that runs for it commits it as usual
    assert [e.job_id for e in store.get_unsuccessful_entries()] == ["gave-up"]
    assert store.get_unsuccessful_entries()[0].is_clean


def test_a_later_success_takes_a_job_out_of_the_unsuccessful_listing(store: JobResultStore) -> None:
    store.create_dirty_result(JobResult(job_id="j", status=JobStatus.FAILED))
    store.create_dirty_result(ok("j"), supersede=True)
    assert store.get_unsuccessful_results() == []
    assert [r.job_id for r in store.get_dirty_results()] == ["j"]
    store.create_dirty_result(JobResult(job_id="k", status=JobStatus.FAILED))
    store.forget_result("k")
    assert store.get_unsuccessful_results() == []


def test_list_entries_returns_newest_first_with_their_state(store: JobResultStore) -> None:
    for job_id in ["a", "b", "c"]:
        store.create_dirty_result(ok(job_id))
        time.sleep(0.005)  # creation times are kept in milliseconds
    store.mark_result_as_clean("a")
    entries = store.list_entries()
    assert [e.job_id for e in entries] == ["c", "b", "a"]
    assert [e.state for e in entries] == [EntryState.DIRTY, EntryState.DIRTY, EntryState.CLEAN]
    assert [e.job_id for e in store.list_entries(limit=1, offset=1)] == ["b"]


# ---------------------------------------------------------------------------------------------
# Retention of clean entries
# ---------------------------------------------------------------------------------------------


def test_clean_entries_are_kept_forever_by_default(backend: Backend, store: JobResultStore) -> None:
    store.create_dirty_result(ok("j"))
    store.mark_result_as_clean("j")
    assert backend.entry_ttl_ms(store, "j") == -1
    with pytest.raises(JobResultEntryAlreadyExistsError):  # a resubmission is refused
        store.create_dirty_result(ok("j"))


def test_clean_ttl_puts_an_expiry_on_the_clean_entry(backend: Backend, namespace: str) -> None:
    store = backend.make_store(namespace, clean_ttl=60)  # long enough for a stalled test to read it
    store.create_dirty_result(ok("j"))
    assert backend.entry_ttl_ms(store, "j") == -1  # dirty entries never expire
    store.mark_result_as_clean("j")
    assert 55_000 < backend.entry_ttl_ms(store, "j") <= 60_000  # seconds, not milliseconds
    assert store.has_clean_job_result_entry("j")


def test_clean_entry_with_a_ttl_disappears_from_reads_and_listings(backend: Backend, namespace: str) -> None:
    store = backend.make_store(namespace, clean_ttl=timedelta(milliseconds=50))
    store.create_dirty_result(ok("gone"))
    store.create_dirty_result(ok("kept"))
    store.mark_result_as_clean("gone")
    time.sleep(0.2)
    assert not store.has_job_result_entry("gone")
    assert [e.job_id for e in store.list_entries()] == ["kept"]


def test_delete_on_commit_removes_the_entry_when_marked_clean(backend: Backend, namespace: str) -> None:
    store = backend.make_store(namespace, delete_on_commit=True)
    store.create_dirty_result(ok("j"))
    assert store.mark_result_as_clean("j") is True
    assert not store.has_job_result_entry("j")
    assert backend.raw_entry(store, "j") is None
    assert store.get_dirty_results() == [] and store.list_entries() == []
    assert store.mark_result_as_clean("j") is False  # a second commit (cleanup retried) is a no-op
    assert [h.state.value for h in store.get_history("j")] == ["clean"]
    store.create_dirty_result(ok("j"))  # Flink's behaviour: the job is accepted again


@pytest.mark.parametrize("bad", [0, -1, timedelta(0)])
def test_non_positive_clean_ttl_is_rejected(backend: Backend, namespace: str, bad: object) -> None:
    with pytest.raises(ValueError, match="clean_ttl"):
        backend.make_store(namespace, clean_ttl=bad)


def test_purge_deletes_old_clean_entries_and_keeps_dirty_and_recent_ones(store: JobResultStore) -> None:
    from datetime import timedelta

    for job_id in ("old-clean", "old-dirty"):
        store.create_dirty_result(JobResult(job_id=job_id, status=JobStatus.SUCCEEDED))
    store.mark_result_as_clean("old-clean")
    assert store.purge_clean_entries(timedelta(hours=1)) == 0  # nothing is an hour old yet
    assert store.purge_clean_entries(timedelta(0)) == 1
    assert not store.has_job_result_entry("old-clean")
    assert store.has_dirty_job_result_entry("old-dirty")
    assert [e.job_id for e in store.list_entries()] == ["old-dirty"]


# ---------------------------------------------------------------------------------------------
# Namespaces
# ---------------------------------------------------------------------------------------------


def test_namespaces_isolate_entries_of_the_same_job_id(backend: Backend, namespace: str) -> None:
    a = backend.make_store(f"{namespace}-a")
    b = backend.make_store(f"{namespace}-b")
    a.create_dirty_result(ok("same.job", application_id="in-a"))
    assert not b.has_job_result_entry("same.job")
    assert b.get_dirty_results() == [] and b.list_entries() == []
    b.create_dirty_result(ok("same.job", application_id="in-b"))
    a.mark_result_as_clean("same.job")
    assert a.has_clean_job_result_entry("same.job")
    assert b.has_dirty_job_result_entry("same.job")
    assert [r.application_id for r in b.get_dirty_results()] == ["in-b"]
    with pytest.raises(NoSuchJobResultError):
        backend.make_store(f"{namespace}-c").mark_result_as_clean("same.job")


@pytest.mark.parametrize("bad", ["", "a b", "a{b", "a}b", "a:b", "x" * 65])
def test_invalid_namespace_is_rejected(backend: Backend, bad: str) -> None:
    with pytest.raises(InvalidJobIdError, match="namespace"):
        backend.make_store(bad)


def test_namespace_with_a_trailing_newline_is_rejected(backend: Backend) -> None:
    with pytest.raises(InvalidJobIdError):
        backend.make_store("prod\n")


# ---------------------------------------------------------------------------------------------
# Round trip
# ---------------------------------------------------------------------------------------------


def test_every_result_field_survives_a_round_trip(backend: Backend, store: JobResultStore) -> None:
    job_id = "dag.task.2013-01-01"
    lease = backend.new_lease(store, job_id)
    token = lease.acquire()
    ist = timezone(timedelta(hours=5, minutes=30))
    result = JobResult(
        job_id=job_id,
        status=JobStatus.SUCCEEDED,
        application_id="application_1700000000000_0042",
        outputs={"flights": "s3://bucket/flights/2013-01-01/", "summary": "file:///tmp/x y/ü.json"},
        metrics={"rows": 842, "ratio": 0.25, "late": None, "tags": ["a", "b"], "nested": {"k": 1}},
        checkpoint_location="/chk/flights",
        fingerprint="sha256:0123abcd",
        start_time=datetime(2013, 1, 1, 5, 30, 0, 123456, tzinfo=ist),
        end_time=datetime(2013, 1, 1, 1, 2, 3, tzinfo=UTC),
        attempt=Attempt(dag_id="dag", task_id="task", run_id="scheduled__2013-01-01", try_number=3, map_index=7),
        error="WARN: 3 late rows dropped",
    )
    created = store.create_dirty_result(result, fence=token)
    read = store.get_entry(job_id)
    assert read is not None
    assert read.result == result.with_fence(int(token)) == created.result  # a result keeps the token only
    assert read.result.fence == int(token)
    assert read.result.start_time is not None and read.result.start_time.utcoffset() == timedelta(hours=5.5)
    assert read.result.end_time is not None and read.result.end_time.utcoffset() == timedelta(0)
    assert read.created_at == created.created_at
    store.mark_result_as_clean(job_id)
    clean = store.get_entry(job_id)
    assert clean is not None and clean.result == read.result


@pytest.mark.parametrize("status", list(JobStatus))
def test_every_status_survives_a_round_trip(store: JobResultStore, status: JobStatus) -> None:
    store.create_dirty_result(
        JobResult(job_id="j", status=status, error="boom" if status.value != "SUCCEEDED" else None)
    )
    entry = store.get_entry("j")
    assert entry is not None and entry.result.status is status


def test_unfenced_create_does_not_claim_a_fence(store: JobResultStore) -> None:
    store.create_dirty_result(ok("j", fence=41))
    entry = store.get_entry("j")
    assert entry is not None and entry.result.fence is None


# ---------------------------------------------------------------------------------------------
# Corrupt entries and quarantine
# ---------------------------------------------------------------------------------------------


def _corrupt(backend: Backend, store: JobResultStore, job_id: str) -> None:
    store.create_dirty_result(ok(job_id))
    backend.write_raw_entry(store, job_id, GARBAGE)


def test_corrupt_entry_is_quarantined_and_blocks_its_job(backend: Backend, store: JobResultStore) -> None:
    store.create_dirty_result(ok("other"))
    _corrupt(backend, store, "victim")

    with pytest.raises(CorruptJobResultError) as info:
        store.get_entry("victim")
    assert backend.result_location(store, "victim") in str(info.value)
    assert info.value.key == backend.quarantine_location(store, "victim")
    assert info.value.job_id == "victim"
    assert backend.raw_quarantined(store, "victim") == GARBAGE
    assert backend.raw_entry(store, "victim") is None
    assert store.get_quarantined() == ["victim"]

    # fail closed: every later read and write of the job says "quarantined"
    for call in (
        lambda: store.get_entry("victim"),
        lambda: store.has_job_result_entry("victim"),
        lambda: store.create_dirty_result(ok("victim")),
        lambda: store.create_dirty_result(ok("victim"), supersede=True),
        lambda: store.mark_result_as_clean("victim"),
    ):
        with pytest.raises(JobResultQuarantinedError) as q:
            call()
        assert q.value.key == backend.quarantine_location(store, "victim")

    assert [r.job_id for r in store.get_dirty_results()] == ["other"]
    assert [e.job_id for e in store.list_entries()] == ["other"]
    assert backend.raw_quarantined(store, "victim") == GARBAGE


def test_release_quarantine_returns_the_raw_bytes_and_frees_the_job(backend: Backend, store: JobResultStore) -> None:
    _corrupt(backend, store, "victim")
    with pytest.raises(CorruptJobResultError):
        store.get_entry("victim")
    assert store.release_quarantine("victim") == GARBAGE
    assert not store.has_job_result_entry("victim")
    assert store.get_quarantined() == []
    assert backend.raw_quarantined(store, "victim") is None
    store.create_dirty_result(ok("victim"))
    assert store.has_dirty_job_result_entry("victim")


def test_release_quarantine_of_a_job_not_in_quarantine_raises(store: JobResultStore) -> None:
    store.create_dirty_result(ok("j"))
    with pytest.raises(NoSuchJobResultError):
        store.release_quarantine("j")
    assert store.has_dirty_job_result_entry("j")


def test_get_dirty_results_skips_and_quarantines_a_corrupt_entry(backend: Backend, store: JobResultStore) -> None:
    store.create_dirty_result(ok("a"))
    _corrupt(backend, store, "b")
    store.create_dirty_result(ok("c"))
    assert sorted(r.job_id for r in store.get_dirty_results()) == ["a", "c"]
    assert store.get_quarantined() == ["b"]
    assert backend.raw_quarantined(store, "b") == GARBAGE
    with pytest.raises(JobResultQuarantinedError):
        store.get_entry("b")


def test_list_entries_skips_and_quarantines_a_corrupt_entry(backend: Backend, store: JobResultStore) -> None:
    store.create_dirty_result(ok("a"))
    _corrupt(backend, store, "b")
    assert [e.job_id for e in store.list_entries()] == ["a"]
    assert store.get_quarantined() == ["b"]
    assert backend.raw_quarantined(store, "b") == GARBAGE


@pytest.mark.parametrize(
    "raw",
    [
        b"[1, 2]",
        b'{"state":"dirty"}',
        b'{"state":"dirty","v":1}',
        b'{"state":"dirty","v":true,"result":{"job_id":"j","status":"SUCCEEDED"}}',
        b'{"state":"dirty","v":1,"result":{"job_id":"j","status":"MAYBE"}}',
        b'{"state":"sticky","v":1,"result":{"job_id":"j","status":"SUCCEEDED"}}',
        b'{"state":"dirty","v":1,"result":{"job_id":"someone.else","status":"SUCCEEDED"}}',
    ],
    ids=["array", "no-version", "no-result", "bool-version", "bad-status", "bad-state", "other-job"],
)
def test_structurally_invalid_entries_are_quarantined(backend: Backend, store: JobResultStore, raw: bytes) -> None:
    backend.write_raw_entry(store, "j", raw)
    with pytest.raises(CorruptJobResultError):
        store.get_entry("j")
    assert backend.raw_quarantined(store, "j") == raw
    with pytest.raises(JobResultQuarantinedError):
        store.get_entry("j")


_RESULT_NOT_AN_OBJECT = b'{"state":"dirty","v":1,"result":["j"]}'


def test_entry_whose_result_is_not_an_object_is_quarantined(backend: Backend, store: JobResultStore) -> None:
    backend.write_raw_entry(store, "j", _RESULT_NOT_AN_OBJECT)
    with pytest.raises(CorruptJobResultError):
        store.get_entry("j")
    assert backend.raw_quarantined(store, "j") == _RESULT_NOT_AN_OBJECT


def test_get_dirty_results_survives_an_entry_whose_result_is_not_an_object(
    backend: Backend, store: JobResultStore
) -> None:
    store.create_dirty_result(ok("a"))
    store.create_dirty_result(ok("b"))
    backend.write_raw_entry(store, "b", _RESULT_NOT_AN_OBJECT)
    assert [r.job_id for r in store.get_dirty_results()] == ["a"]
    assert store.get_quarantined() == ["b"]


def test_create_with_supersede_over_a_corrupt_entry_quarantines_it(backend: Backend, store: JobResultStore) -> None:
    _corrupt(backend, store, "j")
    with pytest.raises(CorruptJobResultError):
        store.create_dirty_result(JobResult(job_id="j", status=JobStatus.FAILED), supersede=True)
    assert backend.raw_quarantined(store, "j") == GARBAGE


def test_entry_of_a_future_schema_version_is_refused_and_left_untouched(
    backend: Backend, store: JobResultStore
) -> None:
    raw = json.dumps(entry_doc("j", v=99), separators=(",", ":")).encode()
    backend.write_raw_entry(store, "j", raw)
    with pytest.raises(UnsupportedSchemaVersionError) as info:
        store.get_entry("j")
    assert info.value.version == 99 and info.value.job_id == "j"
    assert info.value.key == backend.result_location(store, "j")
    assert "99" in str(info.value) and "Upgrade" in str(info.value)
    assert backend.raw_entry(store, "j") == raw
    assert backend.raw_quarantined(store, "j") is None
    assert store.get_quarantined() == []
    with pytest.raises(JobResultEntryAlreadyExistsError):
        store.create_dirty_result(ok("j"))
    assert backend.raw_entry(store, "j") == raw


def test_supersede_does_not_replace_an_entry_of_a_future_schema_version(
    backend: Backend, store: JobResultStore
) -> None:
    raw = json.dumps(entry_doc("j", v=99, status="FAILED"), separators=(",", ":")).encode()
    backend.write_raw_entry(store, "j", raw)
    try:
        with pytest.raises(UnsupportedSchemaVersionError):
            store.create_dirty_result(ok("j"), supersede=True)
    finally:
        assert backend.raw_entry(store, "j") == raw


def test_mark_clean_does_not_rewrite_a_dirty_entry_of_a_future_schema_version(
    backend: Backend, store: JobResultStore
) -> None:
    # The clean script flips the state by prefix: it must not do so for a format it does not know.
    raw = json.dumps(entry_doc("j", v=99), separators=(",", ":")).encode()
    backend.write_raw_entry(store, "j", raw)
    with pytest.raises(UnsupportedSchemaVersionError):
        store.mark_result_as_clean("j")
    assert backend.raw_entry(store, "j") == raw


# ---------------------------------------------------------------------------------------------
# Plain data: no pickle
# ---------------------------------------------------------------------------------------------

_PICKLERS = {"pickle", "_pickle", "cPickle", "dill", "cloudpickle", "shelve", "joblib"}


def test_no_module_of_airflow_jrs_uses_pickle() -> None:
    root = Path(airflow_jrs.__file__).parent
    offenders: list[str] = []
    files = sorted(root.rglob("*.py"))
    assert len(files) > 5
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names = [node.value]  # importlib.import_module("pickle") and friends
            elif isinstance(node, ast.Name):
                names = [node.id]
            offenders += [
                f"{path.relative_to(root)}:{node.lineno}: {n}"  # type: ignore[attr-defined]
                for n in names
                if n.split(".")[0] in _PICKLERS
            ]
    assert offenders == []


# ---------------------------------------------------------------------------------------------
# Job ids
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("job_id", "problem"),
    [
        ("", "non-empty"),
        ("x" * 201, "201 characters; the limit is 200"),
        ("a b", "' '"),
        ("a{b", "'{'"),
        ("a}b", "'}'"),
        ("a\nb", r"'\\n'"),
        pytest.param(
            "abc\n",
            r"'\\n'",
        ),
    ],
    ids=["empty", "too-long", "space", "open-brace", "close-brace", "newline", "trailing-newline"],
)
def test_invalid_job_id_raises_invalid_job_id_error(store: JobResultStore, job_id: str, problem: str) -> None:
    for call in (
        lambda: JobResult(job_id=job_id, status=JobStatus.SUCCEEDED),
        lambda: store.get_entry(job_id),
        lambda: store.has_job_result_entry(job_id),
        lambda: store.mark_result_as_clean(job_id),
        lambda: store.forget_result(job_id),
    ):
        with pytest.raises(InvalidJobIdError, match=problem) as info:
            call()
        assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("job_id", [None, 42, b"bytes"])
def test_non_string_job_id_raises_invalid_job_id_error(store: JobResultStore, job_id: object) -> None:
    with pytest.raises(InvalidJobIdError, match="non-empty string"):
        store.get_entry(job_id)  # type: ignore[arg-type]


@pytest.mark.parametrize("job_id", ["x" * 200, "dag.task.2013-01-01T00:00:00+00:00", "a/b@c=d_e-f"])
def test_valid_job_ids_at_the_edges_are_accepted(store: JobResultStore, job_id: str) -> None:
    store.create_dirty_result(ok(job_id))
    assert store.has_dirty_job_result_entry(job_id)


# ---------------------------------------------------------------------------------------------
# Supersede and forget
# ---------------------------------------------------------------------------------------------


def test_supersede_replaces_a_failed_entry_and_keeps_it_in_history(store: JobResultStore) -> None:
    old = store.create_dirty_result(JobResult(job_id="j", status=JobStatus.FAILED, error="OOM"))
    store.mark_result_as_clean("j")
    new = store.create_dirty_result(ok("j", application_id="retry"), supersede=True)
    assert store.get_entry("j") == new
    history = store.get_history("j")
    assert [(e.result, e.state) for e in history] == [(old.result, EntryState.CLEAN)]
    assert [r.job_id for r in store.get_dirty_results()] == ["j"]


def test_supersede_replaces_a_succeeded_entry_of_another_fingerprint(store: JobResultStore) -> None:
    old = store.create_dirty_result(ok("j", fingerprint="fp-1"))
    new = store.create_dirty_result(ok("j", fingerprint="fp-2"), supersede=True)
    assert store.get_entry("j") == new
    assert [e.result for e in store.get_history("j")] == [old.result]


SHA_A, SHA_B = "0a" * 32, "0b" * 32


def test_supersede_compares_sha256_fingerprints_exactly(store: JobResultStore) -> None:
    store.create_dirty_result(ok("j", fingerprint=SHA_A))
    with pytest.raises(JobResultEntryAlreadyExistsError):
        store.create_dirty_result(ok("j", fingerprint=SHA_A), supersede=True)
    new = store.create_dirty_result(ok("j", fingerprint=SHA_B), supersede=True)
    assert store.get_entry("j") == new
    newest = store.create_dirty_result(ok("j", fingerprint="sha256:other"), supersede=True)
    assert store.get_entry("j") == newest
    with pytest.raises(JobResultEntryAlreadyExistsError):
        store.create_dirty_result(ok("j", fingerprint="sha256:other"), supersede=True)


def test_supersede_replaces_a_fingerprinted_success_with_an_unfingerprinted_one(store: JobResultStore) -> None:
    store.create_dirty_result(ok("j", fingerprint="fp-1"))
    store.create_dirty_result(ok("j"), supersede=True)
    entry = store.get_entry("j")
    assert entry is not None and entry.result.fingerprint is None


@pytest.mark.parametrize("fingerprint", ["fp-1", None])
def test_supersede_never_replaces_a_success_of_the_same_fingerprint(
    store: JobResultStore, fingerprint: str | None
) -> None:
    old = store.create_dirty_result(ok("j", fingerprint=fingerprint, application_id="first"))
    store.mark_result_as_clean("j")
    with pytest.raises(JobResultEntryAlreadyExistsError):
        store.create_dirty_result(ok("j", fingerprint=fingerprint, application_id="second"), supersede=True)
    entry = store.get_full_entry("j")
    assert entry is not None and entry.result == old.result and entry.is_clean
    assert store.get_history("j") == []


@pytest.mark.parametrize(("old_fp", "new_fp"), [("fp-1", "fp-2"), ("fp-1", None), (None, "fp-2"), (SHA_A, SHA_B)])
def test_an_unsuccessful_only_supersede_never_replaces_a_success_of_any_fingerprint(
    store: JobResultStore, old_fp: str | None, new_fp: str | None
) -> None:
    # Canceling a run of changed code (or one without a fingerprint)
    # must not push the old code's SUCCEEDED result to history: done is done.
    old = store.create_dirty_result(ok("j", fingerprint=old_fp))
    canceled = JobResult(job_id="j", status=JobStatus.CANCELED, fingerprint=new_fp, error="canceled")
    with pytest.raises(JobResultEntryAlreadyExistsError):
        store.create_dirty_result(canceled, supersede=UNSUCCESSFUL_ONLY)
    entry = store.get_entry("j")
    assert entry is not None and entry.result == old.result and store.get_history("j") == []


@pytest.mark.parametrize("status", [JobStatus.FAILED, JobStatus.CANCELED, JobStatus.STOPPED])
def test_an_unsuccessful_only_supersede_replaces_an_unsuccessful_entry(
    store: JobResultStore, status: JobStatus
) -> None:
    old = store.create_dirty_result(JobResult(job_id="j", status=status, fingerprint="fp-1", error="before"))
    stopped = JobResult(job_id="j", status=JobStatus.STOPPED, fingerprint="fp-1", error="stopped")
    new = store.create_dirty_result(stopped, supersede=UNSUCCESSFUL_ONLY)
    assert store.get_entry("j") == new
    assert [e.result for e in store.get_history("j")] == [old.result]


def test_supersede_accepts_only_its_documented_modes(store: JobResultStore) -> None:
    with pytest.raises(ValueError, match="supersede must be"):
        store.create_dirty_result(ok("j"), supersede="always")  # type: ignore[arg-type]
    assert store.get_entry("j") is None


def test_history_is_newest_first(store: JobResultStore) -> None:
    for n in range(3):
        store.create_dirty_result(JobResult(job_id="j", status=JobStatus.FAILED, error=f"try {n}"), supersede=True)
    assert [e.result.error for e in store.get_history("j")] == ["try 1", "try 0"]


def test_history_is_capped_at_history_limit(backend: Backend, namespace: str) -> None:
    store = backend.make_store(namespace, history_limit=2)
    for n in range(5):
        store.create_dirty_result(JobResult(job_id="j", status=JobStatus.FAILED, error=f"try {n}"), supersede=True)
    assert [e.result.error for e in store.get_history("j")] == ["try 3", "try 2"]


def test_forget_result_moves_the_entry_to_history_and_frees_the_job(store: JobResultStore) -> None:
    created = store.create_dirty_result(ok("j", fingerprint="fp"))
    store.mark_result_as_clean("j")
    forgotten = store.forget_result("j")
    assert forgotten is not None and forgotten.is_clean and forgotten.result == created.result
    assert not store.has_job_result_entry("j")
    assert store.list_entries() == []
    assert store.get_history("j") == [forgotten]
    again = store.create_dirty_result(ok("j", fingerprint="fp"))
    assert store.get_entry("j") == again


def test_forget_a_dirty_result_also_drops_it_from_dirty_results(store: JobResultStore) -> None:
    store.create_dirty_result(ok("j"))
    store.forget_result("j")
    assert store.get_dirty_results() == []


def test_every_way_into_history_says_why_when_and_who(backend: Backend, namespace: str) -> None:
    # Who, when and why: rerun (after a failure), superseded (another fingerprint), forgotten (a
    # person), committed (delete-on-commit): each history item carries its reason, time and actor.
    from airflow_jrs.store import Actor

    store = backend.make_store(namespace)
    started = datetime.now(UTC)
    store.create_dirty_result(JobResult(job_id="j", status=JobStatus.FAILED, error="OOM"))
    by = Attempt(dag_id="d", task_id="t", run_id="r2", try_number=2)
    store.create_dirty_result(ok("j", fingerprint="fp-1", attempt=by), supersede=True)
    store.create_dirty_result(ok("j", fingerprint="fp-2"), supersede=True)
    store.forget_result("j", expected=store.get_entry("j"), actor=Actor(via="ui", user="alice"))
    notes = [h.moved for h in store.get_history("j")]
    assert all(n is not None and n.moved_at is not None and n.moved_at >= started for n in notes)
    assert [n.reason for n in notes if n] == ["forgotten", "superseded", "rerun"]
    assert notes[0] and notes[0].actor == Actor(via="ui", user="alice")
    assert notes[2] and notes[2].actor and notes[2].actor.attempt == by  # the attempt that ran it again

    deleting = backend.make_store(namespace, delete_on_commit=True)
    deleting.create_dirty_result(ok("k"))
    assert deleting.mark_result_as_clean("k") is True
    committed = deleting.get_history("k")[0]
    assert committed.is_clean and committed.moved is not None and committed.moved.reason == "committed"
    assert deleting.mark_result_as_clean("k") is False  # a retried cleanup still sees it committed


def test_forget_unknown_job_raises_no_such_job_result(store: JobResultStore) -> None:
    with pytest.raises(NoSuchJobResultError) as info:
        store.forget_result("never.created")
    assert info.value.job_id == "never.created"
    assert store.get_history("never.created") == []


# ---------------------------------------------------------------------------------------------
# Fenced writes
# ---------------------------------------------------------------------------------------------


def test_fenced_create_with_the_current_token_writes_and_drops_the_intent(
    backend: Backend, store: JobResultStore
) -> None:
    lease = backend.new_lease(store, "j")
    token = lease.acquire()
    backend.put_intent(store, "j", b'{"spec": "file:///specs/j.json"}')
    entry = store.create_dirty_result(ok("j"), fence=token)
    assert entry.result.fence == int(token)
    assert not backend.has_intent(store, "j")
    read = store.get_entry("j")
    assert read is not None and read.result.fence == int(token)


@pytest.mark.parametrize("which", ["stale", "never-issued", "no-lease"])
def test_fenced_create_with_a_token_that_does_not_hold_the_lease_writes_nothing(
    backend: Backend, store: JobResultStore, which: str
) -> None:
    first = backend.new_lease(store, "j")
    old_token = first.acquire()
    first.release()
    if which == "no-lease":
        token = old_token
    else:
        new_token = backend.new_lease(store, "j").acquire()
        assert new_token > old_token
        token = old_token if which == "stale" else new_token + 100
    backend.put_intent(store, "j", b'{"spec": "file:///specs/j.json"}')

    with backend.events(store) as drain:
        with pytest.raises(LeaseLostError) as info:
            store.create_dirty_result(ok("j", application_id="zombie"), fence=token)
        assert drain(0) == []
    assert info.value.fence == token and info.value.job_id == "j"
    assert not store.has_job_result_entry("j")
    assert backend.raw_entry(store, "j") is None
    assert store.get_dirty_results() == [] and store.list_entries() == []
    assert backend.has_intent(store, "j")  # the new holder's intent survives


def test_a_stale_holders_forget_is_refused_and_the_newer_result_stays(backend: Backend, store: JobResultStore) -> None:
    # A stale holder's late forget. Timeline: attempt N takes the lease to recompute the committed result R0
    # and reads it; N pauses; N+1 takes the lease over, forgets R0 under its fence and commits R1;
    # N wakes and forgets what it read. Its forget must be refused: R1 stays, history holds R0 only.
    r0 = store.create_dirty_result(ok("j", application_id="r0"))
    store.mark_result_as_clean("j")
    stale = backend.new_lease(store, "j")
    n = stale.acquire()
    read_by_n = store.get_entry("j")
    assert read_by_n is not None and store.full_entry(read_by_n).result == r0.result
    newer = backend.new_lease(store, "j")
    holder = newer.peek()
    assert holder is not None and holder.fence == n
    n1 = newer.take_over(holder)
    assert n1 is not None and n1 > n
    store.forget_result("j", fence=n1, expected=store.get_entry("j"))
    r1 = store.create_dirty_result(ok("j", application_id="r1"), fence=n1)
    store.mark_result_as_clean("j")

    with pytest.raises(LeaseLostError) as info:
        store.forget_result("j", fence=n, expected=read_by_n)
    assert info.value.fence == n and info.value.job_id == "j"
    now = store.get_full_entry("j")
    assert now is not None and now.result == r1.result and now.is_clean
    assert [store.full_entry(h).result.application_id for h in store.get_history("j")] == ["r0"]


def test_a_forget_of_an_entry_that_changed_since_it_was_read_is_refused(store: JobResultStore) -> None:
    # The operator path (CLI, UI) holds no lease: its forget is a compare-and-set on the entry the
    # person looked at. A result written after they looked is not forgotten in its place.
    store.create_dirty_result(JobResult(job_id="j", status=JobStatus.FAILED, application_id="looked-at"))
    looked_at = store.get_entry("j")
    newer = store.create_dirty_result(ok("j", application_id="newer"), supersede=True)
    with pytest.raises(JobResultEntryChangedError) as info:
        store.forget_result("j", expected=looked_at)
    assert info.value.job_id == "j"
    assert store.get_entry("j") == newer
    assert [h.result.application_id for h in store.get_history("j")] == ["looked-at"]


def test_fenced_create_checks_the_fence_before_the_existing_entry(store: JobResultStore) -> None:
    store.create_dirty_result(ok("j", application_id="first"))
    with pytest.raises(LeaseLostError):
        store.create_dirty_result(ok("j"), fence=12345)


# ---------------------------------------------------------------------------------------------
# Store unavailable
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "operation",
    ["get_entry", "has_job_result_entry", "create_dirty_result", "mark_result_as_clean", "get_dirty_results"],
)
def test_unreachable_store_raises_store_unavailable(backend: Backend, namespace: str, operation: str) -> None:
    store = backend.unreachable_store(namespace)
    calls: dict[str, Callable[[], object]] = {
        "get_entry": lambda: store.get_entry("j"),
        "has_job_result_entry": lambda: store.has_job_result_entry("j"),
        "create_dirty_result": lambda: store.create_dirty_result(ok("j")),
        "mark_result_as_clean": lambda: store.mark_result_as_clean("j"),
        "get_dirty_results": lambda: store.get_dirty_results(),
    }
    with pytest.raises(StoreUnavailableError) as info:
        calls[operation]()
    assert not isinstance(info.value, redis.RedisError)
    assert info.value.__cause__ is not None
    assert namespace in str(info.value)


# ---------------------------------------------------------------------------------------------
# Events
# ---------------------------------------------------------------------------------------------


def test_every_create_and_clean_publishes_one_event(backend: Backend, store: JobResultStore) -> None:
    with backend.events(store) as drain:
        store.create_dirty_result(ok("j"))
        store.mark_result_as_clean("j")
        with pytest.raises(JobResultEntryAlreadyExistsError):
            store.create_dirty_result(ok("j"))  # refused: no event
        assert store.mark_result_as_clean("j") is False  # no-op: no event
        store.create_dirty_result(JobResult(job_id="k", status=JobStatus.FAILED))
        store.forget_result("k")
        events = drain(4)
    assert [(e["event"], e["job_id"]) for e in events] == [
        ("created", "j"),
        ("cleaned", "j"),
        ("created", "k"),
        ("forgotten", "k"),
    ]
    assert events[0]["state"] == "dirty" and events[0]["status"] == "SUCCEEDED"
    assert events[1]["state"] == "clean"
    assert events[2]["status"] == "FAILED"
    assert all(isinstance(e["ts"], float) for e in events)


def test_a_purge_a_quarantine_and_a_release_each_publish_one_event(backend: Backend, store: JobResultStore) -> None:
    """A reader that keeps entries between requests (the Job calendar's rows) learns of every
    write that changes what a job reads as, not only the three the task makes."""
    store.create_dirty_result(ok("p"))
    store.mark_result_as_clean("p")
    store.create_dirty_result(ok("q"))
    with backend.events(store) as drain:
        assert store.purge_clean_entries(timedelta(0)) == 1
        backend.write_raw_entry(store, "q", b"not json")
        with pytest.raises(CorruptJobResultError):
            store.get_entry("q")  # the read quarantines it
        store.release_quarantine("q")
        events = drain(3)
    assert [(e["event"], e["job_id"]) for e in events] == [("purged", "p"), ("quarantined", "q"), ("released", "q")]


def test_clean_with_delete_on_commit_publishes_an_event(backend: Backend, namespace: str) -> None:
    store = backend.make_store(namespace, delete_on_commit=True)
    store.create_dirty_result(ok("j"))
    with backend.events(store) as drain:
        store.mark_result_as_clean("j")
        assert [e["event"] for e in drain(1)] == ["cleaned"]


def test_a_batch_read_answers_each_job_as_its_own_read_does(backend: Backend, store: JobResultStore) -> None:
    """A plan's batch read (the calendar, ``plan``, missing-only) must say what each task's own
    read says, on every backend (Redis Cluster included): committed, dirty, none, corrupt
    (quarantined by the read) and already quarantined."""
    from airflow_jrs.store.redis.batch_read import read_entries

    store.create_dirty_result(ok("clean"))
    store.mark_result_as_clean("clean")
    store.create_dirty_result(ok("dirty"))
    _corrupt(backend, store, "corrupt")
    _corrupt(backend, store, "held")
    with pytest.raises(CorruptJobResultError):
        store.get_entry("held")  # quarantined now

    answers = read_entries(store, ["clean", "dirty", "none", "corrupt", "held"], batch=2)  # type: ignore[arg-type]

    assert answers["clean"].is_clean and answers["dirty"].is_dirty and answers["none"] is None  # type: ignore[union-attr]
    assert isinstance(answers["corrupt"], CorruptJobResultError)
    assert isinstance(answers["held"], JobResultQuarantinedError)
    assert isinstance(read_entries(store, ["corrupt"])["corrupt"], JobResultQuarantinedError)  # type: ignore[arg-type]
