"""What went wrong with Redis, in words an on-call engineer can act on.

redis-py's errors are written for redis-py's authors: ``Error 111 connecting to
127.0.0.1:6379. Connection refused.``, ``HELLO must be called with the client already
authenticated``, ``OOM command not allowed when used memory > 'maxmemory'.``. Appended to a
sentence of ours they read badly (``refused..``) and say nothing about what to do. Every
Redis error that reaches a user goes through :func:`diagnose`, which tells the case
(:class:`Problem`) from the exception's class, its errno and the server's error code, and
says it in our words. The server's own text is never shown as is: only for a case this
table does not know, and then quoted, trimmed and with its punctuation normalised.

================  ==========================================  =========  ==========================
case              when                                        retryable  what to do
================  ==========================================  =========  ==========================
``refused``       nothing listens at host:port                yes        start Redis / fix host+port
``dns``           the host name does not resolve              yes        fix the host name
``timeout``       no answer within the timeout                yes        check the server's load
``lost``          the connection broke                        yes        Airflow retries
``loading``       LOADING after a restart                     yes        wait, Airflow retries
``readonly``      READONLY: a replica                         yes        point at the primary
``oom``           OOM: maxmemory with noeviction              yes        free memory / raise it
``auth``          NOAUTH, WRONGPASS, HELLO before AUTH        no         fix user/password
``noperm``        NOPERM: the ACL user may not                no         grant the ACL rule
``tls``           the TLS handshake failed                    no         fix certificates
``cluster``       no cluster node answers for the slot        yes        check the cluster
``other``         anything else                               no         quoted, for a bug report
================  ==========================================  =========  ==========================

"Retryable" means waiting (a failover, a restart, an eviction, a freed connection) can fix
it without anyone changing a setting; the rest needs a person. No Airflow, no I/O here.
:func:`unavailable_line` is the one line a task's log and the CLI print for a failed store.
"""

from __future__ import annotations

import errno
import re
import socket
import ssl
from dataclasses import dataclass

import redis as redis_lib

from airflow_jrs.exceptions import StoreUnavailableError

#: getaddrinfo's "no such name" codes: EAI_NONAME, EAI_AGAIN, EAI_NODATA (-5 on glibc).
_DNS_ERRNOS = {socket.EAI_NONAME, socket.EAI_AGAIN, -5}
_DNS_WORDS = ("name or service not known", "nodename nor servname", "temporary failure in name resolution")


#: Every ``kind`` of :class:`Problem`, in the table's order (what the store errors' metrics are
#: named by: :mod:`airflow_jrs.observability.metrics`).
KINDS = ("refused", "dns", "timeout", "lost", "loading", "readonly", "oom", "auth", "noperm", "tls", "cluster",
         "other")  # fmt: skip


@dataclass(frozen=True)
class Problem:
    """One diagnosed Redis failure: ``kind`` (see the table above), ``retryable``, and the
    two halves of the sentence a user reads: what is wrong, and what to do."""

    kind: str
    retryable: bool
    problem: str
    advice: str

    def sentence(self) -> str:
        """``<problem>; <advice>`` with exactly one full stop at the end."""
        return f"{self.problem}; {self.advice}".rstrip(" .") + "."


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what caused it (``__cause__`` or ``__context__``), nearest first."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _text(exc: BaseException) -> str:
    return " ".join(str(a) for a in exc.args) if exc.args else ""


def _code(upper: str, code: str) -> bool:
    """Does the server's error code ``code`` start the text, or a part of it? Inside a Lua script
    redis-py sees it wrapped: ``Error running script ...: @user_script: 10: -READONLY You can't...``."""
    return re.search(rf"(?:^|[\s:-]){code}\b", upper) is not None


def quote_server_text(text: str, limit: int = 160) -> str:
    """The server's text for a case we do not know: one line, trimmed, no trailing dots."""
    one_line = re.sub(r"\s+", " ", text).strip().rstrip(".")
    if len(one_line) > limit:
        one_line = one_line[: limit - 3] + "..."
    return f'"{one_line}"'


