"""The JSON shape of a job: one definition for the Job results API and ``airflow-jrs --json``.

The page's API and the CLI once shaped an entry differently (the result flat in one, nested
under ``result`` in the other) and a script written against one broke on the other. Every
JSON answer about a job is built here, in the shapes :mod:`airflow_jrs.views.shapes` declares
(mypy holds these functions to them); the page's TypeScript types are generated from the same
classes (``scripts/ui_shapes.py``), so a member the page reads cannot go missing here unseen.

Entries are flat: the result's members (:func:`~airflow_jrs.store.result_to_dict`) beside
``state``, ``created_at``, ``spark_url`` and, for a history item, ``moved`` (why, when, by whom).
A job's ``recoveries`` list what successors did about its dead attempts, newest first: ``at``,
``event`` (``took_over``, ``found``, ``waited``, ``stopped``, ``adopted``, ``resubmitted``,
``recorded``), ``fence`` (who did it), ``predecessor`` (the fence it acted on), ``text``, ``facts``;
``recovery_story`` tells them in sentences, oldest first (:mod:`airflow_jrs.views.story`).
``holder_state`` says what the lease's holder is doing now (running, or its task process gone
while its supervisor still runs Spark: :mod:`airflow_jrs.views.holder`), and ``streaming`` whether
the attempt in flight is a stream (``null`` without an intent).
``links``: the Airflow runs behind the job (``runs``: ``dag_id``, ``run_id``, ``url`` relative to
Airflow's base URL) and its Spark application (``spark_ui``).
Every fence is its token, a plain ``int`` (the owner nonce is the store's business:
:mod:`airflow_jrs.spark.fence`), so a document equals the JSON it is sent as.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, cast

from airflow_jrs.exceptions import CorruptIntentError
from airflow_jrs.store import JobResultEntry, result_to_dict
from airflow_jrs.store.heartbeats import Heartbeat
from airflow_jrs.store.intents import Intent
from airflow_jrs.store.leases.lease import LeaseHolder
from airflow_jrs.store.stop_requests import StopRequest
from airflow_jrs.views.holder import HolderState, holder_state
from airflow_jrs.views.job import HeldLease, InFlight, JobView
from airflow_jrs.views.links import run_url, spark_app_url
from airflow_jrs.views.shapes import (
    EntryJson,
    HolderStateJson,
    IntentJson,
    JobJson,
    LeaseHolderJson,
    LinksJson,
    RecoveryJson,
    RunLinkJson,
    StopRequestJson,
)
from airflow_jrs.views.story import recovery_story


def entry_json(entry: JobResultEntry, spark_ui: str | None = None) -> EntryJson:
    """An entry or history item. ``spark_ui``: the ``[jrs] spark_ui_url`` template, for ``spark_url``."""
    doc: dict[str, Any] = {
        **result_to_dict(entry.result),
        "state": entry.state.value,
        "created_at": entry.created_at.isoformat() if entry.created_at else None,
        "spark_url": spark_app_url(spark_ui, entry.result.application_id),
    }
    if entry.moved is not None:  # a history item: why, when and by whom it moved there
        doc["moved"] = entry.moved.to_json()
    if entry.summary:  # a clean reference as Redis holds it: the rest is in its result document
        doc["summary"] = True
    return cast(EntryJson, doc)  # the result's members come from the store's own serializer


def holder_json(holder: LeaseHolder | None) -> LeaseHolderJson | None:
    """The lease holder: its fencing token, the time left, the TTL each renewal sets (``null`` for
    an older lease) and who it is (host, pid, task)."""
    if holder is None:
        return None
    owner = cast(Any, holder.owner)  # the owner record as the holder wrote it
    return {"token": holder.token, "ttl_ms": holder.ttl_ms, "lease_ttl_ms": holder.lease_ttl_ms, "owner": owner}


def holder_state_json(state: HolderState | None) -> HolderStateJson | None:
    """What the lease holder is doing now (:mod:`~airflow_jrs.views.holder`): ``state`` (``running``,
    ``task_gone``: its task process gone while its supervisor runs Spark, ``gone``), ``text``,
    ``next`` and the pids, hosts and seconds they name."""
    return None if state is None else cast(HolderStateJson, state.to_json())


def intent_json(intent: Intent | CorruptIntentError | None) -> IntentJson | None:
    """The intent's members, or ``{"error": ...}`` for one that cannot be read."""
    if intent is None:
        return None
    if isinstance(intent, CorruptIntentError):
        return {"error": str(intent)}
    return cast(IntentJson, {**asdict(intent), "fence": int(intent.fence)})


