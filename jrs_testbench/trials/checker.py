"""Reads what happened (the history log) and what is left (the store, the output folders), and
says which guarantee broke, where.

Checks are sound by construction: a violation is only reported when the log's bounds prove it
(see :mod:`.history`: an event logged before a call bounds it from below, one logged after from
above). What they prove, per job:

``overlap`` / ``overlap_interval``
    two stand-ins computed at once: the kernel refused one the job's ``flock``, or their
    ``work_start..last sign of life`` intervals intersect.
``stale_launch_computed``
    a stand-in was launched by a fence that provably no longer held the lease, and it computed:
    the lost holder did not stop its work. "Provably": its attempt had logged ``lease_lost``, or
    a newer fence had logged ``lease_acquired``, or the attempt had been stopped (SIGSTOP) for
    longer than the TTL since acquiring (a stopped process renews nothing).
``work_after_done``
    a stand-in started computing after a SUCCEEDED result had been acknowledged (Done is done).
``stale_fence_write``
    a result was accepted from a fence that provably no longer held the lease (same proofs) when
    its write began, or the stored result's fence is older than a fence whose re-read under the
    lease found no success (so the write landed after that fence had taken over).
``succeeded_without_marker`` / ``marker_mismatch`` / ``incomplete_output``
    a SUCCEEDED result names an output whose commit marker is missing, unreadable, or for
    another job or fence, or whose chunks are not all there.
``committed_result_lost``
    an acknowledged SUCCEEDED write is not what the store holds at the end.
``second_success``
    more than one SUCCEEDED write acknowledged, or an earlier SUCCEEDED entry in the history.
``intent_left_behind`` / ``unexplained_result``
    a SUCCEEDED job still has an intent; a stored result no attempt ever began to write.

Liveness is reported apart from safety: trials without a result (``incomplete``).
"""

from __future__ import annotations

import os
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis as redis_lib

from airflow_jrs.intent import Intent, IntentStore
from airflow_jrs.spark.commit import read_commit_marker
from airflow_jrs.store import JobResultEntry, JobStatus, RedisJobResultStore
from jrs_testbench.trials.history import read_history

HOLDER_FAULTS = {
    "kill_group",
    "kill_attempt",
    "stall_attempt",
    "stall_group",
    "stall_after_intent",
    "stall_before_write",
}
STALL_FAULTS = {"stall_attempt", "stall_group", "stall_after_intent", "stall_before_write"}
OBSERVED = {
    "adopted": "adopted",
    "resubmit": "resubmitted",
    "predecessor_wait": "waited_for_predecessor",
    "predecessor_stopped": "stopped_predecessor",
    "skipped": "skipped",
    "skipped_under_lease": "skipped_under_lease",
    "standin_stopped": "standin_stopped_on_lease_loss",
    "killed_before_launch": "launch_prevented_after_loss",
    "result_refused": "write_refused",
}
_FENCE_DIR = re.compile(r"/fence-(\d+)$")


@dataclass(frozen=True)
class Violation:
    kind: str
    job: str
    detail: str


@dataclass
class JobFacts:
    """What the store holds for one job after the run."""

    entry: JobResultEntry | None
    history: list[JobResultEntry] = field(default_factory=list)
    intent: Intent | None = None


@dataclass
class Report:
    trials: int = 0
    completed: int = 0
    incomplete: list[str] = field(default_factory=list)
    faults: Counter[str] = field(default_factory=Counter)
    violations: list[Violation] = field(default_factory=list)
    observations: Counter[str] = field(default_factory=Counter)
    takeover_lease_s: list[float] = field(default_factory=list)
    takeover_result_s: list[float] = field(default_factory=list)
    #: The same, counting only takeovers by an attempt that was already waiting when the fault hit:
    #: the protocol's own latency (TTL + polling), without the harness's later arrivals.
    takeover_waiting_s: list[float] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def violation_counts(self) -> Counter[str]:
        return Counter(v.kind for v in self.violations)

    def summary(self) -> dict[str, Any]:
        return {
            "trials": self.trials,
            "completed": self.completed,
            "incomplete": len(self.incomplete),
            "faults": dict(sorted(self.faults.items())),
            "violations": dict(self.violation_counts()),
            "observations": dict(sorted(self.observations.items())),
            "takeover_lease_s": stats(self.takeover_lease_s),
            "takeover_result_s": stats(self.takeover_result_s),
            "takeover_waiting_s": stats(self.takeover_waiting_s),
        }


