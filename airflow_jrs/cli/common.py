"""What every command shares: where the store is, how answers are printed, how to ask.

Every answer names the namespace and server it read, because the commonest on-call mistake
is reading the wrong namespace and concluding "the job has no result, so it will run again".
Nothing here prints a password: servers are described as ``host:port``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from airflow_jrs.exceptions import StoreUnavailableError
from airflow_jrs.settings import BY_NAME, environment, resolve
from airflow_jrs.store import JobResultEntry, JobResultStore, validate_namespace
from airflow_jrs.store.namespace import JobNamespace
from airflow_jrs.store.redis.diagnosis import describe_server, unavailable_line
from airflow_jrs.store.redis.namespace import RedisJobNamespace
from airflow_jrs.views.words import plural, stamp

#: Exit codes, as the help's epilog and the package docstring document them.
OK, NOT_FOUND, USAGE, UNREACHABLE = 0, 1, 2, 3


class CliError(Exception):
    """One line for the user and the exit code; never shown with a traceback."""

    def __init__(self, message: str, code: int = USAGE) -> None:
        super().__init__(message)
        self.code = code


# -- argument types: a bad value says what to type instead --------------------------------------
def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1; use e.g. 50")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 0; use e.g. 0 or 100")
    return value


def non_negative_days(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of days of at least 0; use e.g. 90")
    return value


def when(text: str) -> datetime:
    """A date (``2013-01-01``) or an ISO date-time; without a zone it means UTC, as in Airflow."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        try:
            value = datetime.combine(date.fromisoformat(text), datetime.min.time())
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a date; use e.g. 2013-01-01 or 2013-01-01T06:00:00+00:00"
            ) from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def redis_url(text: str) -> str:
    """Refuse what redis-py would refuse with a traceback, and say the URL to type instead."""
    parts = urlsplit(text)
    if parts.scheme in ("redis", "rediss", "unix") and (parts.netloc or parts.path):
        return text
    # Never echo a password back: keep only what follows the last "@".
    rest = text.split("://", 1)[-1].rsplit("@", 1)[-1].split("/", 1)[0] or "localhost:6379"
    if ":" not in rest:
        rest += ":6379"
    login = "USER:PASSWORD@" if "@" in text else ""
    raise argparse.ArgumentTypeError(f"not a Redis URL; use redis://{login}{rest}/0 (or rediss:// for TLS)")


