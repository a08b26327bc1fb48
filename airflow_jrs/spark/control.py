"""Stop and cancel requests for a running stream, and how its driver says it ended (FLIP-45).

A streaming job has a ``control/`` folder beside its checkpoint
(:func:`airflow_jrs.domain.paths.control_path`). Two small JSON documents live there:

``request.json`` -- written on the Airflow side (the operator's ``on_kill``, ``airflow-jrs stop``
/ ``cancel``) through fsspec; polled by the driver through the JVM's Hadoop FileSystem
(:mod:`airflow_jrs.spark.streaming`), so it reaches the driver wherever it runs (local,
client or cluster deploy mode: the driver can always read its own checkpoint area)::

    {"v": 1, "kind": "stop" | "cancel", "fence": 7, "nonce": "a1..", "requested_at": "...", "by": "on_kill"}

A request names the fence of the attempt it is meant for: the token and, when the lease has
one, its owner nonce (:mod:`airflow_jrs.spark.fence`). A driver ignores a request for another
fence, so a stale request never stops the next attempt, nor another holder a failover handed
the same token. A cancel is never downgraded to a stop (:func:`write_request`).

``ended-fence-<N>-<nonce>.json`` (``ended-fence-<N>.json`` for a fence without a nonce: the
name is ``ended-`` + :func:`airflow_jrs.spark.fence.fence_name`) -- written by the driver of that
fence when its query ended on its own terms, before the application exits. Named by the whole
identity: after a failover re-issued token ``N``, the earlier holder's file is not this one's::

    {"v": 1, "ended": "stopped" | "finished", "fence": 7, "last_batch_id": 12,
     "checkpoint_location": "...", "boundary": true, "application_id": "local-...", "at": "..."}

``boundary`` says that every started batch had committed when the query stopped (the stop
happened between two micro-batches). A canceled driver writes nothing: it exits at once.

Standard library and fsspec only (the Airflow-side half); never Airflow, never Redis.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from airflow_jrs.spark.fence import fence_name, nonce_of

STOP = "stop"
CANCEL = "cancel"
KINDS = (STOP, CANCEL)
STOPPED = "stopped"
FINISHED = "finished"
CONTROL_VERSION = 1
REQUEST_NAME = "request.json"
#: A canceled driver exits with this code (128 + SIGTERM, what a killed process reports).
CANCEL_EXIT_CODE = 143

_BATCH_FILE = re.compile(r"^\d+$")


def request_path(control_dir: str) -> str:
    return f"{control_dir.rstrip('/')}/{REQUEST_NAME}"


def outcome_path(control_dir: str, fence: int) -> str:
    """``<control>/ended-fence-<token>[-<nonce>].json``: the outcome file of one fence identity."""
    return f"{control_dir.rstrip('/')}/ended-{fence_name(fence)}.json"


def request_doc(kind: str, fence: int | None, by: str) -> dict[str, Any]:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {list(KINDS)}, got {kind!r}")
    return {
        "v": CONTROL_VERSION,
        "kind": kind,
        "fence": None if fence is None else int(fence),
        "nonce": nonce_of(fence),
        "requested_at": datetime.now(UTC).isoformat(),
        "by": by,
    }


def applies_to(doc: dict[str, Any] | None, fence: int | None) -> str | None:
    """The kind of ``doc`` when it is a valid request for ``fence`` (or for any fence), else None."""
    if not isinstance(doc, dict) or doc.get("v") != CONTROL_VERSION or doc.get("kind") not in KINDS:
        return None
    target = doc.get("fence")
    if target is not None and fence is not None and int(target) != int(fence):
        return None
    nonce, own = doc.get("nonce"), nonce_of(fence)
    if target is not None and nonce and own and nonce != own:  # same token, another holder
        return None
    return str(doc["kind"])


# -- Airflow side (fsspec) ----------------------------------------------------------------------
def _read_json(url: str) -> dict[str, Any] | None:
    import fsspec

    fs, path = fsspec.core.url_to_fs(url)
    try:
        with fs.open(path, "rb") as fh:
            doc = json.loads(fh.read().decode("utf-8"))
    except FileNotFoundError:
        return None
    except ValueError:  # half-written or foreign: not a request we act on
        return None
    return doc if isinstance(doc, dict) else None


def _write_json(url: str, doc: dict[str, Any]) -> None:
    """Write through a temporary name and rename, so a poller never reads half a document."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(url)
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    tmp = f"{path}.{datetime.now(UTC).timestamp():.6f}.tmp"
    with fs.open(tmp, "wb") as fh:
        fh.write(json.dumps(doc, sort_keys=True).encode("utf-8"))
    fs.mv(tmp, path)


def read_request(control_dir: str) -> dict[str, Any] | None:
    return _read_json(request_path(control_dir))


def write_request(control_dir: str, kind: str, fence: int | None, *, by: str) -> dict[str, Any]:
    """Ask the driver of ``fence`` to stop (at a batch boundary) or to cancel (at once).

    Returns the request in force: a stop asked for after a cancel of the same fence leaves
    the cancel in place (a cancel is never downgraded)."""
    doc = request_doc(kind, fence, by)
    current = read_request(control_dir)
    if kind == STOP and applies_to(current, fence) == CANCEL and current is not None:
        return current
    _write_json(request_path(control_dir), doc)
    return doc


def clear_request(control_dir: str) -> None:
    """Drop any request left by an earlier attempt (done before a new attempt submits)."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(request_path(control_dir))
    if fs.exists(path):
        fs.rm(path)


def requested_kind(control_dir: str, fence: int) -> str | None:
    """``"stop"``, ``"cancel"`` or None: what was asked of the attempt holding ``fence``."""
    return applies_to(read_request(control_dir), fence)


def read_outcome(control_dir: str, fence: int) -> dict[str, Any] | None:
    """How the driver of ``fence`` said its query ended, or None (it did not say: it was
    canceled, crashed, or is not a :func:`~airflow_jrs.spark.streaming.streaming_job`)."""
    doc = _read_json(outcome_path(control_dir, fence))
    if doc is None or doc.get("ended") not in (STOPPED, FINISHED):
        return None
    return doc


def batch_ids(checkpoint_location: str, kind: str = "commits") -> list[int]:
    """Batch ids in the checkpoint's ``commits/`` (or ``offsets/``) log, ascending (fsspec)."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(f"{checkpoint_location.rstrip('/')}/{kind}")
    try:
        names = [p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path, detail=False)]
    except FileNotFoundError:
        return []
    return sorted(int(n) for n in names if _BATCH_FILE.match(n))
