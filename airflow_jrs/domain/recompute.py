"""Recompute on purpose: what a DAG run's ``{"jrs_recompute": ...}`` conf asks, and when it is met.

"Done is done" (docs/architecture.md invariant 1) holds *until someone forgets a result on purpose*. The
one obvious way to do that is ``airflow-jrs recompute`` or the Job results page's Recompute
button: both forget the results and clear the task instances, so no conf is involved. A DAG
run's conf is the other switch, for a run that does not exist yet ("Trigger DAG w/ config",
``airflow dags trigger --conf '{"jrs_recompute": true}'``):

* ``true`` asks to recompute every job of the run's JrsSparkSubmitOperator tasks;
* a list of task ids and/or job ids (or one such string) only those;
* ``"jrs_recompute_at": "<ISO-8601 time>"`` beside it says when the request was made.

A request acts once. It is met by any result computed after the request: the rule is "never
reuse a result computed *before* this run's request". When the run's task first meets the
request for a job, the attempt records a mark in the store (:mod:`airflow_jrs.store.recompute_requests`;
the run's own creation time is not in a task's context): the namespace's fence counter then,
and the token of the job's lease if one was held. A result whose fence is greater than that
counter came from a lease taken after the request; a result of the lease that was computing
the job then was written after it. Both meet the request, whatever any host's clock says. So
a retry, a clear or a later backfill of the same run, which keeps its conf, reuses what that
run, or any run after the request, computed: the request is not repeated every time the run is.

Times are compared only where fences cannot be: ``jrs_recompute_at`` is a wall-clock time by
nature, so it is compared with the result's ``created_at`` (the Redis server's clock, whichever
host wrote the result: a skew between it and whoever chose the time shifts the line by as much); and a
mark written by an older version (a time only) or a result without a fence (written outside a
lease) falls back to the recorded time.

:func:`verdict` is the rule; the worker (:mod:`airflow_jrs.operators.spark`), the triggerer
(:mod:`airflow_jrs.triggers.start_in_triggerer`) and ``airflow-jrs plan`` all call it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from airflow_jrs.domain.decision import Decision, decide
from airflow_jrs.domain.model import JobResult, JobResultEntry
from airflow_jrs.domain.paths import fence_token_of
from airflow_jrs.exceptions import JrsConfigError

#: The DAG run conf key.
RECOMPUTE_KEY = "jrs_recompute"
#: The optional conf key saying when the request was made (ISO-8601; naive means UTC).
RECOMPUTE_AT_KEY = "jrs_recompute_at"
_TRUE = ("true", "1", "yes", "all", "*")
_FALSE = ("", "false", "0", "no", "none")


@dataclass(frozen=True)
class RequestSeen:
    """When a request first met a job: the fence mark the rule compares, and the time shown."""

    #: Redis ``TIME`` at the first meeting.
    at: datetime
    #: The namespace's fence counter then: a result with a greater fence came from a lease taken
    #: after the request. ``None`` when not known (then times are compared).
    fence: int | None = None
    #: The token of the job's lease held then (the computation in flight), if any.
    in_flight: int | None = None

    def met_by(self, fence: int | None) -> bool | None:
        """Whether a result with ``fence`` was computed after the request: ``None`` when the
        fences cannot tell (no fence on either side)."""
        if self.fence is None or fence is None:
            return None
        return int(fence) > self.fence or (self.in_flight is not None and int(fence) == self.in_flight)


@dataclass(frozen=True)
class Request:
    """What a DAG run's conf asks to recompute: every job of the run, or the named tasks/jobs."""

    everything: bool
    names: frozenset[str] = frozenset()
    #: ``jrs_recompute_at``: when the request was made, if the conf says.
    at: datetime | None = None

    def names_job(self, task_id: str, job_id: str) -> bool:
        return self.everything or task_id in self.names or job_id in self.names


@dataclass(frozen=True)
class Verdict:
    """Recompute the job's SUCCEEDED result or reuse it, and why (for the log and ``plan``)."""

    recompute: bool
    reason: str


def _conf(context_or_conf: Mapping[str, Any] | None) -> Mapping[str, Any]:
    dag_run = context_or_conf.get("dag_run") if context_or_conf is not None else None
    conf = getattr(dag_run, "conf", None) if dag_run is not None else context_or_conf
    return conf if isinstance(conf, Mapping) else {}


