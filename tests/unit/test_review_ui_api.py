"""Review findings (H7) on the Job results API, as failing tests until they are fixed.

1. ``Access.allowed`` (airflow_jrs/plugins/security.py:80) is a ``functools.cache`` on a method.
   The cache lives on the class, keyed by ``self``: it holds every request's ``Access`` (and
   its user) for the life of the API server, one entry per request and DAG asked about, never
   freed. The comment "the cache dies with it" is not what ``functools.cache`` does. Fix: a
   per-instance dict (``self._seen: dict[tuple[str, str | None], bool]``).
2. ``day_range`` (airflow_jrs/plugins/routes/deps.py:63) accepts any span, and the calendar, the
   backfill preview and the range recompute walk the DAG's timetable over all of it in the
   request thread: a viewer asking an hourly DAG's calendar from 1900 to 2100 pins an API-server
   thread for hours (the timetable walk alone measured 16 s for 5 years of @hourly). Fix: refuse
   a span longer than a bound (e.g. 366 days for the calendar) with a 400 that says the bound.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from typing import Any

import pytest
from fastapi import HTTPException

from airflow_jrs.plugins.routes.deps import day_range
from airflow_jrs.plugins.security import Access, VisibleQuery
from airflow_jrs.store import Attempt, JobResult, JobStatus, RedisJobResultStore
from airflow_jrs.store.results.documents import FolderDocuments


class _Allows:
    def is_authorized_dag(self, **_kwargs: object) -> bool:
        return True


def test_an_access_is_freed_when_its_request_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("airflow.api_fastapi.app.get_auth_manager", lambda: _Allows())
    alive = []
    for n in range(50):  # fifty requests, each asking about one DAG
        access = Access(user=object())
        assert access.allowed("GET", f"dag_{n}")
        alive.append(weakref.ref(access))
        del access
    gc.collect()
    kept = sum(ref() is not None for ref in alive)
    assert kept == 0, f"{kept} of 50 finished requests' Access objects (and users) are still held by the cache"


def test_a_date_range_of_two_centuries_is_refused_in_words() -> None:
    with pytest.raises(HTTPException) as caught:
        day_range("1900-01-01", "2100-12-31")
    assert caught.value.status_code == 400
    assert "366 days" in caught.value.detail and "shorter range" in caught.value.detail


def test_a_year_of_days_is_accepted_and_one_day_more_is_not() -> None:
    first, last = day_range("2024-01-01", "2024-12-31")  # a leap year: 366 days
    assert (first.date().isoformat(), last.date().isoformat()) == ("2024-01-01", "2024-12-31")
    with pytest.raises(HTTPException) as caught:
        day_range("2024-01-01", "2025-01-01")
    assert caught.value.status_code == 400 and "367 days" in caught.value.detail


class _AllowsOnly:
    """An auth manager letting the user read one DAG, and not "all DAGs" (``id=None``)."""

    def __init__(self, dag_id: str) -> None:
        self.dag_id = dag_id

    def is_authorized_dag(self, *, details: Any, **_kwargs: object) -> bool:
        return bool(details.id == self.dag_id)


def test_a_per_dag_user_sees_clean_results_kept_as_references(
    monkeypatch: pytest.MonkeyPatch, redis_url: str, namespace: str, tmp_path: Path
) -> None:
    store = RedisJobResultStore(redis_url, namespace, result_documents=FolderDocuments(tmp_path))
    store.create_dirty_result(JobResult("d.t.1", JobStatus.SUCCEEDED, attempt=Attempt("d", "t", "r1", 1)))
    store.mark_result_as_clean("d.t.1", expected=store.get_entry("d.t.1"))
    stub = store.get_entry("d.t.1")
    assert stub is not None and stub.summary and stub.result.attempt is None  # its DAG is in the document
    for reader, sees in (("d", True), ("other", False)):
        monkeypatch.setattr("airflow.api_fastapi.app.get_auth_manager", lambda r=reader: _AllowsOnly(r))
        query = VisibleQuery(access=Access(user=object()), results=store)
        assert [e.job_id for e in store.find_entries(query)] == (["d.t.1"] if sees else []), reader
    store.client.close()