def namespace(text: str) -> str:
    try:
        return validate_namespace(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# -- where the store is -------------------------------------------------------------------------
@dataclass
class Ctx:
    """One command's jobs (:class:`~airflow_jrs.store.namespace.JobNamespace`: its results, leases,
    intents, heartbeats and requests) and where they are, said the same way in every answer."""

    args: argparse.Namespace
    jobs: JobNamespace
    server: str
    origin: str
    out: Output

    @property
    def store(self) -> JobResultStore:
        return self.jobs.results

    @property
    def namespace(self) -> str:
        return self.jobs.namespace

    def where(self) -> str:
        """``namespace 'x' on Redis host:port (origin)``: what an answer read."""
        implicit = ""
        if self.args.redis_url and not self.args.namespace:
            env = BY_NAME["namespace"].env
            implicit = f" (from {env})" if os.environ.get(env) else " (--redis-url without --namespace)"
        return f"namespace {self.namespace!r}{implicit} on Redis {self.server} ({self.origin})"

    def located(self, doc: dict[str, Any]) -> dict[str, Any]:
        """``doc`` with the namespace and server first, for JSON answers."""
        return {"namespace": self.namespace, "server": self.server, **doc}


def url_server(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return f"unix:{parts.path}"
    master = parse_qs(parts.query).get("sentinel_master", [None])[-1]
    return describe_server(parts.hostname or "localhost", parts.port or (26379 if master else 6379), master)


def open_store(args: argparse.Namespace, out: Output) -> Ctx:
    if args.redis_url:
        # The [jrs] defaults' bounded waits and retries, as the connection's client has them
        # (store/redis/clients.py builds every client): a paused server must not hang the terminal.
        # AIRFLOW__JRS__* apply as in Airflow's config; the command's options win.
        settings = resolve(
            arguments={"namespace": args.namespace, "result_documents": getattr(args, "result_documents", None)},
            section=environment,
        )
        return Ctx(
            args, RedisJobNamespace.from_url(args.redis_url, settings), url_server(args.redis_url), "--redis-url", out
        )
    from airflow_jrs.hooks.jrs import JrsHook

    hook = JrsHook(args.conn_id, namespace=args.namespace, result_documents=getattr(args, "result_documents", None))
    return Ctx(args, hook.jobs(), hook.server(), f"connection {hook.jrs_conn_id!r}", out)


def store_failure(exc: StoreUnavailableError, args: argparse.Namespace) -> str:
    """One line naming where the store is (never the password), what failed and what to do."""
    if args.redis_url:
        conn, server, password = "--redis-url", url_server(args.redis_url), urlsplit(args.redis_url).password
    else:
        from airflow_jrs.hooks.jrs import JrsHook

        hook = JrsHook(args.conn_id)
        conn, server = f"connection {hook.jrs_conn_id!r}", hook.server()
        try:
            password = hook.get_connection(hook.jrs_conn_id).password
        except Exception:
            password = None
    # retry=None: in a terminal nobody retries but the user (a task's message says Airflow will)
    return unavailable_line(exc, conn=conn, server=server, password=password, retry=None)


def empty_namespace(ctx: Ctx) -> dict[str, Any] | None:
    """When the namespace holds no key at all, which namespaces the server has (a bounded SCAN):
    the commonest on-call mistake is a wrong namespace, and it must not read as an empty store.
    ``None`` when the namespace is in use (then "no results" means what it says)."""
    if ctx.jobs.in_use():
        return None
    found = ctx.jobs.namespaces_on_server()
    return {"namespace_empty": True, "namespaces_on_server": found.names, "namespaces_scan_complete": found.complete}


def empty_namespace_line(ctx: Ctx, empty: dict[str, Any]) -> str:
    names = empty["namespaces_on_server"]
    if not names:
        there = "the server holds no airflow-jrs namespace at all: check --redis-url or the connection"
    else:
        shown = ", ".join(repr(n) for n in names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
        partly = "" if empty["namespaces_scan_complete"] else " (among the keys scanned; there may be more)"
        there = f"namespaces on this server{partly}: {shown}; pass the right one with --namespace"
    return f"{ctx.where()} has no keys: {there}"


# -- printing -------------------------------------------------------------------------------------
class Output:
    """Rich tables for people, plain JSON for scripts; errors and progress go to stderr."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        # Kept: under --json, app.main points sys.stdout at stderr while a command runs, so that
        # what Airflow logs there (3.1 logs connection parsing at INFO) cannot corrupt the JSON.
        self.stdout = sys.stdout
        tty = sys.stdout.isatty()
        # Off a terminal rich assumes 80 columns and would fold job ids mid-word: widen instead.
        self.console = Console(file=sys.stdout, highlight=False, width=None if tty else 200, soft_wrap=not tty)
        self.err = Console(file=sys.stderr, highlight=False, width=None if sys.stderr.isatty() else 200)

    def json(self, doc: Any) -> None:
        print(json.dumps(doc, indent=2, default=str), file=self.stdout)

    def line(self, text: str) -> None:
        self.console.print(escape(text))

    def header(self, ctx: Ctx, what: str) -> None:
        self.console.print(f"[bold]{escape(what)}[/bold] in {escape(ctx.where())}")

    def table(self, columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None) -> None:
        table = Table(title=title, title_justify="left", show_lines=False)
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*(escape("" if v is None else str(v)) for v in row))
        self.console.print(table)


def ask(ctx: Ctx, question: str) -> None:
    """Go on only after a yes: ``--yes``, or a person answering at a terminal.

    Without a terminal nobody can answer, and a script that forgot ``--yes`` must not hang or
    guess: it gets exit 2 and the flag to add (as ``airflow db clean`` does)."""
    if ctx.args.yes:
        return
    try:
        interactive = sys.stdin.isatty()
    except (AttributeError, ValueError, OSError):
        interactive = False
    if not interactive:
        raise CliError(
            f"refusing to {question} without confirmation (stdin is not a terminal): "
            "add --yes to go ahead, or --dry-run to only preview",
            USAGE,
        )
    from rich.prompt import Confirm

    if not Confirm.ask(f"{escape(question[0].upper() + question[1:])} in {escape(ctx.where())}?", console=ctx.out.err):
        raise CliError("nothing changed (answered no)", NOT_FOUND)


def progress(ctx: Ctx, description: str, total: int | None) -> Any:
    """A rich progress bar on stderr (silent when stderr is not a terminal or for JSON)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

    columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None:
        columns += [BarColumn(), MofNCompleteColumn()]
    disable = ctx.out.as_json or not ctx.out.err.is_terminal
    bar = Progress(*columns, console=ctx.out.err, transient=True, disable=disable)
    bar.add_task(description, total=total)
    return bar


# -- entries ---------------------------------------------------------------------------------------
ENTRY_COLUMNS = ("job id", "state", "status", "fence", "created (UTC)", "written by")
#: What to do when a clean reference's result document is needed and the CLI has no folder.
DOCUMENTS_HINT = (
    "Give airflow-jrs the folder the cleanups write result documents to: --result-documents FOLDER "
    "(or AIRFLOW__JRS__RESULT_DOCUMENTS; from a connection, [jrs] result_documents)."
)
#: "written by" of a clean reference: its run is named in its result document.
IN_DOCUMENT = "in its result document"


def documents_note(ctx: Ctx, entries: Sequence[JobResultEntry]) -> str | None:
    """For a listing: some entries are clean references ([jrs] result_documents) and this CLI has
    no folder to read their documents from, so who wrote them is unknown here; say so, and how to
    give the folder (``show`` of such a job fails with the same advice)."""
    refs = sum(e.summary for e in entries)
    if not refs or ctx.store.result_documents is not None:
        return None
    return (
        f"{plural(refs, 'result')} {'is' if refs == 1 else 'are'} committed as a reference ([jrs] "
        f"result_documents): the run that wrote {'it' if refs == 1 else 'them'} is named in a result "
        f"document, and this command was given no folder. {DOCUMENTS_HINT}"
    )


#: A history item: when it left the job's current slot, why and by whom, then the entry as it was.
HISTORY_COLUMNS = ("moved (UTC)", "why", "by", "state", "status", "fence", "created (UTC)", "written by")


def history_row(entry: JobResultEntry) -> list[Any]:
    note = entry.moved
    if note is None:  # moved by an airflow-jrs older than history notes
        why, by, at = "-", "-", "-"
    else:
        why, by, at = note.reason, note.actor.describe() if note.actor else "-", stamp(note.moved_at)
    return [at, why, by, *entry_row(entry)[1:]]


def entry_row(entry: JobResultEntry) -> list[Any]:
    a = entry.result.attempt
    by = f"{a.dag_id}/{a.task_id} {a.run_id} try {a.try_number}" if a else IN_DOCUMENT if entry.summary else "-"
    return [entry.job_id, entry.state.value, entry.result.status.value, entry.result.fence, stamp(entry.created_at), by]
