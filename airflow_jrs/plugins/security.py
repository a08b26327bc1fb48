"""Who may see and do what on the Job results page, and what never leaves the server.

* Each job is authorized against the DAG of the attempt that wrote its result, else of its
  lease holder (``GET`` to read, ``PUT`` to act, as Airflow's own DAG routes do); a job that
  names no DAG needs access to all DAGs. Listings leave out what the user may not read.
* The store's password is masked in every error text, should a driver ever print it.
* Every action names its user, in the job's history (:func:`actor`) and in the log (:func:`who`).
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import Any

from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails
from airflow.configuration import conf
from fastapi import HTTPException

from airflow_jrs.domain.model import EntryQuery
from airflow_jrs.hooks.jrs import JrsHook
from airflow_jrs.protocol.jobs import JobNamespace
from airflow_jrs.store import Actor, JobResultEntry, RedisJobResultStore
from airflow_jrs.store.plumbing.diagnosis import mask_password
from airflow_jrs.views.job import entry_dag


@dataclass
class Connected:
    """The jobs of the jrs connection, built once per API server process (its client pools
    connections across requests) and rebuilt after the store was unreachable."""

    hook: JrsHook
    jobs: JobNamespace
    password: str | None

    @property
    def store(self) -> RedisJobResultStore:
        return self.jobs.results


class Backend:
    """The connection's jobs for every request, and the password to mask in what they answer."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: Connected | None = None

    def get(self) -> Connected:
        with self._lock:
            if self._current is None:
                hook = JrsHook()
                try:
                    password = hook.get_connection(hook.jrs_conn_id).password
                except Exception:
                    password = None
                self._current = Connected(hook, hook.jobs(), password)
            return self._current

    def reset(self) -> None:
        with self._lock:
            current, self._current = self._current, None
        if current is not None:
            current.hook.close()

    def mask(self, text: str) -> str:
        current = self._current
        if current is not None and current.password:
            text = mask_password(text, current.password)  # as a credential, not every occurrence of the word
        return text


class Access:
    """What one user may do, asked of Airflow's auth manager once per DAG and request."""

    def __init__(self, user: Any) -> None:
        self.user = user

    @functools.cache  # noqa: B019 - one Access per request: the cache dies with it
    def allowed(self, method: str, dag_id: str | None) -> bool:
        from airflow.api_fastapi.app import get_auth_manager

        team = None
        if dag_id and conf.getboolean("core", "multi_team", fallback=False):
            from airflow.models.dag import DagModel

            team = DagModel.get_team_name(dag_id)
        return bool(
            get_auth_manager().is_authorized_dag(
                method=method,  # type: ignore[arg-type]
                details=DagDetails(id=dag_id, team_name=team),
                user=self.user,
            )
        )

    def require(self, method: str, dag_id: str | None) -> None:
        if not self.allowed(method, dag_id):
            what = f"DAG {dag_id!r}" if dag_id else "all DAGs (the job names none)"
            verb = "read" if method == "GET" else "edit"
            raise HTTPException(403, f"you may not {verb} {what}")


@dataclass(frozen=True)
class VisibleQuery(EntryQuery):
    """The user's filters, plus: only entries of DAGs the user may read."""

    access: Access | None = None

    def matches(self, entry: JobResultEntry) -> bool:
        return super().matches(entry) and (self.access is None or self.access.allowed("GET", entry_dag(entry)))


def actor(user: Any) -> Actor:
    """The person at the UI, for the history note."""
    try:
        name: str | None = user.get_name()
    except Exception:
        name = None
    return Actor(via="ui", user=name)


def who(user: Any) -> str:
    """The person at the UI, for the log."""
    try:
        return f"user {user.get_name()!r}"
    except Exception:
        return "a user"