def stats(values: list[float]) -> dict[str, float | int]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "n": len(ordered),
        "median": round(statistics.median(ordered), 3),
        "p95": round(p95, 3),
        "max": round(ordered[-1], 3),
    }


def collect_facts(redis_url: str, namespace: str, spec_root: str, jobs: Iterable[str]) -> dict[str, JobFacts]:
    client = redis_lib.Redis.from_url(redis_url)
    try:
        store = RedisJobResultStore(client, namespace)
        intents = IntentStore(client, namespace, spec_root)
        return {
            job: JobFacts(entry=store.get_entry(job), history=store.get_history(job), intent=intents.get(job))
            for job in jobs
        }
    finally:
        client.close()


def check_run(
    log_path: str | os.PathLike[str], redis_url: str, namespace: str, spec_root: str, *, lease_ttl: float = 1.0
) -> Report:
    """Check a finished run: its log, and the store it left behind."""
    by_job, global_events = group_history(read_history(log_path))
    facts = collect_facts(redis_url, namespace, spec_root, by_job)
    return check(by_job, global_events, facts, lease_ttl=lease_ttl)


def group_history(records: Iterable[dict[str, Any]]) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    by_job: dict[str, list[dict[str, Any]]] = defaultdict(list)
    others: list[dict[str, Any]] = []
    for rec in records:
        job = rec.get("job")
        (by_job[job] if job else others).append(rec)
    for events in by_job.values():
        events.sort(key=lambda r: r["t"])
    return dict(by_job), others


def check(
    by_job: dict[str, list[dict[str, Any]]],
    global_events: list[dict[str, Any]],
    facts: dict[str, JobFacts],
    *,
    lease_ttl: float = 1.0,
) -> Report:
    report = Report()
    for rec in global_events:
        if rec.get("event") == "fault":
            report.faults[rec["kind"]] += 1
        elif rec.get("event") == "torn":
            report.observations["torn_log_lines"] += 1
        elif rec.get("event") == "runner_end" and rec.get("killed_leftovers"):
            report.observations["leftover_processes_killed"] += rec["killed_leftovers"]
    for job, events in sorted(by_job.items()):
        _check_job(job, events, facts.get(job, JobFacts(entry=None)), report, lease_ttl)
    return report


@dataclass
class _Standin:
    fence: int
    pid: int
    start: int | None = None
    last: int | None = None


@dataclass
class _JobHistory:
    """One job's log, sorted into what the checks compare."""

    acquired: list[tuple[int, int, int]] = field(default_factory=list)  # (t, fence, pid)
    lost_at: dict[int, int] = field(default_factory=dict)  # fence -> lease_lost
    released_at: dict[int, int] = field(default_factory=dict)  # pid -> lease released (or tried)
    rereads: list[tuple[int, str | None]] = field(default_factory=list)  # (fence, status found under lease)
    launch_at: dict[int, int] = field(default_factory=dict)  # fence -> just before Popen
    begin_at: dict[int, int] = field(default_factory=dict)  # fence -> just before the result write
    acked: list[dict[str, Any]] = field(default_factory=list)  # result_written
    refused: dict[int, str] = field(default_factory=dict)
    standins: dict[int, _Standin] = field(default_factory=dict)  # fence -> its stand-in
    faults: list[dict[str, Any]] = field(default_factory=list)
    stalls: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # pid -> [(stopped, resumed)]
    started: dict[int, int] = field(default_factory=dict)  # pid -> attempt_start
    trial_status: str | None = None

    def fence_of(self, pid: int) -> tuple[int, int] | None:
        """(acquired at, fence) of the attempt ``pid``."""
        return next(((t, f) for t, f, p in self.acquired if p == pid), None)

    def stale_since(self, fence: int, lease_ttl: float) -> tuple[int, str] | None:
        """From when ``fence`` provably no longer held the lease, and why.

        Proofs: its attempt logged ``lease_lost``; a newer fence logged ``lease_acquired``; or its
        attempt was stopped (SIGSTOP) for longer than the TTL after acquiring, since a stopped
        process renews nothing and an expired lease never comes back to the same token."""
        proofs: list[tuple[int, str]] = []
        if fence in self.lost_at:
            proofs.append((self.lost_at[fence], "its own lease_lost"))
        newer = [t for t, g, _ in self.acquired if g > fence]
        if newer:
            proofs.append((min(newer), "a newer fence's lease_acquired"))
        acquired_at, holder = next(((t, p) for t, f, p in self.acquired if f == fence), (None, None))
        for stopped, resumed in self.stalls.get(holder, []) if holder is not None else []:
            if acquired_at is not None and stopped > acquired_at and resumed - stopped >= (lease_ttl + 0.05) * 1e9:
                proofs.append((resumed, f"a {(resumed - stopped) / 1e9:.2f} s stop (TTL {lease_ttl:g} s)"))
        return min(proofs) if proofs else None


