"""The cleanup task of a fault trial: the product's :func:`airflow_jrs.protocol.cleanup.commit_job`.

    python -m jrs_testbench.trials.cleanup '<json spec>'

(the runner forks and calls :func:`run_cleanup`). It removes what the job left behind (losers'
staging folders, specs) and marks the result clean, through the job's host's Redis URL. It can
be SIGKILLed at its crash points (``cleanup_after_read``, ``cleanup_before_clean``), or stall
after its first read (``stall_s``) while a recompute run goes on; the runner runs it again until
it commits, as Airflow retries the cleanup task. Logs ``cleanup_start``,
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
from jrs_testbench.trials.history import HistoryLog
from jrs_testbench.trials.task import apply_revert, jobs_for

#: Exit codes: committed; failed (the runner runs it again); nothing to commit.
COMMITTED, FAILED, NOTHING = 0, 1, 2
#: Short backoff: a trial's Redis outage lasts a second or two.
TRIAL_RETRY = RetryPolicy(attempts=4, initial_delay=0.1, max_delay=1.0)


def run_cleanup(spec: dict[str, Any]) -> int:
    apply_revert()
    log = HistoryLog(spec["history"], trial=spec["trial"], job=spec["job_id"])
    crash_at = spec.get("crash_at")
    log.log("cleanup_start", crash_at=crash_at, host=spec.get("host"))

    def observer(step: str) -> None:
        log.log("step", step=step)
        if step == "cleanup_after_read" and spec.get("stall_s"):
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
