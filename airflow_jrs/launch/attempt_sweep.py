"""What a spark-pipelines attempt leaves running once its supervisor ended, killed and waited for.

The CLI's Python is the spark-pipelines JVM's child, and a JVM that ended on a signal leaves it
to init; the Connect server JVM that Python starts exits on its own only once it reads the end
of its stdin, which a JVM still starting up does late (the gate saw one outlive its killed
task). Each is found by the attempt's folder on its command line (``--spec <folder>/project/...``)
or in its environment (:data:`ATTEMPT_ENV`, inherited from the supervisor). A ``SIGKILL`` is not
an exit (a JVM with many threads takes a while under load): :func:`sweep_attempt` waits up to
:data:`SWEEP_WAIT` seconds for them to end, so the task ends with none of them running, and names
any that outlived it.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import psutil

#: Set to the attempt's folder in the supervisor's environment, and so in everything it starts.
ATTEMPT_ENV = "JRS_PIPELINE_ATTEMPT"
#: Seconds :func:`sweep_attempt` waits for the processes it killed to end.
SWEEP_WAIT = 30.0


def sweep_attempt(folder: str, log: Any) -> None:
    """SIGKILL every process of the attempt in ``folder`` and wait for them to end; ``log`` hears
    of any that outlived :data:`SWEEP_WAIT`. Never raises."""
    killed = []
    for proc in psutil.process_iter(["cmdline", "environ"]):
        with contextlib.suppress(psutil.Error):
            cmdline = proc.info.get("cmdline") or []
            environ = proc.info.get("environ") or {}
            if environ.get(ATTEMPT_ENV) == folder or any(folder in part for part in cmdline):
                proc.kill()
                killed.append(proc)
    survivors = _until_ended(killed, SWEEP_WAIT)
    if survivors:
        log.warning(
            "spark-pipelines attempt %s: %d process(es) outlived SIGKILL for %.0f s: pids %s",
            folder, len(survivors), SWEEP_WAIT, [proc.pid for proc in survivors],
        )  # fmt: skip


def _until_ended(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Those of ``procs`` still running after up to ``timeout`` seconds. A zombie has ended (its
    parent reaps it); nothing is reaped here: the supervisor is the task's child, and its
    ``Popen`` must read its own exit code."""
    deadline = time.monotonic() + timeout
    while True:
        running = []
        for proc in procs:
            with contextlib.suppress(psutil.Error):  # gone: ended
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    running.append(proc)
        if not running or time.monotonic() >= deadline:
            return running
        procs = running
        time.sleep(0.05)