def read_request(conf: Mapping[str, Any] | None) -> Request | None:
    """The request in a DAG run's conf (or a task context holding the run), ``None`` when it
    asks for nothing. Raises :class:`JrsConfigError` on a value it cannot read: a typo must not
    silently reuse."""
    doc = _conf(conf)
    value = doc.get(RECOMPUTE_KEY)
    at = _read_at(doc.get(RECOMPUTE_AT_KEY))
    if value is None or value is False:
        return None
    if value is True:
        return Request(everything=True, at=at)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE:
            return Request(everything=True, at=at)
        if word in _FALSE:
            return None
        value = [value]
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return Request(everything=False, names=frozenset(value), at=at)
    raise JrsConfigError(
        f"DAG run conf {RECOMPUTE_KEY!r} must be true/false or a list of task ids or job ids, got {value!r}"
    )


def _read_at(raw: Any) -> datetime | None:
    if raw is None:
        return None
    try:
        at = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError:
        raise JrsConfigError(
            f"DAG run conf {RECOMPUTE_AT_KEY!r} must be an ISO-8601 time such as 2024-03-01T12:00:00Z, got {raw!r}"
        ) from None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def verdict(
    request: Request | None, *, task_id: str, job_id: str, entry: JobResultEntry, first_seen: RequestSeen | None
) -> Verdict:
    """Recompute the job's SUCCEEDED ``entry``, or reuse it, for a run carrying ``request``.

    ``first_seen`` is the mark recorded when the run's task first met the request for this job,
    ``None`` when it has not yet: then the request has not acted and is due. The conf's own
    time, when it gives one, wins over ``first_seen`` (and is compared with ``created_at``)."""
    if request is None or not request.names_job(task_id, job_id):
        return Verdict(False, "the run's conf does not ask to recompute it")
    if request.at is None and first_seen is None:
        return Verdict(True, "the run's conf asks to recompute it (the request acts once, now)")
    fence = entry.result.fence
    if request.at is None and first_seen is not None and (met := first_seen.met_by(fence)) is not None:
        asked = f"the run's recompute request of {first_seen.at.isoformat()} (fence counter {first_seen.fence})"
        if met:
            return Verdict(
                False,
                f"{asked} is met already: this result's fence {fence} was taken after it; a request acts "
                "once, so a retry, clear or backfill of the run reuses it",
            )
        return Verdict(True, f"the run's conf asks to recompute it; its result's fence {fence} was taken before "
                             f"{asked}")  # fmt: skip
    at = request.at or (first_seen.at if first_seen is not None else None)
    assert at is not None  # one of the two is set, above
    created = entry.created_at
    if created is None or created < at:
        when = created.isoformat() if created else "at an unknown time"
        return Verdict(True, f"the run's conf asks to recompute it; its result was created {when}, before the "
                             f"request of {at.isoformat()}")  # fmt: skip
    return Verdict(
        False,
        f"the run's recompute request of {at.isoformat()} is met already: this result was created after it "
        f"({created.isoformat()}); a request acts once, so a retry, clear or backfill of the run reuses it",
    )


@dataclass(frozen=True)
class Choice:
    """What an attempt does with what the store holds: the decision table, then the run's request."""

    decision: Decision
    #: The run's recompute verdict on a result the table would reuse (``None`` when it would run).
    verdict: Verdict | None = None

    @property
    def reuse(self) -> bool:
        """Reuse the stored result: the table says SKIP and the run does not ask to recompute it."""
        return self.decision.skip and self.decision.entry is not None and not self.recompute

    @property
    def recompute(self) -> bool:
        """The table would reuse the result, but the run asks to compute it again."""
        return self.verdict is not None and self.verdict.recompute

    @property
    def reason(self) -> str:
        return self.verdict.reason if self.recompute and self.verdict is not None else self.decision.reason


def choose(
    entry: JobResultEntry | None,
    fingerprint: str | None,
    *,
    accept_changed_fingerprint: bool,
    request: Request | None,
    task_id: str,
    first_seen: RequestSeen | None,
) -> Choice:
    """Reuse, recompute or run: the one policy every decider applies (the attempt in the worker,
    before and under its lease, and the start-in-triggerer trigger). Pure: the callers read the
    entry and the request's first-seen mark, each with its own I/O."""
    decision = decide(entry, fingerprint, accept_changed_fingerprint=accept_changed_fingerprint)
    if not decision.skip or decision.entry is None:
        return Choice(decision)
    entry = decision.entry
    return Choice(decision, verdict(request, task_id=task_id, job_id=entry.job_id, entry=entry, first_seen=first_seen))


def how_to_recompute(job_id: str) -> str:
    """The one documented way, for log lines that tell a user how to recompute instead."""
    return (
        f"To recompute it: airflow-jrs recompute {job_id} (forgets the result and clears its task "
        "instance), or the Recompute button on the Job results page (Browse > Job results)"
    )


