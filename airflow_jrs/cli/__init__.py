"""``airflow-jrs``: the on-call engineer's view of the job result store.

Read (tables; ``--json`` for scripts)::

    list        newest results, with filters (--state, --status, --dag-id, --prefix, --since, paging)
    show JOB    one job: result, history, lease holder, intent, heartbeat
    dirty       results whose cleanup is pending (SUCCEEDED, not yet committed)
    unsuccessful jobs whose last result is FAILED, CANCELED or STOPPED (they run again when asked)
    history JOB earlier entries of a job (superseded, forgotten)
    leases      held leases: who works on what, token, time left
    intents     jobs in flight or needing recovery
    quarantined jobs blocked by a corrupt entry
    plan        what a backfill of a DAG's date range would compute (nothing runs)
    doctor      Redis persistence and eviction, latency, Java, Spark, provider registration

Change (each shows what it will do, asks unless --yes, and has --dry-run)::

    mark-clean JOB, forget JOB... | forget --dag-id D --from-date X --to-date Y,
    purge --older-than-days N, release-quarantine JOB

Create Airflow backfills through its REST API, only for dates with a job not committed::

    backfill --dag-id D --from-date X --to-date Y --missing-only [--dry-run] [--wait]

Ask a running attempt (no preview, no question: nothing running is "not found")::

    stop JOB, cancel JOB

Exit codes: 0 ok; 1 not found (no such job, nothing matched in a namespace without any key,
nothing running to stop or cancel, answered no; doctor: a check warned or failed); 2 usage or
configuration error, or the store refused the operation (a corrupt or quarantined entry,
confirmation needed); 3 the store is unreachable (or refuses the connection: password, ACL);
141 the reader of the output went away (``| head``).

The store comes from ``--redis-url``/``--namespace`` when given, else from the Airflow
connection (``[jrs] conn_id``, ``jrs_default``) through JrsHook. No I/O at import.
"""

from __future__ import annotations

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """The ``airflow-jrs`` entry point (:func:`airflow_jrs.cli.app.main`).

    Imported on call, not with the package: the commands bring rich, the actions
    (:mod:`airflow_jrs.actions`) and Airflow's REST client, which ``import airflow_jrs.cli`` need not load."""
    from airflow_jrs.cli.app import main as run

    return run(argv)
