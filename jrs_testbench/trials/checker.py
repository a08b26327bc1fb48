"""The checker: what happened (the trial's history, recorded outside the product), what is left
(the store, the folders), and which guarantee broke, per job.

Timestamps are ``CLOCK_MONOTONIC`` (:mod:`.history`): an event logged *before* a call bounds it
from below (``result_write_begin``, ``fault``), one logged *after* it from above
(``result_written``, ``lease_acquired``, ``work_start``). A violation is only reported when the
bounds prove it. The invariants (violation kinds):

``two_applications``
    the stand-in could not take its job's ``flock``: another application of the job was
    computing (detected inside the application, not keyed by fence).
``lower_fence_after_higher``
    a write by a lower fence was acknowledged although it began after a higher fence's write
    had been acknowledged.
``write_after_lease_lost``
    a write was acknowledged although it began after a higher fence had logged taking the
    lease (tokens only grow: the writer provably no longer held it).
``acknowledged_success_lost``
    an acknowledged SUCCEEDED is neither the stored entry (same fence) nor in the job's history
    as ``recomputed`` after a recompute's forget.
``done_ran_again``
    a second SUCCEEDED was acknowledged, or an application started, after a SUCCEEDED had been
    acknowledged and without a recompute forgetting it (Done is done).
``clean_output_broken``
    the clean entry's outputs do not exist or do not hold what its marker says
    (:func:`jrs_testbench.invariants.check_outputs`; checked after every trial).
``clean_document_missing``
    with ``[jrs] result_documents`` on, the clean entry is a reference whose result document is
    missing or not that entry's (read through the product's own reader from the shared folder,
    as every other host reads it): the full result is gone while Redis says "done".
``intent_left`` / ``heartbeat_left``
    a clean SUCCEEDED job still has an intent, or a heartbeat that never expires.
``stuck_without_message``
    the job has no SUCCEEDED result and its last try that reported failed said nothing.
``write_by_displaced_holder``
    a write was acknowledged although it began after *another* try had logged taking the lease
    with the same token (a failover lost the counter's increment and the token was handed out
    twice): the fence identity (token and owner nonce) must tell the two holders apart.
``took_over_live_holder``
    a try took the lease over (fast takeover: "its holder is provably dead") from a fence whose
    try logged something after the takeover was logged: the holder was alive. A takeover from an
    earlier try of the same run (the trials' task instance) is by design whatever that try does
    (Airflow started the retry after it gave up on that try: a zombie); the rules on writes and
    applications still hold it to writing nothing and running beside nobody.
``success_displaced_by_failure``
    a SUCCEEDED result left the job's slot for its history (``superseded``) to make room for a
    FAILED, CANCELED or STOPPED one: a failed run of changed code must never throw out a
    committed result (done is done; a rollback would compute it again).
``waited_for_itself``
    a try's ACQUIRE was refused while the lease's stored nonce was the try's own (read back
    right after the refusal: no other attempt draws that nonce): it waits for itself, as after
    a lost reply whose command redis-py sent again.

Faults that lose acknowledged writes by design: a failover to a replica that lacked the last
writes (asynchronous replication) can take back a result, a lease or the fence counter, so for a
trial that overlaps a failover the invariants ``LOSSY`` lists are reported as *excused* (counted
and listed, never dropped); every other invariant is checked as usual.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import redis as redis_lib

from airflow_jrs.domain.model import HistoryReason
from airflow_jrs.exceptions import ResultDocumentError
from airflow_jrs.store import JobResultEntry, JobStatus, RedisJobResultStore
from airflow_jrs.store.redis.heartbeats import RedisHeartbeats
from airflow_jrs.store.redis.intents import RedisIntentStore
from airflow_jrs.store.results.documents import ResultDocuments
from jrs_testbench.invariants import check_outputs
from jrs_testbench.trials.history import read_history

#: Invariants a failover (acknowledged writes lost) may break by design. ``intent_left``: the
#: result write that deleted the intent can be lost while the intent had replicated, or the
#: checker's reads straddle the promotion (seed 1, trial 4189 of the 5,610-trial run).
LOSSY = frozenset(
    {
        "intent_left",
        "lower_fence_after_higher",
        "write_after_lease_lost",
        "acknowledged_success_lost",
        "done_ran_again",
        "two_applications",
    }
)
#: Faults after which a successor must take the lease over: the takeover time is measured from them.
HOLDER_FAULTS = frozenset({"kill_task", "kill_supervisor", "pause", "pause_before_write", "on_kill", "crash"})


@dataclass(frozen=True)
class Violation:
    kind: str
    trial: int
    job: str
    detail: str


@dataclass
class TrialReport:
    trial: int
    job: str
    violations: list[Violation] = field(default_factory=list)
    excused: list[Violation] = field(default_factory=list)
    faults: Counter[str] = field(default_factory=Counter)
    takeovers_ms: list[float] = field(default_factory=list)
    outcome: str = ""  # the final entry: "SUCCEEDED/clean", "FAILED/dirty", "none"
    status: str = ""  # the driver's: done, timeout
    errors: Counter[str] = field(default_factory=Counter)


def _fence(value: Any) -> int | None:
    try:
        return int(str(value).split(":")[0])
    except (TypeError, ValueError):
        return None


def _retry(call: Any, tries: int = 40) -> Any:
    """Read past a run fault (Redis restarting, failing over): 0.25 s apart, ~10 s at most."""
    for n in range(tries):
        try:
            return call()
        except Exception:  # redis-py's errors and the store's (StoreUnavailableError) alike
            if n == tries - 1:
                raise
            time.sleep(0.25)
    return None


def _earlier_try(holder: dict[str, Any] | None, taker: dict[str, Any] | None) -> bool:
    """Was the holder (its ``task_start`` record) an earlier try of the taker's task instance?"""
    if holder is None or taker is None or None in (holder.get("try_number"), taker.get("try_number")):
        return False
    same = all(holder.get(k) == taker.get(k) for k in ("run_id", "task_id"))
    return same and holder["try_number"] < taker["try_number"]