#: The refusals the server words itself, in the order they are told apart: the case, redis-py's
#: exception classes for it, the error codes its reply starts with (also inside a script's
#: error, see :func:`_code`), and phrases of replies that carry no code.
_REPLIES: tuple[tuple[str, tuple[type[BaseException], ...], tuple[str, ...], tuple[str, ...]], ...] = (
    ("noperm", (redis_lib.exceptions.NoPermissionError,), ("NOPERM",), ()),
    (
        "auth",
        (redis_lib.exceptions.AuthenticationError, redis_lib.exceptions.AuthorizationError),
        ("NOAUTH", "WRONGPASS"),
        ("HELLO MUST BE CALLED", "INVALID PASSWORD", "AUTH <PASSWORD> CALLED WITHOUT ANY PASSWORD"),
    ),
    ("readonly", (redis_lib.exceptions.ReadOnlyError,), ("READONLY",), ()),
    ("oom", (redis_lib.exceptions.OutOfMemoryError,), ("OOM",), ()),
    ("loading", (redis_lib.exceptions.BusyLoadingError,), ("LOADING",), ()),
)


def _reply_kind(exc: BaseException, upper: str) -> str | None:
    """The case of :data:`_REPLIES` that ``exc`` (whose chain's text is ``upper``) is, if any."""
    for kind, classes, codes, phrases in _REPLIES:
        if isinstance(exc, classes) or any(_code(upper, c) for c in codes) or any(p in upper for p in phrases):
            return kind
    return None


#: What a task's reader is told about a passing fault; a terminal's reader is not (``retry=None``).
AIRFLOW_RETRIES = "Airflow will retry"


def diagnose(
    exc: BaseException,
    *,
    conn: str = "the jrs connection",
    server: str | None = None,
    retry: str | None = AIRFLOW_RETRIES,
) -> Problem:
    """The :class:`Problem` behind ``exc`` (a redis-py or socket error).

    ``conn`` names the connection in the advice (``connection 'jrs_default'``); ``server`` is
    ``host:port`` when known. Neither may hold a password: callers pass what
    :func:`describe_server` builds. ``retry`` ends the advice of a passing fault; the CLI
    passes ``None``: nobody retries a command typed in a terminal but its user.
    """
    at = f" at {server}" if server else ""

    def then(advice: str) -> str:
        return f"{advice}; {retry}" if retry else advice

    chain = _chain(exc)
    words = " ".join(_text(e) for e in chain)
    upper = words.upper()
    kind = _reply_kind(exc, upper)
    if kind == "noperm":
        denied = re.search(r"permissions? to (?:run|access) (.*?)(?:$|\.)", words, re.IGNORECASE)
        what = f" ({denied.group(0).rstrip('.')})" if denied else ""
        return Problem(
            "noperm",
            False,
            f"Redis refused the command: the ACL user of {conn} lacks a permission{what}",
            f"grant that user the rule in docs/security.md for this namespace, or fix the namespace of {conn}",
        )
    if kind == "auth":
        return Problem(
            "auth",
            False,
            f"the Redis server{at} needs a password (or the user or password is wrong)",
            f"set the ACL user and password in {conn} (login and password fields, or redis://USER:PASSWORD@HOST)",
        )
    if kind == "readonly":
        return Problem(
            "readonly",
            True,
            f"connected to a read-only replica{at}",
            f"point {conn} at the primary (after a failover "
            + (
                "Airflow's retry may reach the new one)"
                if retry
                else "running the command again may reach the new one)"
            ),
        )
    if kind == "oom":
        return Problem(
            "oom",
            True,
            f"Redis{at} is out of memory (maxmemory with noeviction) and refuses writes",
            then("free memory or raise maxmemory (keep noeviction: evicting results would re-run jobs)"),
        )
    if kind == "loading":
        return Problem(
            "loading",
            True,
            f"Redis{at} is loading its data after a restart",
            f"{retry} once it has loaded" if retry else "wait until it has loaded, then run the command again",
        )
    if any(isinstance(e, ssl.SSLError | ssl.CertificateError) for e in chain) or "SSL:" in upper:
        return Problem(
            "tls",
            False,
            f"the TLS handshake with Redis{at} failed",
            f"check the TLS settings of {conn} (ssl, ssl_ca_certs, ssl_cert_reqs, ssl_certfile) "
            "and that the server speaks TLS on that port",
        )
    for e in chain:
        if isinstance(e, socket.gaierror) or (
            isinstance(e, OSError) and e.errno in _DNS_ERRNOS and not isinstance(e, ConnectionError)
        ):
            return Problem(
                "dns",
                True,
                f"the Redis host name{' of ' + server if server else ''} does not resolve",
                then(f"fix the host of {conn} (or the DNS it relies on)"),
            )
    if any(w in words.lower() for w in _DNS_WORDS):
        return Problem("dns", True, "the Redis host name does not resolve", f"fix the host of {conn}")
    if any(isinstance(e, ConnectionRefusedError) for e in chain) or any(
        isinstance(e, OSError) and e.errno == errno.ECONNREFUSED for e in chain
    ):
        return Problem(
            "refused",
            True,
            f"connection refused: nothing listens{at}",
            then(f"start Redis, or fix the host and port of {conn}"),
        )
    if isinstance(exc, redis_lib.exceptions.TimeoutError | TimeoutError) or any(
        isinstance(e, socket.timeout | TimeoutError) for e in chain
    ):
        return Problem(
            "timeout",
            True,
            f"Redis{at} did not answer in time",
            then(
                "check that the server is up and not overloaded or paused (the timeouts are [jrs] "
                "connect_timeout and read_timeout)"
            ),
        )
    if isinstance(exc, redis_lib.exceptions.ConnectionError | ConnectionError | OSError):
        return Problem(
            "lost",
            True,
            f"the connection to Redis{at} failed or broke",
            then(f"check that Redis is up and reachable with the settings of {conn}"),
        )
    if isinstance(exc, redis_lib.exceptions.RedisClusterException):
        return Problem(
            "cluster",
            True,
            "no node of the Redis Cluster answered for the namespace's slot",
            then(f"check the cluster's health and the nodes of {conn}"),
        )
    return Problem(
        "other",
        False,
        f"Redis{at} answered with an error: {quote_server_text(_text(exc) or type(exc).__name__)}",
        "this is unexpected: report it with the task log",
    )


