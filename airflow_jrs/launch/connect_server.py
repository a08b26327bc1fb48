"""Spark Connect: what the server says of a session (:func:`session_state`, :func:`interrupt_session`), and
whether the server asked is the one that holds it (:func:`check_same_server`).

A successor reattaches to its predecessor's session by id (``sc://host:port/;session_id=<id>``)
and asks the server whether it still runs an operation (``GetStatus``), or interrupts it. It only
looks: it closes its channel and never releases the session (that would interrupt what runs).

Which server: a Connect session lives on the one server that opened it. A successor asks about the
predecessor's session on the server its connection names *now*; a server that never held the
session answers ``SESSION_NOT_FOUND``, which reads as "nothing runs". So when the connection was
repointed since the predecessor started (a new server, a migration), or a load balancer sent the
successor elsewhere, the successor would compute beside the predecessor's work still running on
the old server.

Before it asks, the successor therefore compares the server of its connection with the one the
predecessor's spec records (``remote``: its URL, the token redacted), by host and port as written
(``sc://host`` means port 15002, Spark Connect's default), and fails closed on a mismatch, naming
both and what to do (:func:`check_same_server`). Every Connect attempt has recorded ``remote`` in
its spec since the launcher's first version, so an intent written before this check is compared
the same way; a spec that cannot be read or records no server fails closed too (unknown is not
"the same").

What an address cannot tell: several servers behind one address (a load balancer spreading
sessions over them) look like one. There, route Spark Connect by session id (sticky sessions), so
that a session's every RPC reaches the server that holds it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.store.intents import IntentStore

if TYPE_CHECKING:
    from airflow_jrs.store.intents import Intent

#: The port of an ``sc://`` URL that names none (pyspark's ``ChannelBuilder.default_port()``).
DEFAULT_PORT = 15002
#: Operation states in which an operation does no more Spark work (TERMINATING: its work is done,
#: its results wait for a client).
ENDED_STATES = frozenset(
    {"OPERATION_STATE_TERMINATING", "OPERATION_STATE_SUCCEEDED", "OPERATION_STATE_FAILED", "OPERATION_STATE_CANCELLED"}
)
#: What the server answers for a session it does not hold (never opened, released, expired).
GONE = ("SESSION_NOT_FOUND", "SESSION_CLOSED")
#: :func:`session_state`'s answers.
SESSION_RUNNING, SESSION_IDLE, SESSION_GONE = "running", "idle", "gone"


def _client(url: str) -> Any:
    """A bare Connect client: no default/active session is set, no RPC until one is called."""
    from pyspark.sql.connect.client import SparkConnectClient

    return SparkConnectClient(connection=url)


def session_state(url: str) -> str:
    """What the server says of the session of ``url`` (it names a ``session_id``): :data:`SESSION_RUNNING`
    (an operation still runs in it), :data:`SESSION_IDLE` (the server holds it, nothing runs in it, but a
    client of it may still start an operation) or :data:`SESSION_GONE` (released or expired: no
    operation runs in it and none can start; or never opened).

    Asks the server (``GetStatus``). Closes the channel (never releases the session: that would
    interrupt what it runs). Raises on any other error: unknown is not "no"."""
    from pyspark.errors.exceptions.connect import SparkConnectException
    from pyspark.sql.connect.proto import base_pb2

    names = base_pb2.GetStatusResponse.OperationStatus.OperationState
    client = _client(url)
    try:
        resp = client._get_operation_statuses()
    except SparkConnectException as exc:
        if any(gone in str(exc) for gone in GONE):
            return SESSION_GONE
        raise
    finally:
        client.close()
    running = any(names.Name(s.state) not in ENDED_STATES for s in resp.operation_statuses)
    return SESSION_RUNNING if running else SESSION_IDLE


def session_running(url: str) -> bool:
    """Does the session of ``url`` still run an operation (:func:`session_state`)?"""
    return session_state(url) == SESSION_RUNNING


def interrupt_session(url: str) -> list[str]:
    """Interrupt every operation of the session of ``url``; their operation ids.

    The whole session, not the attempt's tag: Connect tags are per client thread (pyspark's
    ``SparkConnectClient.thread_local.tags``), so an operation the function started from a thread
    of its own carries no tag, and an interrupt by tag misses it. The session is the attempt's
    alone (:meth:`.connect_launcher.ConnectLauncher.prepare` picks a new one per launch), so "all" is exactly its
    work. Only when the session exists (an Interrupt RPC must not open a session that never was)."""
    if not session_running(url):
        return []
    client = _client(url)
    try:
        return list(client.interrupt_all() or [])
    finally:
        client.close()


def server_address(url: str) -> str:
    """``host:port`` of a Spark Connect URL ``sc://host[:port][/;params]``: the host in lower case
    (``[...]`` around an IPv6 one), the port :data:`DEFAULT_PORT` when the URL names none. Raises
    ``ValueError`` for what is no ``sc://`` URL."""
    parsed = urlparse(url)
    if parsed.scheme != "sc" or not parsed.hostname:
        raise ValueError(f"{url!r} is not a Spark Connect URL (sc://host[:port])")
    host = parsed.hostname.lower()
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{parsed.port or DEFAULT_PORT}"


def recorded_server(stale: Intent) -> tuple[str | None, str]:
    """(``host:port`` of the server the predecessor's spec records, or ``None``; why not, when not)."""
    try:
        spec = IntentStore.read_spec(stale.spec_uri)
    except Exception as exc:  # missing, unreadable, not JSON: the server is unknown
        return None, f"its spec {stale.spec_uri} could not be read ({exc})"
    remote = spec.get("remote")
    if not isinstance(remote, str) or not remote:
        return None, f"its spec {stale.spec_uri} records no Spark Connect server"
    try:
        return server_address(remote), ""
    except ValueError as exc:
        return None, f"its spec {stale.spec_uri} records no usable server ({exc})"


def check_same_server(namespace: str, stale: Intent, url: str, log: Any) -> None:
    """Raise :class:`JrsConfigError` unless ``url`` (the connection's server now) is the server the
    predecessor's session was opened on, as its spec records it: any other server would answer "not
    found" for that session, read as "nothing runs", and the successor would compute beside it."""
    current = server_address(url)
    recorded, unknown = recorded_server(stale)
    if recorded == current:
        log.info(
            "Job %s: the predecessor's Spark Connect session %s was opened on %s, the server the connection "
            "names: asking it.", stale.job_id, stale.session_id, current,
        )  # fmt: skip
        return
    if recorded is None:
        found = f"airflow-jrs cannot tell which server it was opened on: {unknown}"
        back = "at the server it ran on"
    else:
        found = f"it was opened on {recorded}, but the connection now names {current}"
        back = f"back at {recorded}"
    raise JrsConfigError(
        f"job {stale.job_id}: the predecessor (fence {int(stale.fence)}) ran in Spark Connect session "
        f"{stale.session_id}, and {found}. Only the server that holds a session can say whether its work still "
        "runs (any other answers 'session not found'), so this attempt starts nothing rather than compute beside "
        f"it. Point the connection (or spark.remote) {back} until this job has a result, then clear the task; or, "
        "if that server is gone for good (its sessions went with it), delete the job's intent in namespace "
        f"{namespace!r} (its Redis key: docs/concepts/intents.md) and clear the task."
    )