def _read_job(events: list[dict[str, Any]], report: Report) -> _JobHistory:
    h = _JobHistory()
    open_stalls: dict[int, int] = {}
    for e in events:
        ev, t = e["event"], e["t"]
        fence: Any = e.get("fence")  # an int on every attempt line once the lease is held
        if e.get("role") == "standin":
            s = h.standins.setdefault(fence, _Standin(fence=fence, pid=e["pid"]))
            if ev == "fault":
                report.faults[e["kind"]] += 1
            elif ev == "overlap":
                report.violations.append(
                    Violation("overlap", e["job"], f"stand-in of fence {fence} (pid {e['pid']}) found work.lock held")
                )
            elif ev == "work_start":
                s.start = s.last = t
            elif ev in ("chunk", "marker_written", "work_end"):
                s.last = t
            continue
        if ev == "attempt_start":
            h.started[e["pid"]] = t
        elif ev == "lease_acquired":
            h.acquired.append((t, fence, e["pid"]))
        elif ev == "lease_lost":
            h.lost_at.setdefault(fence, t)
        elif ev in ("lease_released", "lease_release_error"):
            h.released_at[e["pid"]] = t
        elif ev == "reread":
            h.rereads.append((fence, e.get("found")))
        elif ev == "launch":
            h.launch_at[fence] = t
        elif ev == "result_write_begin":
            h.begin_at[fence] = t
        elif ev == "result_written":
            h.acked.append(e)
        elif ev == "result_refused":
            h.refused[fence] = e.get("reason", "")
        elif ev == "fault":
            h.faults.append(e)
            report.faults[e["kind"]] += 1
            if e["kind"] in STALL_FAULTS:
                open_stalls[e["target"]] = t
        elif ev == "fault_end" and e.get("target") in open_stalls:
            h.stalls.setdefault(e["target"], []).append((open_stalls.pop(e["target"]), t))
        elif ev == "trial_end":
            h.trial_status = e.get("status")
        elif ev in OBSERVED:
            report.observations[OBSERVED[ev]] += 1
    return h