def describe_server(host: object, port: object, sentinel_master: object = None) -> str:
    """``host:port`` for messages (never credentials); behind Sentinel, the primary's name and
    the sentinel asked (``primary 'mymaster' via sentinel host:port``)."""
    if sentinel_master:
        return f"primary {sentinel_master!s} via sentinel {host}:{port}"
    return f"{host}:{port}"


def unavailable_line(
    exc: StoreUnavailableError,
    *,
    conn: str,
    server: str,
    password: str | None = None,
    retry: str | None = AIRFLOW_RETRIES,
) -> str:
    """One line for a store that failed: where it is (``conn`` and ``server``, never the
    password: ``password`` is masked should the server's words carry it), what could not be
    done, what is wrong and what to do. A task's log (``retry`` as is) and a terminal
    (``retry=None``) say it alike."""
    cause = exc.__cause__
    if cause is not None:
        sentence = diagnose(cause, conn=conn, server=server, retry=retry).sentence()
    else:  # raised by the store itself (an entry that changed under a write): its own words
        sentence = str(exc).rstrip(" .") + "."
    line = (
        f"job result store unavailable: could not {exc.what or 'use the job result store'} "
        f"(namespace {exc.namespace!r}, {conn}, Redis {server}): {sentence}"
    )
    line = " ".join(line.split())
    return mask_password(line, password)


def mask_password(text: str, password: str | None) -> str:
    """``text`` with ``password`` masked (``***``) where it stands as a credential: in a URL's
    login (``://user:PASSWORD@``, ``://:PASSWORD@``) and after ``password=`` / ``password:``
    (also ``pass``, ``pwd``, ``requirepass``; optionally quoted). Not every occurrence: a password
    that is an ordinary word ("wrong", "or") would otherwise mask our own advice ("(or the user or
    password is ***)"), and a masked word reads as a leak where there is none."""
    if not password:
        return text
    secret = re.escape(password)
    text = re.sub(rf"(://[^\s/@:]*:){secret}(?=@)", r"\1***", text)
    # The key may be quoted too (``{"password": "s3cret"}``, a dict's repr); the value ends where
    # its closing quote (if any) is followed by anything but a character of a longer value.
    return re.sub(
        rf"(\b(?:requirepass|password|passwd|pass|pwd)['\"]?\s*[=:]\s*(?P<q>['\"]?)){secret}(?=(?P=q)(?![\w\-]))",
        r"\1***",
        text,
        flags=re.IGNORECASE,
    )
