"""The parser and the dispatch: one place decides exit codes and how errors read.

A bad argument or a failure is one line on stderr, never a traceback: the person reading it
is on call, and the line says what to type or do instead. With ``--json`` the same words come
as one JSON object on stdout instead (``{"error": {"message", "exit_code", "type"}}``), where the
script reads its answer, and the exit code is the same: stdout always holds one JSON document.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
from typing import Any, NoReturn

from rich_argparse import RawDescriptionRichHelpFormatter

from airflow_jrs import actions
from airflow_jrs.actions import airflow_api
from airflow_jrs.cli import backfill, common, doctor, plan, reads, recompute, writes
from airflow_jrs.cli.common import NOT_FOUND, UNREACHABLE, USAGE, CliError, Output
from airflow_jrs.exceptions import JrsError, NoSuchJobResultError, ResultDocumentError, StoreUnavailableError

DESCRIPTION = """\
The on-call engineer's view of the airflow-jrs job result store: which Spark jobs have a
result (and so will not run again), which wait for cleanup, who holds a lease, what a backfill
would compute. The store is the Airflow connection jrs_default (or \\[jrs] conn_id), or
--redis-url and --namespace."""

EPILOG = """\
exit codes:
  0  ok
  1  not found: no such job, nothing matched in a namespace that has no keys at all (the
     answer names the namespaces on the server), nothing running to stop or cancel,
     answered no (doctor: a check warned or failed)
  2  usage or configuration error, or the store refused (corrupt or quarantined entry,
     confirmation needed without a terminal)
  3  store unreachable, or it refused the connection (password, ACL)
141  the reader of the output went away (a closed pipe, as in `| head`)
with --json, an error is one JSON object on stdout, {"error": {"message": ..., "exit_code": ...,
"type": ...}}, with the same exit code (nothing on stderr)"""


#: An action's kind of failure (:class:`airflow_jrs.actions.ActionError`) as an exit code.
EXIT_CODES = {
    actions.NOT_FOUND: NOT_FOUND,
    actions.USAGE: USAGE,
    actions.CONFLICT: USAGE,
    actions.UNREACHABLE: UNREACHABLE,
}


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line saying what to type instead (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _sub(
    sub: Any, name: str, help_text: str, handler: Any, *, json_out: bool = True, store: bool = True
) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        name, help=help_text, description=help_text, formatter_class=RawDescriptionRichHelpFormatter, epilog=EPILOG
    )
    if json_out:
        # SUPPRESS: a subcommand's default must not overwrite a --json given before it.
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print one JSON document")
    if store:
        _store_options(p, after_command=True)
    # store=False: the command reads no store (it asks Airflow's API): its handler takes (args, out)
    p.set_defaults(handler=handler, needs_store=store)
    return p


def _store_options(p: argparse.ArgumentParser, *, after_command: bool = False) -> None:
    """Where the store is: before the command (``airflow-jrs --redis-url URL list``) or after it
    (``airflow-jrs list --redis-url URL``), as people type them. After the command the default is
    ``SUPPRESS``, so a command's parser never overwrites what was given before it."""
    default = argparse.SUPPRESS if after_command else None
    group = p.add_argument_group("where the store is (before or after the command)")
    group.add_argument(
        "--redis-url", type=common.redis_url, default=default, help="use this Redis, e.g. redis://host:6379/0"
    )
    group.add_argument(
        "--namespace",
        type=common.namespace,
        default=default,
        help="store namespace (default: the connection's; 'default' with --redis-url)",
    )
    group.add_argument("--conn-id", default=default, help="Airflow connection id (default: \\[jrs] conn_id)")
    group.add_argument(
        "--result-documents",
        default=default,
        help="with --redis-url: the folder of clean jobs' result documents (default: "
        "$AIRFLOW__JRS__RESULT_DOCUMENTS; without --redis-url, \\[jrs] result_documents)",
    )


def _destructive(p: argparse.ArgumentParser) -> None:
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation (for scripts)")
    p.add_argument("--dry-run", action="store_true", help="show what would change, change nothing")