def check_trial(
    records: Iterable[dict[str, Any]],
    client: redis_lib.Redis,
    namespace: str,
    *,
    lossy_windows: Iterable[tuple[int, int]] = (),
    documents: ResultDocuments | None = None,
) -> TrialReport:
    """Check one trial: its history ``records`` (one job) and what ``client`` holds for it
    (``documents``: the run's ``[jrs] result_documents``, where clean references' full results are)."""
    recs = sorted(records, key=lambda r: r.get("t", 0))
    start = next(r for r in recs if r["event"] == "trial_start")
    trial, job = start["trial"], start["job"]
    report = TrialReport(trial, job)
    end = next((r for r in recs if r["event"] == "trial_end"), recs[-1])
    report.status = end.get("status", "unfinished")
    lossy = any(a <= end["t"] and b >= start["t"] for a, b in lossy_windows)

    def violate(kind: str, detail: str) -> None:
        v = Violation(kind, trial, job, detail)
        (report.excused if lossy and kind in LOSSY else report.violations).append(v)

    store = RedisJobResultStore(client, namespace, result_documents=documents)
    entry: JobResultEntry | None = _retry(lambda: store.get_entry(job))
    history: list[JobResultEntry] = _retry(lambda: store.get_history(job))

    # what was injected
    for r in recs:
        if r["event"] == "fault":
            report.faults[r["kind"]] += 1
        elif r["event"] == "crash":
            report.faults[f"crash_point:{r['step']}"] += 1
        elif r["event"] == "app_failed":
            report.faults["app_failure"] += 1
        elif r["event"] == "error":
            report.errors[r["kind"]] += 1

    # never two applications at once
    for r in recs:
        if r["event"] == "overlap":
            violate("two_applications", f"fence {r.get('fence')} found another application computing (pid {r['pid']})")

    # fast takeover only from a holder that is dead (a process logging afterwards was not), or
    # from an earlier try of the same run: Airflow ended it before it started the retry
    holders = {_fence(r.get("fence")): r.get("try") for r in recs if r["event"] == "lease_acquired"}
    tries = {r.get("try"): r for r in recs if r["event"] == "task_start"}
    for r in recs:
        if r["event"] != "lease_acquired" or r.get("via") != "takeover":
            continue
        old = holders.get(_fence(r.get("from_fence")))  # None: the holder never logged its lease
        if _earlier_try(tries.get(old), tries.get(r.get("try"))):
            continue
        later = [x for x in recs if old is not None and x.get("try") == old and x["t"] > r["t"]]
        if later:
            what = f"fence {r.get('fence')} took the lease over from fence {r.get('from_fence')}"
            violate("took_over_live_holder", f"{what}, whose try logged {later[0]['event']} afterwards")

    # an attempt never waits for itself
    for r in recs:
        if r["event"] == "lease_held" and r.get("nonce") and r.get("holder_nonce") == r["nonce"]:
            violate("waited_for_itself", f"the try's {r.get('via')} was refused: the lease (token "
                                         f"{r.get('holder_fence')}) holds its own nonce {r['nonce']}")  # fmt: skip

    # fences, acknowledged successes, done is done
    acquired = [(r["t"], _fence(r.get("fence"))) for r in recs if r["event"] == "lease_acquired"]
    twins = [(r["t"], _fence(r.get("fence")), r.get("try")) for r in recs if r["event"] == "lease_acquired"]
    # A forget's ack may never be logged (its task SIGKILLed right after): the job's history in the
    # store says what a recompute moved there; the forget's begin bounds when from below.
    recomputed = {
        h.result.fence for h in history if h.moved is not None and h.moved.reason == HistoryReason.RECOMPUTED.value
    }
    begins: dict[Any, dict[str, Any]] = {}  # by writer: (host, pid), as each host numbers its pids
    acked: list[dict[str, Any]] = []
    last_forget_t = -1
    done_at: dict[str, Any] | None = None
    for r in recs:
        event = r["event"]
        if event == "result_write_begin":
            begins[r.get("host"), r["pid"]] = r
        elif event == "forget_begin":
            last_forget_t = r["t"]
            if done_at is not None and _fence(done_at.get("fence")) in recomputed:
                done_at = None
        elif event == "work_start" and done_at is not None:
            violate("done_ran_again", f"fence {r.get('fence')} started an application after fence "
                                      f"{done_at.get('fence')}'s SUCCEEDED was acknowledged")  # fmt: skip
        elif event == "result_written":
            began = begins.get((r.get("host"), r["pid"]), r)
            mine = _fence(r.get("fence"))
            for w in acked:
                theirs = _fence(w.get("fence"))
                if w["t"] < began["t"] and mine is not None and theirs is not None and theirs > mine:
                    violate("lower_fence_after_higher", f"fence {mine} wrote {r['status']} (began after fence "
                                                        f"{theirs}'s {w['status']} was acknowledged)")  # fmt: skip
                    break
            newer = [a for a in acquired if a[0] < began["t"] and mine is not None and a[1] is not None and a[1] > mine]
            if newer:
                violate("write_after_lease_lost", f"fence {mine}'s {r['status']} was accepted although fence "
                                                  f"{newer[0][1]} had taken the lease before it began")  # fmt: skip
            twin = [a for a in twins if a[0] < began["t"] and a[1] == mine and a[2] != r.get("try")
                    and any(b[1] == mine and b[2] == r.get("try") and b[0] < a[0] for b in twins)]  # fmt: skip
            if twin and mine is not None:
                what = f"fence {mine}'s {r['status']} (try {r.get('try')}) was accepted"
                violate("write_by_displaced_holder", f"{what} though try {twin[0][2]} had taken token {mine} after it")
            if r["status"] == JobStatus.SUCCEEDED.value:
                if done_at is not None and began["t"] > done_at["t"]:
                    violate("done_ran_again", f"fence {mine} wrote a second SUCCEEDED after fence "
                                              f"{done_at.get('fence')}'s")  # fmt: skip
                done_at = r
            acked.append(r)
    for w in acked:
        if w["status"] != JobStatus.SUCCEEDED.value:
            continue
        f = _fence(w.get("fence"))
        kept = entry is not None and entry.result.status is JobStatus.SUCCEEDED and entry.result.fence == f
        forgotten = last_forget_t > w["t"] and f in recomputed
        if not kept and not forgotten:
            now = f"{entry.result.status.value} of fence {entry.result.fence}" if entry else "nothing"
            violate("acknowledged_success_lost", f"fence {f}'s acknowledged SUCCEEDED is gone (the store holds {now})")

    # a failure never displaces a success: the entry that replaced a superseded SUCCEEDED one (the
    # next newer in the history, or the current entry) must be a SUCCEEDED one too
    chain = ([entry] if entry is not None else []) + history  # newest first
    for newer, older in pairwise(chain):
        superseded = older.moved is not None and older.moved.reason == HistoryReason.SUPERSEDED.value
        if superseded and older.result.status is JobStatus.SUCCEEDED and newer.result.status is not JobStatus.SUCCEEDED:
            violate("success_displaced_by_failure", f"fence {older.result.fence}'s SUCCEEDED was moved to the "
                                                    f"history for fence {newer.result.fence}'s "
                                                    f"{newer.result.status.value}")  # fmt: skip

    # what is left
    report.outcome = "none" if entry is None else f"{entry.result.status.value}/{entry.state.value}"
    if entry is not None and entry.is_clean and entry.result.status is JobStatus.SUCCEEDED:
        full: JobResultEntry | None = entry
        if entry.summary:  # a clean reference: its outputs are in its result document
            try:
                full = store.full_entry(entry)
            except ResultDocumentError as exc:
                full = None
                violate("clean_document_missing", f"fence {entry.result.fence}'s clean reference: {exc}")
        for problem in check_outputs(full) if full is not None else []:
            violate("clean_output_broken", problem)
        intent = _retry(lambda: RedisIntentStore(client, namespace, spec_root="").get(job))
        if intent is not None:
            violate("intent_left", f"the job is clean, the intent of fence {intent.fence} is still there")
        beat = _retry(lambda: RedisHeartbeats(client, namespace).get(job))
        if beat is not None and beat.ttl_ms < 0:
            violate("heartbeat_left", f"the heartbeat of fence {beat.fence} never expires")
    if entry is None or entry.result.status is not JobStatus.SUCCEEDED:
        said = [r for r in recs if r["event"] == "error"]
        if said and not said[-1].get("message", "").strip():
            violate("stuck_without_message", f"the last failed try ({said[-1]['kind']}) said nothing")

    # takeover: from a fault on a holder to the next lease holder with a newer fence
    for r in recs:
        kind = r["event"] if r["event"] == "crash" else r.get("kind") if r["event"] == "fault" else None
        if kind not in HOLDER_FAULTS or (kind == "crash" and str(r.get("step", "")).startswith("cleanup")):
            continue
        before = [f for t, f in acquired if t <= r["t"] and f is not None]
        if not before:
            continue
        after = [t for t, f in acquired if t > r["t"] and f is not None and f > max(before)]
        if after:
            report.takeovers_ms.append((after[0] - r["t"]) / 1e6)
    return report


def read_trial(path: str) -> list[dict[str, Any]]:
    return list(read_history(path))