def _check_job(job: str, events: list[dict[str, Any]], facts: JobFacts, report: Report, lease_ttl: float) -> None:
    bad = report.violations
    h = _read_job(events, report)
    if h.trial_status is not None:
        report.trials += 1
        if h.trial_status == "done":
            report.completed += 1
        else:
            report.incomplete.append(f"{job}: {h.trial_status}")

    # Two copies at once (the flock overlap was reported while reading).
    runs = sorted((s for s in h.standins.values() if s.start is not None), key=lambda s: s.start or 0)
    for i, a in enumerate(runs):
        for b in runs[i + 1 :]:
            if b.start is not None and a.last is not None and b.start < a.last:
                bad.append(Violation("overlap_interval", job, f"fences {a.fence} and {b.fence} computed at once"))
    # A holder that had lost its lease launched work, and the work ran.
    for s in runs:
        launched, stale = h.launch_at.get(s.fence), h.stale_since(s.fence, lease_ttl)
        if launched is not None and stale is not None and stale[0] < launched:
            bad.append(
                Violation(
                    "stale_launch_computed",
                    job,
                    f"fence {s.fence} launched its stand-in {(launched - stale[0]) / 1e6:.1f} ms after {stale[1]}, "
                    "and the stand-in computed",
                )
            )
    success_acks = [e for e in h.acked if e.get("status") == JobStatus.SUCCEEDED.value]
    if success_acks:
        first_ack = min(e["t"] for e in success_acks)
        for s in runs:
            if s.start is not None and s.start > first_ack:
                bad.append(
                    Violation(
                        "work_after_done",
                        job,
                        f"stand-in of fence {s.fence} started {(s.start - first_ack) / 1e6:.1f} ms after the "
                        "SUCCEEDED result was acknowledged",
                    )
                )
    # Writes accepted from a fence that no longer held the lease.
    for e in h.acked:
        f: Any = e["fence"]
        begin, stale = h.begin_at.get(f, e["t"]), h.stale_since(f, lease_ttl)
        if stale is not None and stale[0] < begin:
            bad.append(
                Violation(
                    "stale_fence_write",
                    job,
                    f"fence {f}'s {e.get('status')} write was accepted although it began "
                    f"{(begin - stale[0]) / 1e6:.1f} ms after {stale[1]}",
                )
            )
    entry = facts.entry
    if entry is not None and entry.result.status is JobStatus.SUCCEEDED and entry.result.fence is not None:
        f = entry.result.fence
        blind = [g for g, found in h.rereads if g is not None and g > f and found != JobStatus.SUCCEEDED.value]
        if blind and not any(v.kind == "stale_fence_write" and v.job == job for v in bad):
            bad.append(
                Violation(
                    "stale_fence_write",
                    job,
                    f"the stored result has fence {f}, but fence {min(blind)} held the lease later and found no "
                    "success under it: the write landed after the lease had moved on",
                )
            )
    # What the store holds.
    if len(success_acks) > 1:
        bad.append(Violation("second_success", job, f"{len(success_acks)} SUCCEEDED writes acknowledged"))
    for old in facts.history:
        if old.result.status is JobStatus.SUCCEEDED:
            bad.append(
                Violation("second_success", job, f"an earlier SUCCEEDED entry (fence {old.result.fence}) was replaced")
            )
    for e in success_acks:
        if entry is None or entry.result.status is not JobStatus.SUCCEEDED or entry.result.fence != e.get("fence"):
            have = None if entry is None else (entry.result.status.value, entry.result.fence)
            bad.append(
                Violation("committed_result_lost", job, f"fence {e.get('fence')} was acknowledged; store has {have}")
            )
    if entry is not None:
        f = entry.result.fence
        if f not in h.begin_at:
            bad.append(Violation("unexplained_result", job, f"stored result of fence {f} that no attempt began"))
        elif not any(e.get("fence") == f for e in h.acked):
            reason = h.refused.get(f)
            report.observations["applied_but_reported_" + reason if reason else "applied_unacknowledged"] += 1
        if entry.result.status is JobStatus.SUCCEEDED:
            _check_output(job, entry, bad)
            if facts.intent is not None:
                bad.append(
                    Violation("intent_left_behind", job, f"intent of fence {facts.intent.fence} next to a result")
                )
    _takeovers(h, success_acks, report)


def _check_output(job: str, entry: JobResultEntry, bad: list[Violation]) -> None:
    staging = entry.result.outputs.get("output")
    if not staging:
        bad.append(Violation("succeeded_without_marker", job, "the result names no output"))
        return
    try:
        marker = read_commit_marker(staging)
    except ValueError as exc:
        bad.append(Violation("succeeded_without_marker", job, f"unreadable marker: {exc}"))
        return
    if marker is None:
        bad.append(Violation("succeeded_without_marker", job, f"no commit marker in {staging}"))
        return
    m = _FENCE_DIR.search(staging.rstrip("/"))
    if marker.get("job_id") != job or m is None or marker.get("fence") != int(m.group(1)):
        bad.append(
            Violation(
                "marker_mismatch", job, f"marker says job {marker.get('job_id')} fence {marker.get('fence')}: {staging}"
            )
        )
    want = (marker.get("metrics") or {}).get("chunks")
    have = len([n for n in os.listdir(staging) if n.startswith("part-")]) if Path(staging).is_dir() else 0
    if want != have:
        bad.append(Violation("incomplete_output", job, f"{have} chunks in {staging}, marker says {want}"))


def _takeovers(h: _JobHistory, success_acks: list[dict[str, Any]], report: Report) -> None:
    """Fault on a lease holder -> the next fence holds the lease, and -> the job has its result."""
    first_success = min((e["t"] for e in success_acks), default=None)
    for fault in h.faults:
        if fault["kind"] not in HOLDER_FAULTS:
            continue
        tf, pid = fault["t"], fault["target"]
        held = h.fence_of(pid)
        if held is None or held[0] > tf:
            continue
        fence = held[1]
        if h.released_at.get(pid, tf + 1) < tf or h.lost_at.get(fence, tf + 1) < tf:
            continue
        if first_success is not None and first_success < tf:
            continue
        nxt = sorted((t, p) for t, g, p in h.acquired if g > fence and t > tf)
        if nxt:
            report.takeover_lease_s.append((nxt[0][0] - tf) / 1e9)
            if h.started.get(nxt[0][1], tf) < tf:
                report.takeover_waiting_s.append((nxt[0][0] - tf) / 1e9)
        if first_success is not None:
            report.takeover_result_s.append((first_success - tf) / 1e9)