def _dag_range(p: argparse.ArgumentParser, required: bool) -> None:
    p.add_argument("--dag-id", required=required, help="the DAG whose guarded Spark tasks define the jobs")
    p.add_argument("--from-date", type=common.when, required=required, help="first logical date, e.g. 2013-01-01")
    p.add_argument("--to-date", type=common.when, required=required, help="last logical date (inclusive)")
    p.add_argument("--dags-folder", help="where the DAG file is (default: \\[core] dags_folder)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="airflow-jrs", description=DESCRIPTION, epilog=EPILOG, formatter_class=RawDescriptionRichHelpFormatter
    )
    _store_options(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON document (read commands)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = _sub(sub, "list", "results, newest first, with filters; quarantined jobs too", reads.cmd_list)
    p.add_argument("--state", choices=["dirty", "clean", "quarantined"], help="only entries in this state")
    p.add_argument(
        "--status", type=str.upper, choices=["SUCCEEDED", "FAILED", "CANCELED", "STOPPED"], help="only this status"
    )
    p.add_argument("--dag-id", help="only results written by this DAG (or job ids starting with DAG_ID.)")
    p.add_argument("--prefix", help="only job ids starting with this")
    p.add_argument("--since", type=common.when, help="only results created at or after this date")
    p.add_argument("--limit", type=common.positive_int, default=50, help="at most this many (default 50)")
    p.add_argument("--offset", type=common.non_negative_int, default=0, help="skip this many matches first")

    p = _sub(sub, "show", "one job: result, history, lease holder, intent and heartbeat", reads.cmd_show)
    p.add_argument("job_id", help="the job id, e.g. my_dag.my_task.2013-01-01")
    _sub(sub, "dirty", "results whose cleanup is pending", reads.cmd_dirty)
    _sub(sub, "unsuccessful", "jobs whose last result is FAILED, CANCELED or STOPPED", reads.cmd_unsuccessful)
    p = _sub(sub, "history", "earlier entries of a job: superseded, forgotten", reads.cmd_history)
    p.add_argument("job_id", help="the job id")
    _sub(sub, "leases", "held leases: holder host, pid and run, token, time left", reads.cmd_leases)
    _sub(sub, "intents", "jobs in flight or needing recovery (recorded intents)", reads.cmd_intents)
    _sub(sub, "quarantined", "jobs blocked by a corrupt entry", reads.cmd_quarantined)

    p = _sub(
        sub,
        "stats",
        "guarded tasks that computed, reused or adopted their job, and the Spark time spent and avoided, by DAG: "
        "the Job results dashboard's figures, from the tasks' XCom payloads in Airflow's metadata DB, through "
        f"the plugin on Airflow's API server (--airflow-url or ${airflow_api.URL_ENV}; credentials: "
        f"${airflow_api.TOKEN_ENV}, or ${airflow_api.USERNAME_ENV} and ${airflow_api.PASSWORD_ENV}); the store is "
        "not read",
        reads.cmd_stats,
        store=False,
    )
    p.add_argument(
        "--since", type=common.when,
        help="only tasks that handed on their result at or after this (default: midnight UTC 30 days ago)",
    )  # fmt: skip
    p.add_argument("--dag-id", help="only this DAG")
    p.add_argument("--airflow-url", help=f"Airflow's API server (default: ${airflow_api.URL_ENV}, \\[api] base_url)")

    p = _sub(
        sub,
        "plan",
        "before a backfill: each date and job committed, dirty, failed, running or missing, and what "
        "a backfill with --reprocess-behavior completed would compute; nothing runs. Job ids follow the "
        f"operator's rule: the default one, or a job_id template using only {plan.RENDERABLE}",
        plan.cmd_plan,
    )
    _dag_range(p, required=True)
    p = _sub(
        sub,
        "backfill",
        "with --missing-only: ask the store first and create Airflow backfills (through its REST API) only "
        "for the dates where some job is not committed; committed dates get no run and no task instance. "
        "Without it: the plan table and how it differs from `airflow backfill create`. Airflow's API: "
        f"--airflow-url or ${airflow_api.URL_ENV}; credentials: ${airflow_api.TOKEN_ENV}, or "
        f"${airflow_api.USERNAME_ENV} and ${airflow_api.PASSWORD_ENV}",
        backfill.cmd_backfill,
    )
    _dag_range(p, required=True)
    p.add_argument("--missing-only", action="store_true", help="create runs only for dates with a job not committed")
    p.add_argument("--dry-run", action="store_true", help="show the plan table, create nothing")
    p.add_argument("--yes", "-y", action="store_true", help="create the runs without asking (for scripts)")
    p.add_argument("--max-active-runs", type=common.positive_int, default=10, help="per backfill (default 10)")
    p.add_argument("--wait", action="store_true", help="also wait for the last backfill's runs to end")
    p.add_argument("--airflow-url", help=f"Airflow's API server (default: ${airflow_api.URL_ENV}, \\[api] base_url)")

    p = _sub(sub, "doctor", "check Redis persistence, eviction, latency, Java, Spark and the provider", None)
    p.add_argument("--redis-only", action="store_true", help="skip the Java, Spark and provider checks")

    p = _sub(sub, "mark-clean", "mark a dirty result clean without running its cleanup", writes.cmd_mark_clean)
    p.add_argument("job_id", help="the job id")
    _destructive(p)
    p = _sub(sub, "forget", "forget results so the jobs run again (kept in history)", writes.cmd_forget)
    p.add_argument("job_ids", nargs="*", metavar="JOB_ID", help="job ids to forget")
    _dag_range(p, required=False)
    _destructive(p)
    p = _sub(
        sub,
        "recompute",
        "compute jobs or dates again now: forget each result (kept in history, naming you) and clear its "
        "task instance through Airflow's REST API, so the run computes it again; a later backfill reuses it. "
        f"Airflow's API: --airflow-url or ${airflow_api.URL_ENV}; credentials: ${airflow_api.TOKEN_ENV}, or "
        f"${airflow_api.USERNAME_ENV} and ${airflow_api.PASSWORD_ENV}",
        recompute.cmd_recompute,
    )
    p.add_argument("job_ids", nargs="*", metavar="JOB_ID", help="job ids (clears the run that computed each)")
    _dag_range(p, required=False)
    p.add_argument("--task", action="append", metavar="TASK_ID", help="only this task's jobs (repeatable)")
    p.add_argument("--airflow-url", help=f"Airflow's API server (default: ${airflow_api.URL_ENV}, \\[api] base_url)")
    _destructive(p)
    p = _sub(sub, "purge", "delete clean results older than N days (retention)", writes.cmd_purge)
    p.add_argument("--older-than-days", type=common.non_negative_days, required=True, help="age in days, e.g. 90")
    _destructive(p)
    p = _sub(sub, "release-quarantine", "drop a quarantined entry (prints its bytes)", writes.cmd_release_quarantine)
    p.add_argument("job_id", help="the job id")
    _destructive(p)
    p = _sub(sub, "stop", "stop a running stream at its next batch boundary (STOPPED)", writes.cmd_stream)
    p.add_argument("job_id", help="the job id of the running stream")
    p = _sub(sub, "cancel", "cancel a running stream at once (CANCELED)", writes.cmd_stream)
    p.add_argument("job_id", help="the job id of the running stream")
    return parser


def _json_error(code: int, message: str, kind: str) -> int:
    """A failure as ``--json`` prints it: one object on stdout (see the module docstring)."""
    print(json.dumps({"error": {"message": message, "exit_code": code, "type": kind}}, indent=2))
    return code


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    wants_json = "--json" in words[: words.index("--")] if "--" in words else "--json" in words
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said) if wants_json else contextlib.nullcontext():
            args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a bad argument (already printed as one line)
        code = exc.code if isinstance(exc.code, int) else USAGE
        if wants_json and code:
            return _json_error(code, said.getvalue().strip().removeprefix("airflow-jrs: error: "), "UsageError")
        sys.stderr.write(said.getvalue())
        return code
    out = Output(as_json=args.json)

    def fail(code: int, line: str, kind: str = "CliError") -> int:
        if out.as_json:
            return _json_error(code, line, kind)
        print(f"airflow-jrs: {line}", file=sys.stderr)
        return code

    try:
        # Under --json stdout holds one JSON document: what Airflow logs meanwhile goes to stderr.
        with contextlib.redirect_stdout(sys.stderr) if out.as_json else contextlib.nullcontext():
            if args.command == "doctor":
                code = doctor.run_doctor(args, out)
            elif not args.needs_store:
                code = int(args.handler(args, out))
            else:
                code = int(args.handler(common.open_store(args, out)))
        sys.stdout.flush()  # here, where a closed pipe is caught, not at interpreter exit
        return code
    except BrokenPipeError:
        # The reader went away (`... | head`): what it wanted it has. Point stdout at /dev/null
        # so the interpreter's final flush does not print a traceback either; 141 as a shell's SIGPIPE.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except CliError as exc:
        return fail(exc.code, str(exc))
    except actions.ActionError as exc:  # a shared action's words, as the CLI's own
        return fail(EXIT_CODES[exc.kind], str(exc))
    except StoreUnavailableError as exc:
        return fail(UNREACHABLE, common.store_failure(exc, args), type(exc).__name__)
    except NoSuchJobResultError as exc:  # its message names the job and namespace: no class name needed
        return fail(NOT_FOUND, str(exc), type(exc).__name__)
    except ResultDocumentError as exc:
        # no folder at all: the store's words name [jrs] result_documents; the CLI's flag is this
        hint = "" if exc.location else f" {common.DOCUMENTS_HINT}"
        return fail(USAGE, f"{type(exc).__name__}: {exc}{hint}", type(exc).__name__)
    except JrsError as exc:
        return fail(USAGE, f"{type(exc).__name__}: {exc}", type(exc).__name__)
    except KeyboardInterrupt:
        return fail(130, "interrupted", "KeyboardInterrupt")


if __name__ == "__main__":
    raise SystemExit(main())
