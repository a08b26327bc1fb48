"""How the supervisor ends spark-submit on a stop or cancel request, and the clock it keeps time on.

The supervisor (:mod:`airflow_jrs.launch.supervisor`) reads the request for its fence with each
beat; :class:`Relay` decides what that request means for the process it runs: a stream's stop
goes to the driver's control file (a batch boundary), a batch job's stop or any cancel ends
spark-submit (SIGTERM, then SIGKILL). Kept apart from the supervisor's heartbeat loop because
it is the one place a stop's grace periods and its upgrade to a cancel are decided.

Like the supervisor, it imports no Airflow: it runs in ``python -m airflow_jrs.launch.supervisor``.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from typing import TYPE_CHECKING

from airflow_jrs.spark.control import CANCEL
from airflow_jrs.store.stop_requests import StopRequest, StopRequests

if TYPE_CHECKING:
    from airflow_jrs.store.namespace import JobNamespace

#: Seconds between SIGTERM and SIGKILL when spark-submit is asked to stop.
STOP_GRACE = 10.0
#: Seconds between SIGTERM and SIGKILL on a cancel.
CANCEL_GRACE = 2.0


def say(message: str) -> None:
    with contextlib.suppress(OSError):  # the task process that read us may be gone
        print(f"[jrs-supervisor] {message}", file=sys.stderr, flush=True)


def clock() -> float:
    """Seconds on a clock that never steps and keeps counting through a suspend of the host
    (``CLOCK_BOOTTIME``; ``time.monotonic()`` stops while the machine sleeps, so a supervisor
    woken after a suspend longer than the TTL would think its heartbeat still lives)."""
    if _BOOTTIME is not None:
        return time.clock_gettime(_BOOTTIME)
    return time.monotonic()


_BOOTTIME: int | None = getattr(time, "CLOCK_BOOTTIME", None)


def stop_child(child: subprocess.Popen[bytes], why: str, *, grace: float = STOP_GRACE) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds (at once when ``grace`` is 0)."""
    say(f"stopping spark-submit (pid {child.pid}): {why}")
    if grace > 0:
        with contextlib.suppress(ProcessLookupError):
            child.terminate()
        try:
            child.wait(grace)
            return
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):
        child.kill()


class Relay:
    """Acts on the stop or cancel request for this fence (:mod:`airflow_jrs.store.stop_requests`).

    A stream (``control_dir`` set): a stop is forwarded to the driver's control file, so the query
    stops at a batch boundary, and spark-submit is only killed when it has not ended within
    ``stop_timeout`` (the request's, else the supervisor's; none: the stop waits for the
    boundary); a cancel is forwarded too, then spark-submit is killed. A batch job: a stop
    terminates spark-submit with ``grace`` (SIGTERM, then SIGKILL), a cancel with
    :data:`CANCEL_GRACE`. A cancel after a stop upgrades it."""

    def __init__(
        self,
        requests: StopRequests,
        job_id: str,
        fence: int,
        control_dir: str | None,
        stop_timeout: float | None,
        grace: float,
    ) -> None:
        self.requests = requests
        self.job_id = job_id
        self.fence = fence
        self.control_dir = control_dir
        self.stop_timeout = stop_timeout
        self.grace = grace
        self.request: StopRequest | None = None
        self.stop_deadline: float | None = None

    def _details(self, kind: str) -> StopRequest:
        try:
            found = self.requests.get(self.job_id, self.fence)
        except Exception:
            found = None
        if found is None or found.kind != kind:  # unreadable, or changed since the beat read it
            return StopRequest(self.job_id, self.fence, kind, by="a successor", at=time.time())
        return found

    def _forward(self, request: StopRequest) -> None:
        from airflow_jrs.spark.control import write_request

        if self.control_dir is None:
            return
        try:
            write_request(self.control_dir, request.kind, self.fence, by=request.by)
        except Exception as exc:  # a cancel still kills; a stop is then killed at stop_timeout
            say(f"could not forward the {request.kind} request to {self.control_dir}: {exc}")

    def act(self, kind: str | None, child: subprocess.Popen[bytes], budget: float) -> bool:
        """Act on the request in force; True when spark-submit was stopped. ``budget``: the most
        seconds a SIGTERM may wait before the self-fence deadline."""
        now = clock()
        if kind is not None and (self.request is None or (kind == CANCEL and not self.request.cancel)):
            request = self.request = self._details(kind)
            say(f"job {self.job_id}, fence {self.fence}: {request.describe()}")
            if self.control_dir is not None:
                self._forward(request)
            if request.cancel:
                stop_child(child, request.describe(), grace=min(CANCEL_GRACE, budget))
                return True
            if self.control_dir is None:
                stop_child(child, request.describe(), grace=min(self.grace, budget))
                return True
            limit = request.stop_timeout if request.stop_timeout is not None else self.stop_timeout
            if limit is None:
                say("asked the driver to stop at its next batch boundary (a cancel kills it)")
            else:
                self.stop_deadline, self.stop_timeout = now + limit, limit
                say(f"asked the driver to stop at a batch boundary; killing it if it runs in {limit:g}s")
        if self.stop_deadline is not None and now >= self.stop_deadline:
            stop_child(child, f"the stop did not finish within {self.stop_timeout}s", grace=min(self.grace, budget))
            return True
        return False


def control_dir_of(jobs: JobNamespace, job_id: str, fence: int) -> str | None:
    """A stream's control folder, from the intent of this fence (its staging is the stream's
    output folder); ``None`` for a batch job, or when the intent cannot be read."""
    from airflow_jrs.domain.paths import control_path_of_output

    try:
        intent = jobs.intents.get(job_id)
    except Exception as exc:
        say(f"could not read the intent of job {job_id} ({exc}); a stop terminates spark-submit")
        return None
    return control_path_of_output(intent.staging) if intent is not None and intent.fence == fence else None
