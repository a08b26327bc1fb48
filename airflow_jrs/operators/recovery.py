"""Finding a predecessor's Spark application in local and client deploy modes.

A task process killed with SIGKILL leaves its spark-submit child running (orphaned). Every
submission carries ``--conf spark.jrs.namespace=<ns>`` and ``--conf spark.jrs.job_id=<id>``,
so a later attempt finds it by command line: deterministic tagging instead of pid files,
which survive neither reboots nor pid reuse. Cluster deploy modes carry the same tags as
``spark.yarn.tags`` and Kubernetes driver labels.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import psutil


def find_spark_submit_processes(namespace: str, job_id: str) -> list[psutil.Process]:
    """Live local processes submitted for this job (any fence)."""
    want_job = f"spark.jrs.job_id={job_id}"
    want_ns = f"spark.jrs.namespace={namespace}"
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if want_job in cmdline and want_ns in cmdline:
            found.append(proc)
    return found


def wait_for_processes(
    procs: list[psutil.Process],
    check: Callable[[], object],
    poll: float = 1.0,
    kill_after: float | None = None,
) -> None:
    """Wait until ``procs`` exit, calling ``check`` (the lease check) between polls."""
    started = time.monotonic()
    alive = list(procs)
    while alive:
        check()
        _gone, alive = psutil.wait_procs(alive, timeout=poll)
        if kill_after is not None and alive and time.monotonic() - started > kill_after:
            for proc in alive:
                proc.kill()