def describe_reuse(job_id: str, entry: JobResultEntry) -> str:
    """Why Spark is not started, and how to recompute instead: the first lines an on-call
    engineer reads in the task log."""
    result = entry.result
    when = result.end_time or entry.created_at
    attempt = result.attempt
    by = (
        f"run {attempt.run_id} ({attempt.dag_id}.{attempt.task_id}, try {attempt.try_number})"
        if attempt is not None
        else "an unknown run"
    )
    return (
        f"Job {job_id}: reusing its {result.status.value} result ({entry.state.value}), computed "
        f"{when.isoformat() if when else 'at an unknown time'} by {by}"
        f"{f', fence {result.fence}' if result.fence is not None else ''}; Spark is not "
        f"started. {how_to_recompute(job_id)}"
    )


# --- What clearing a recomputed job's task instance recomputes besides it ---------------------
#
# ``airflow-jrs recompute`` and the Recompute button clear the task instance with its downstream
# tasks (``include_downstream``, as the UI's Clear does): the cleanup must run again, and so does
# every task after it. A cleared guarded task then asks the decision table like any attempt: it
# reuses its result when its fingerprint is the same, and runs Spark when it has no successful
# result or its rendered arguments changed. They change when they carry the output location of a
# job that recomputes: a new result lives in a new ``fence-<token>`` folder. ``knock_on`` is that
# rule, applied before the clear to what the clear will clear (Airflow's own dry run says which
# task instances), so the preview lists what the clear will cost.


@dataclass(frozen=True)
class ClearedJob:
    """A guarded task instance that the clear clears besides the recomputed ones (downstream)."""

    task_id: str
    job_id: str
    #: Its rendered template fields (arguments, SQL, ...) as text: what its fingerprint covers.
    arguments: str
    #: Its stored result; ``None`` when it has none.
    result: JobResult | None
    #: Its task instance's map index (-1: not mapped): with ``task_id``, what the clear names.
    map_index: int = -1


@dataclass(frozen=True)
class KnockOn:
    """What a cleared downstream job does when its task runs again, and why."""

    job: ClearedJob
    recompute: bool
    reason: str
    #: The recomputed job whose output its arguments carry (``None`` when not that).
    upstream: str | None = None


def moving_outputs(result: JobResult | None) -> list[str]:
    """The output locations of ``result`` that a recomputation moves: those inside its attempt's
    ``fence-<token>`` folder (a fixed location, written in place, stays where it is)."""
    if result is None or result.fence is None:
        return []
    return [
        location
        for location in result.outputs.values()
        if any(fence_token_of(part) == int(result.fence) for part in str(location).split("/"))
    ]


def knock_on(recomputed: Mapping[str, JobResult | None], cleared: Sequence[ClearedJob]) -> list[KnockOn]:
    """Which of the ``cleared`` downstream jobs recompute when the jobs of ``recomputed`` (job id:
    its result now, forgotten by the recompute) compute again, in the order given.

    A cleared job runs Spark when it has no successful result, or when its arguments carry a
    moving output (:func:`moving_outputs`) of a job that recomputes (its fingerprint changes; the
    decision table runs it as a new job). That applies transitively: a job recomputed because of
    another moves its own outputs too. Otherwise it reuses its result."""
    moving = {job_id: moving_outputs(result) for job_id, result in recomputed.items()}
    found: dict[str, KnockOn] = {}
    changed = True
    while changed:
        changed = False
        for job in cleared:
            if job.job_id in found or job.job_id in recomputed:
                continue
            verdict_ = _knock_on_one(job, moving)
            if verdict_ is not None:
                found[job.job_id] = verdict_
                moving[job.job_id] = moving_outputs(job.result)
                changed = True
    out = []
    for job in cleared:
        if job.job_id in recomputed:
            continue
        out.append(found.get(job.job_id) or KnockOn(job, False, _REUSES))
    return out


_CLEARED = "cleared with the recomputed jobs (the clear includes downstream tasks)"
_REUSES = (
    f"{_CLEARED}; its arguments carry no output of a recomputed job, so its fingerprint is the same: it "
    "reuses its result"
)


def _knock_on_one(job: ClearedJob, moving: Mapping[str, list[str]]) -> KnockOn | None:
    if job.result is None or not job.result.status.is_success:
        return KnockOn(job, True, f"{_CLEARED}; it has no successful result, so it runs")
    for upstream, locations in moving.items():
        for location in locations:
            if location in job.arguments:
                return KnockOn(
                    job,
                    True,
                    f"downstream of {upstream}: {_CLEARED}, and its arguments carry {upstream}'s output "
                    f"{location}, which the new result moves: its fingerprint changes, so it runs Spark",
                    upstream,
                )
    return None
