"""The cleanup task of a fault trial: the product's :func:`airflow_jrs.protocol.cleanup.commit_job`.

    python -m jrs_testbench.trials.cleanup '<json spec>'

(the runner forks and calls :func:`run_cleanup`). It removes what the job left behind (losers'
staging folders, specs) and marks the result clean, through the job's host's Redis URL. It can
be SIGKILLed at its crash points (``cleanup_after_read``, ``cleanup_before_clean``), or stall
after its first read (``stall_s``, or until another try's result is acknowledged:
``stall_until_result``) while a recompute run goes on, or run on a host where the shared
result documents folder is not mounted (``documents_unmounted``: its mount point is covered by
an empty tmpfs in this process alone, so ``[jrs] result_documents`` names a folder that is not
there); the runner runs it again until it commits, as Airflow retries the cleanup task. Logs ``cleanup_start``,
``cleanup_committed`` (status, outputs) or ``cleanup_error`` (its message).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from typing import Any

from airflow_jrs.exceptions import NoSuchJobResultError
from airflow_jrs.protocol.cleanup import RetryPolicy, commit_job
from airflow_jrs.protocol.steps import observe_steps
from jrs_testbench.trials.history import HistoryLog, read_history
from jrs_testbench.trials.task import apply_revert, cover_with_tmpfs, jobs_for

#: Exit codes: committed; failed (the runner runs it again); nothing to commit.
COMMITTED, FAILED, NOTHING = 0, 1, 2
#: Short backoff: a trial's Redis outage lasts a second or two.
TRIAL_RETRY = RetryPolicy(attempts=4, initial_delay=0.1, max_delay=1.0)
#: The longest a ``stall_until_result`` cleanup waits for another try's acknowledged result.
STALL_LIMIT = 90.0


def _stall_until_result(log: HistoryLog, history: str) -> None:
    """Stall until a SUCCEEDED result is acknowledged after this point (the recompute run's, which
    goes on meanwhile): a stall measured in events, not seconds, so a loaded machine cannot end it early."""
    began = log.log("fault", kind="slow_cleanup", until="result_written")
    deadline = time.monotonic() + STALL_LIMIT
    while time.monotonic() < deadline:
        if any(r.get("event") == "result_written" and r.get("status") == "SUCCEEDED" and r.get("t", 0) > began
               for r in read_history(history)):  # fmt: skip
            break
        time.sleep(0.05)
    log.log("fault_end", kind="slow_cleanup")


def run_cleanup(spec: dict[str, Any]) -> int:
    apply_revert()
    log = HistoryLog(spec["history"], trial=spec["trial"], job=spec["job_id"])
    crash_at = spec.get("crash_at")
    log.log("cleanup_start", crash_at=crash_at, host=spec.get("host"))
    if spec.get("documents_unmounted"):
        mount_point = os.path.dirname(spec["result_documents"])
        log.log("fault", kind="documents_unmounted", mount_point=mount_point)
        cover_with_tmpfs(mount_point, "documents_unmounted")

    def observer(step: str) -> None:
        log.log("step", step=step)
        if step == "cleanup_after_read" and spec.get("stall_until_result"):
            spec["stall_until_result"] = False  # after the first read only: the re-read goes on
            _stall_until_result(log, spec["history"])
        elif step == "cleanup_after_read" and spec.get("stall_s"):
            log.log("fault", kind="slow_cleanup", seconds=spec["stall_s"])
            time.sleep(spec["stall_s"])  # a cleanup retrying with backoff while attempts go on
        if step == crash_at:
            log.log("crash", step=step)
            os.kill(os.getpid(), signal.SIGKILL)

    observe_steps(observer)
    jobs = jobs_for(spec)
    try:
        payload = commit_job(jobs, spec["job_id"], retry=TRIAL_RETRY, log=logging.getLogger("jrs_testbench.trials"))
    except NoSuchJobResultError as exc:
        log.log("cleanup_error", kind=type(exc).__name__, message=str(exc))
        return NOTHING
    except Exception as exc:
        log.log("cleanup_error", kind=type(exc).__name__, message=str(exc))
        return FAILED
    log.log("cleanup_committed", status=payload.get("status"), outputs=payload.get("outputs"))
    return COMMITTED


if __name__ == "__main__":
    import json

    sys.exit(run_cleanup(json.loads(sys.argv[1])))
