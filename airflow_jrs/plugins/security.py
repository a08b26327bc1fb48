"""Who may see and do what on the Job results page, and what never leaves the server.

* Each job is authorized against the DAG of the attempt that wrote its result, else of its
  lease holder (``GET`` to read, ``PUT`` to act, as Airflow's own DAG routes do); a job that
  names no DAG needs access to all DAGs. Listings leave out what the user may not read.
* The store's password is masked in every error text, should a driver ever print it.
* Every action names its user, in the job's history (:func:`actor`) and in the log (:func:`who`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails
from airflow.configuration import conf
from fastapi import HTTPException

from airflow_jrs.domain.model import EntryQuery
from airflow_jrs.hooks.jrs import JrsHook
from airflow_jrs.store import Actor, JobResultEntry, JobResultStore
from airflow_jrs.store.namespace import JobNamespace
from airflow_jrs.store.redis.diagnosis import mask_password
from airflow_jrs.views.job import entry_dag, job_dag


@dataclass
class Connected:
    """The jobs of the jrs connection, built once per API server process (its client pools
    connections across requests) and rebuilt after the store was unreachable."""

    hook: JrsHook
    jobs: JobNamespace
    password: str | None

    @property
    def store(self) -> JobResultStore:
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
    """What one user may do, asked of Airflow's auth manager once per DAG and request.

    The answers live on the instance (not in a ``functools.cache``, which would keep every
    request's ``Access`` and user alive for the life of the API server): they go with the request.
    """

    def __init__(self, user: Any) -> None:
        self.user = user
        self._seen: dict[tuple[str, str | None], bool] = {}

    def allowed(self, method: str, dag_id: str | None) -> bool:
        key = (method, dag_id)
        if key not in self._seen:
            self._seen[key] = self._ask(method, dag_id)
        return self._seen[key]

    def _ask(self, method: str, dag_id: str | None) -> bool:
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
    """The user's filters, plus: only entries of DAGs the user may read.

    A clean result kept as a reference (``[jrs] result_documents``) names its DAG only in its
    document: with ``results`` given, that is read for a user who may not read every DAG, or
    per-DAG users would never see a clean result.
    """

    access: Access | None = None
    results: JobResultStore | None = None

    def matches(self, entry: JobResultEntry) -> bool:
        return super().matches(entry) and (self.access is None or self.access.allowed("GET", self._dag(entry)))

    def _dag(self, entry: JobResultEntry) -> str | None:
        dag_id = entry_dag(entry)
        if dag_id is None and entry.summary and self.results is not None and self.access is not None:
            if not self.access.allowed("GET", None):  # who may read all needs no document
                dag_id = job_dag(self.results, entry)
        return dag_id


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
