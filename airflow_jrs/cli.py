"""``airflow-jrs``: the on-call engineer's view of the job result store.

    airflow-jrs list [--limit N]            newest entries: job id, state, status, fence
    airflow-jrs show JOB_ID                 one entry as JSON (plus history)
    airflow-jrs dirty                       results whose cleanup is pending
    airflow-jrs forget JOB_ID [...]         forget results on purpose: the jobs will run again
    airflow-jrs purge --older-than-days N   delete clean results older than N days (retention)
    airflow-jrs quarantined                 jobs blocked by a corrupt entry
    airflow-jrs release-quarantine JOB_ID   drop a quarantined entry (prints its bytes first)
    airflow-jrs stop JOB_ID                 stop a running stream at its next batch boundary (STOPPED)
    airflow-jrs cancel JOB_ID               cancel a running stream at once (CANCELED)

The store comes from ``--redis-url``/``--namespace`` when given, else from the Airflow
connection (``[jrs] conn_id``, ``jrs_default``) through JrsHook. No I/O at import.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import redis as redis_lib
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from airflow_jrs.exceptions import JrsError, StoreUnavailableError
from airflow_jrs.redis_diagnosis import describe_server, diagnose
from airflow_jrs.store import JobResultEntry, RedisJobResultStore, result_to_dict


def _store(args: argparse.Namespace) -> RedisJobResultStore:
    if args.redis_url:
        # Bounded waits, as [jrs]'s defaults give the connection's client: a paused server must
        # not hang the on-call engineer's terminal.
        client = redis_lib.Redis.from_url(
            args.redis_url,
            socket_connect_timeout=5,
            socket_timeout=10,
            retry=Retry(ExponentialBackoff(cap=2, base=0.2), 3),
        )
        return RedisJobResultStore(client, args.namespace or "default")
    from airflow_jrs.hooks.jrs import JrsHook

    return JrsHook(args.conn_id, namespace=args.namespace).get_store()


def _store_failure(exc: StoreUnavailableError, args: argparse.Namespace) -> str:
    """One line naming where the store is (never the password), what failed and what to do."""
    if args.redis_url:
        url = urlsplit(args.redis_url)
        conn, server, password = "--redis-url", describe_server(url.hostname, url.port or 6379), url.password
    else:
        from airflow_jrs.hooks.jrs import JrsHook

        hook = JrsHook(args.conn_id)
        conn, server = f"connection {hook.jrs_conn_id!r}", hook.server()
        try:
            password = hook.get_connection(hook.jrs_conn_id).password
        except Exception:
            password = None
    cause = exc.__cause__
    sentence = diagnose(cause, conn=conn, server=server).sentence() if cause is not None else str(exc)
    line = f"job result store unavailable: could not {exc.what or 'use it'} ({conn}, Redis {server}): {sentence}"
    return line.replace(password, "***") if password else line


def _entry_json(entry: JobResultEntry) -> dict[str, Any]:
    created = entry.created_at.isoformat() if entry.created_at else None
    return {"state": entry.state.value, "created_at": created, "result": result_to_dict(entry.result)}


def _print_table(entries: list[JobResultEntry]) -> None:
    print(f"{'job id':60} {'state':6} {'status':10} fence")
    for e in entries:
        print(f"{e.job_id:60} {e.state.value:6} {e.result.status.value:10} {e.result.fence}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="airflow-jrs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-url", help="use this Redis instead of the Airflow connection")
    parser.add_argument("--namespace", help="store namespace (default: the connection's / [jrs] namespace)")
    parser.add_argument("--conn-id", default=None, help="Airflow connection id (default [jrs] conn_id)")
    sub = parser.add_subparsers(dest="command", required=True)
    p_list = sub.add_parser("list", help="newest entries")
    p_list.add_argument("--limit", type=int, default=50)
    sub.add_parser("show", help="one entry as JSON").add_argument("job_id")
    sub.add_parser("dirty", help="results whose cleanup is pending")
    sub.add_parser("forget", help="forget results so the jobs run again").add_argument("job_ids", nargs="+")
    p_purge = sub.add_parser("purge", help="delete clean results older than N days")
    p_purge.add_argument("--older-than-days", type=float, required=True)
    sub.add_parser("quarantined", help="jobs blocked by a corrupt entry")
    sub.add_parser("release-quarantine", help="drop a quarantined entry").add_argument("job_id")
    sub.add_parser("stop", help="stop a running stream at a batch boundary").add_argument("job_id")
    sub.add_parser("cancel", help="cancel a running stream at once").add_argument("job_id")
    args = parser.parse_args(argv)
    try:
        store = _store(args)
        if args.command == "list":
            _print_table(store.list_entries(limit=args.limit))
        elif args.command == "show":
            entry = store.get_entry(args.job_id)
            if entry is None:
                print(f"job {args.job_id!r} has no result in namespace {store.namespace!r}", file=sys.stderr)
                return 1
            doc = _entry_json(entry) | {"history": [_entry_json(h) for h in store.get_history(args.job_id)]}
            print(json.dumps(doc, indent=2))
        elif args.command == "dirty":
            _print_table(store.get_dirty_entries())
        elif args.command == "forget":
            for job_id in args.job_ids:
                store.forget_result(job_id)
                print(f"forgot {job_id} (kept in its history); the next run of the job computes it again")
        elif args.command == "purge":
            n = store.purge_clean_entries(timedelta(days=args.older_than_days))
            print(f"purged {n} clean results older than {args.older_than_days} days (dirty ones are kept)")
        elif args.command == "quarantined":
            for job_id in store.get_quarantined():
                print(job_id)
        elif args.command == "release-quarantine":
            raw = store.release_quarantine(args.job_id)
            print(f"released {args.job_id}; its quarantined bytes (kept in history):")
            print(raw.decode("utf-8", errors="replace"))
        elif args.command in ("stop", "cancel"):
            from airflow_jrs.stream_requests import request_stream

            doc = request_stream(store, args.job_id, args.command)
            print(f"{args.command} requested for {args.job_id} (fence {doc['fence']}) in {doc['control']}")
    except StoreUnavailableError as exc:
        print(f"airflow-jrs: {_store_failure(exc, args)}", file=sys.stderr)
        return 2
    except JrsError as exc:
        print(f"airflow-jrs: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