def heartbeat_json(beat: Heartbeat | None) -> dict[str, Any] | None:
    return None if beat is None else {**asdict(beat), "fence": int(beat.fence)}


def stop_request_json(request: StopRequest | None, *, pending: bool) -> StopRequestJson | None:
    """The last stop or cancel asked; ``pending``: it names the attempt in flight."""
    if request is None:
        return None
    return cast(StopRequestJson, {**asdict(request), "fence": int(request.fence), "pending": pending})


def job_json(view: JobView, spark_ui: str | None = None) -> JobJson:
    """Everything known about one job (:func:`~airflow_jrs.views.job.inspect_job`), in the shape
    :class:`~airflow_jrs.views.shapes.JobJson` defines for Python and the page's TypeScript alike."""
    problem = view.problem
    return {
        "job_id": view.job_id,
        "namespace": view.namespace,
        "summary": view.summary,
        "state": view.entry.state.value if view.entry is not None else None,
        "running": view.running,
        "entry": entry_json(view.entry, spark_ui) if view.entry is not None else None,
        "problem": None if problem is None else {"error": type(problem).__name__, "detail": str(problem)},
        "quarantined": view.quarantined,
        "history": [entry_json(h, spark_ui) for h in view.history],
        "lease": holder_json(view.holder),
        "holder_state": holder_state_json(view.holder_state),
        "intent": intent_json(view.intent),
        "streaming": view.streaming,
        "heartbeat": heartbeat_json(view.heartbeat),
        "stop_request": stop_request_json(view.stop_request, pending=view.stop_pending),
        "recoveries": [cast(RecoveryJson, step.to_json()) for step in view.recoveries],
        "recovery_story": recovery_story(view.recoveries),
        "links": links_json(view, spark_ui),
    }


def links_json(view: JobView, spark_ui: str | None = None) -> LinksJson:
    """Where to look next: the Airflow runs that wrote the entry and its history (newest first,
    each once) and the entry's Spark application (``spark_ui``: ``[jrs] spark_ui_url``)."""
    runs: list[RunLinkJson] = []
    for item in [view.entry, *view.history]:
        attempt = item.result.attempt if item is not None else None
        if attempt is None or not attempt.run_id:
            continue
        url = run_url(attempt.dag_id, attempt.run_id)
        if all(r["url"] != url for r in runs):
            runs.append({"dag_id": attempt.dag_id, "run_id": attempt.run_id, "url": url})
    holder = view.holder.owner if view.holder is not None else {}
    if holder.get("dag_id") and holder.get("run_id"):
        url = run_url(str(holder["dag_id"]), str(holder["run_id"]))
        if all(r["url"] != url for r in runs):
            runs.insert(0, {"dag_id": str(holder["dag_id"]), "run_id": str(holder["run_id"]), "url": url})
    spark = spark_app_url(spark_ui, view.entry.result.application_id) if view.entry is not None else None
    return {"runs": runs, "spark_ui": spark}


def held_lease_json(held: HeldLease) -> dict[str, Any]:
    return {"job_id": held.job_id, "lease": holder_json(held.holder), "intent": intent_json(held.intent)}


def in_flight_json(found: InFlight) -> dict[str, Any]:
    return {
        "job_id": found.job_id,
        "intent": intent_json(found.intent),
        "lease": holder_json(found.holder),
        "holder_state": holder_state_json(holder_state(found.holder, found.heartbeat)),
        "heartbeat": heartbeat_json(found.heartbeat),
        "verdict": found.verdict,
    }
