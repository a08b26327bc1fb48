"""Backfills driven from outside, as an operator would: create one, wait for its runs, report.

``airflow backfill create`` and ``POST /api/v2/backfills`` both go through here, so tests and
benchmarks measure the same thing whichever path they take.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from jrs_testbench.deployment.rest import TERMINAL_RUN_STATES, AirflowClient, DeploymentError, iso, sqlite_locked


@dataclass
class BackfillResult:
    """A finished backfill: its id, server-side wall time and the state of each run and task."""

    backfill_id: int
    dag_id: str
    wall_seconds: float
    runs: dict[str, str] = field(default_factory=dict)  # logical date -> run state
    tasks: dict[str, dict[str, str | None]] = field(default_factory=dict)  # logical date -> task -> state
    run_ids: dict[str, str] = field(default_factory=dict)  # logical date -> run id


def _parse_ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


class Backfills:
    """Create and await backfills of one deployment.

    :param client: the deployment's REST client
    :param airflow_cli: runs ``airflow <args>`` against the deployment; raises on a non-zero exit
    :param check_alive: called on every poll, so a dead component is restarted (or reported)
        instead of a wait running into its timeout
    """

    def __init__(self, client: AirflowClient, airflow_cli: Callable[..., Any], check_alive: Callable[[], None]) -> None:
        self.client = client
        self.airflow_cli = airflow_cli
        self.check_alive = check_alive

    def run(
        self,
        dag_id: str,
        from_date: str | date | datetime,
        to_date: str | date | datetime,
        reprocess: str = "none",
        *,
        max_active_runs: int = 2,
        via: str = "cli",
        timeout: float = 1800.0,
        complete: bool = False,
    ) -> BackfillResult:
        """Create a backfill (``airflow backfill create`` or ``POST /api/v2/backfills``) and wait for it.

        ``wall_seconds`` is measured on the server's clock: from the backfill's creation to the
        end of its last run (no polling granularity, no CLI start-up). ``complete=True`` also
        waits until Airflow's scheduler marks the backfill complete (its timer runs every 30 s), so
        the DAG's next backfill can be created at once. Not ``PUT .../cancel``: in Airflow 3.3
        that also pauses the backfill, the scheduler never starts a queued run of a paused
        backfill, and a complete one cannot be unpaused, so a run of it cleared later (a
        recompute, the UI's Clear) would stay queued forever.
        """
        if via not in ("cli", "rest"):
            raise ValueError(f"via must be 'cli' or 'rest', got {via!r}")
        self.wait_idle(dag_id, timeout=timeout)  # Airflow allows one active backfill per DAG
        expected = self.client.backfill_dry_run(dag_id, from_date, to_date, reprocess_behavior=reprocess)
        backfill_id = self._create(dag_id, from_date, to_date, reprocess, max_active_runs, via)
        done = self._wait_for_runs(dag_id, backfill_id, expected, timeout)
        result = self._result(dag_id, backfill_id, done)
        if complete and not done.get("completed_at"):
            self.wait_idle(dag_id, timeout=timeout)
        return result

    def _create(
        self,
        dag_id: str,
        from_date: str | date | datetime,
        to_date: str | date | datetime,
        reprocess: str,
        max_active_runs: int,
        via: str,
    ) -> int:
        """Create the backfill; retried while SQLite is locked by the scheduler.

        Airflow commits the backfill row before it creates the runs and, on SQLite, does not remove
        it after a lock error (its cleanup knows PostgreSQL's and MySQL's lock codes only): a failed
        try can leave an active backfill with no runs, and every retry then fails with
        ``AlreadyRunningBackfill`` (CI saw exactly that). A backfill that appeared during a failed
        try is that leftover: it is cancelled before the next try.
        """
        for attempt in range(1, 11):
            known = {b["id"] for b in self.client.backfills(dag_id)}
            try:
                if via == "rest":
                    doc = self.client.create_backfill(
                        dag_id, from_date, to_date, reprocess_behavior=reprocess, max_active_runs=max_active_runs
                    )
                    return int(doc["id"])
                self.airflow_cli(
                    "backfill", "create", "--dag-id", dag_id,
                    "--from-date", iso(from_date), "--to-date", iso(to_date),
                    "--reprocess-behavior", reprocess, "--max-active-runs", str(max_active_runs),
                )  # fmt: skip
                new = [b for b in self.client.backfills(dag_id) if b["id"] not in known]
                if len(new) != 1:
                    raise DeploymentError(f"expected one new backfill of {dag_id}, found {new}")
                return int(new[0]["id"])
            except DeploymentError as exc:
                leftovers = [
                    b for b in self.client.backfills(dag_id) if b["id"] not in known and not b.get("completed_at")
                ]
                locked = sqlite_locked(exc)
                if not (locked or leftovers) or attempt == 10:
                    raise
                for leftover in leftovers:
                    self.client.cancel_backfill(int(leftover["id"]))
                time.sleep(min(2.0 * attempt, 10.0))
        raise AssertionError("unreachable")

    def wait_idle(self, dag_id: str, *, timeout: float = 600.0) -> None:
        """Wait until no backfill of ``dag_id`` is active (the scheduler marks them complete every 30 s)."""
        deadline = time.monotonic() + timeout
        while any(not b.get("completed_at") for b in self.client.backfills(dag_id)):
            self.check_alive()
            if time.monotonic() > deadline:
                raise DeploymentError(f"a backfill of {dag_id} is still active after {timeout:.0f}s")
            time.sleep(1.0)

    def _wait_for_runs(self, dag_id: str, backfill_id: int, expected: Sequence[str], timeout: float) -> dict[str, Any]:
        """Done when every expected date has a finished run that ended after the backfill started.

        Faster than waiting for ``completed_at``, which the scheduler sets on a 30 s timer.
        """
        wanted = {_parse_ts(d) for d in expected}
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            doc = self.client.backfill(backfill_id)
            if doc.get("completed_at"):
                return doc
            created = _parse_ts(doc["created_at"])
            finished = {
                _parse_ts(run["logical_date"])
                for run in self.client.dag_runs(dag_id)
                if run.get("logical_date")
                and run["state"] in TERMINAL_RUN_STATES
                and run.get("end_date")
                and _parse_ts(run["end_date"]) >= created
            }
            if wanted and wanted <= finished:
                return doc
            if time.monotonic() > deadline:
                raise DeploymentError(
                    f"backfill {backfill_id} of {dag_id} not finished after {timeout:.0f}s: "
                    f"{len(wanted & finished)}/{len(wanted)} runs done"
                )
            time.sleep(1.0)

    def _result(self, dag_id: str, backfill_id: int, doc: Mapping[str, Any]) -> BackfillResult:
        start = _parse_ts(doc["created_at"])
        lo, hi = _parse_ts(doc["from_date"]), _parse_ts(doc["to_date"])
        result = BackfillResult(backfill_id, dag_id, 0.0)
        end = start
        latest: dict[str, dict[str, Any]] = {}
        for run in self.client.dag_runs(dag_id):
            if not run.get("logical_date") or not run.get("end_date"):
                continue
            when = _parse_ts(run["logical_date"])
            # Runs of the range that ended after the backfill was created: its new runs and the
            # existing runs it reprocessed (those keep their run ids, e.g. manual__...).
            if lo <= when <= hi and _parse_ts(run["end_date"]) >= start:
                key = when.date().isoformat() if when.time() == datetime.min.time() else when.isoformat()
                if key not in latest or run["end_date"] > latest[key]["end_date"]:
                    latest[key] = run
        for key, run in sorted(latest.items()):
            result.runs[key] = run["state"]
            result.run_ids[key] = run["dag_run_id"]
            result.tasks[key] = self.client.task_states(dag_id, run["dag_run_id"])
            end = max(end, _parse_ts(run["end_date"]))
        result.wall_seconds = (end - start).total_seconds()
        return result
