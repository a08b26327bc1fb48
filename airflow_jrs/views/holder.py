"""What the attempt that holds a job's lease is doing now: running, or gone with its Spark running.

After a ``kill -9`` of a task, its lease lives on until its TTL runs out and its supervisor goes
on running spark-submit. Airflow shows the try "Up For Retry", while every view of the job said
"running: its attempt holds the lease". The retry's own log line knew better (the task process
is gone, its supervisor still runs, the lease expires in N s); :func:`holder_state` tells the
same from what the store keeps, so the job page, its task tab, ``show`` and ``intents`` say it
in one set of words:

* the task process is **gone** when this host can see it is (same host and pid space: the rule
  :func:`airflow_jrs.protocol.takeover.holder_gone_here` shares with the takeover), or **silent**
  when it has not renewed the lease for half its TTL (a live holder renews every third of it):
  seen from any host, on the Redis server's clock (:attr:`~airflow_jrs.store.leases.lease.LeaseHolder.silent_ms`);
* its supervisor still runs spark-submit when its heartbeat for the lease's fence runs;
* what happens next: the task's retry takes the lease over at once (Airflow started it after
  this try ended) and waits for that Spark application, any other attempt after the TTL.

A silent holder may only be cut off from Redis (a partition, a long pause): the words say what
was seen ("has not renewed the lease for 34 s"), never more. Nothing decides from this: the
protocol judges a holder itself, under the lease.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from airflow_jrs.protocol.takeover import holder_gone_here
from airflow_jrs.store.heartbeats import Heartbeat
from airflow_jrs.store.leases.lease import LeaseHolder

#: The holder's task process renews its lease and runs (or prepares) Spark.
RUNNING = "running"
#: The holder's task process is gone (or silent), and its supervisor still runs spark-submit.
TASK_GONE = "task_gone"
#: The holder's task process is gone (or silent), and no supervisor of it runs.
GONE = "gone"

#: A holder silent for this share of its lease's TTL missed a renewal (it renews every third).
SILENT_SHARE = 0.5


@dataclass(frozen=True)
class HolderState:
    """The lease holder now, in words: ``state`` (:data:`RUNNING`, :data:`TASK_GONE`, :data:`GONE`),
    ``text`` (what is seen) and ``next`` (what happens to the job from here)."""

    state: str
    text: str
    next: str
    #: who holds the lease, as the on-call engineer searches for it ("try 1 of dag.task (run r)")
    holder: str
    host: str | None
    task_pid: int | None
    #: the task process is gone as this host sees it (not only silent)
    seen_gone: bool
    #: seconds since the holder last renewed the lease (``None``: a lease that does not say its TTL)
    silent_s: float | None
    expires_in_s: float
    supervisor_pid: int | None = None
    supervisor_host: str | None = None
    submit_pid: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _who(owner: dict[str, Any], token: int) -> str:
    task = ".".join(str(owner[k]) for k in ("dag_id", "task_id") if owner.get(k))
    if task and owner.get("try_number"):
        mapped = f", map index {owner['map_index']}" if isinstance(owner.get("map_index"), int) and owner[
            "map_index"] >= 0 else ""  # fmt: skip
        return f"try {owner['try_number']} of {task} (run {owner.get('run_id')}{mapped})"
    return f"the attempt with fence {token}"


def holder_state(holder: LeaseHolder | None, beat: Heartbeat | None) -> HolderState | None:
    """What ``holder`` (the job's lease) is doing now, with the heartbeat of what it started;
    ``None`` when nobody holds the lease."""
    if holder is None:
        return None
    owner = holder.owner
    who, host = _who(owner, holder.token), owner.get("host")
    pid = owner.get("pid") if isinstance(owner.get("pid"), int) else None
    expires = round(holder.ttl_ms / 1000, 1)
    silent = None if holder.silent_ms is None else round(holder.silent_ms / 1000, 1)
    full = None if holder.lease_ttl_ms is None else holder.lease_ttl_ms / 1000
    seen_gone = holder_gone_here(owner) is True
    silent_long = silent is not None and full is not None and silent >= SILENT_SHARE * full
    process = f"its task process (pid {pid} on host {host})" if pid else f"its task process (on host {host})"
    spark = beat if beat is not None and beat.running and int(beat.fence) == holder.token else None
    running = ""
    if spark is not None:
        running = f"; its supervisor (pid {spark.pid} on host {spark.host}) runs spark-submit (pid {spark.child})"
    if not seen_gone and not silent_long:
        renewed = f", renewed {silent:g} s ago" if silent is not None else ""
        text = f"{who[:1].upper()}{who[1:]} holds the lease: {process} runs{renewed}{running}."
        return HolderState(
            RUNNING, text, f"The lease expires in {expires:g} s unless renewed.", who, host, pid, False, silent,
            expires, *_supervisor(spark),
        )  # fmt: skip
    if seen_gone or silent is None or full is None:
        gone = f"{process} is gone"
    else:
        gone = (
            f"{process} has not renewed the lease for {silent:g} s (a live task renews it every {full / 3:g} s): it "
            "is gone, or cut off from Redis"
        )
    after = (
        f"The lease expires in {expires:g} s. The task's retry takes it over at once (Airflow starts a retry only "
        "after this try ended)"
    )
    if spark is not None:
        text = (
            f"{who[:1].upper()}{who[1:]} holds the lease, but {gone}; its supervisor (pid {spark.pid} on host "
            f"{spark.host}) still runs spark-submit (pid {spark.child})."
        )
        follow = (
            f"{after}, waits for this Spark application to end and adopts its output if it finished "
            '(predecessor="stop": stops it and submits again); any other attempt waits until the lease expires. '
            "Without a retry left, clear the task once the application ended: its next try adopts the output."
        )
        return HolderState(TASK_GONE, text, follow, who, host, pid, seen_gone, silent, expires, *_supervisor(spark))
    text = f"{who[:1].upper()}{who[1:]} holds the lease, but {gone}, and no supervisor of it runs Spark."
    follow = (
        f"{after} and recovers from what it left (adopts a finished output, else submits again); any other attempt "
        "waits until the lease expires."
    )
    return HolderState(GONE, text, follow, who, host, pid, seen_gone, silent, expires)


def _supervisor(beat: Heartbeat | None) -> tuple[int | None, str | None, int | None]:
    return (None, None, None) if beat is None else (beat.pid, beat.host, beat.child or None)
