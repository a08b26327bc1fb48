"""A job's applications among this host's processes, found by their command line.

Every launch carries the job's ``spark.jrs.*`` marks on its command line
(:func:`airflow_jrs.spark.conf.command_line_marks`), whatever launches it: spark-submit in any
deploy mode, or a stand-in. A successor on the same host finds a predecessor's survivor by
them, and the takeover (:mod:`.takeover`) refuses to call a holder dead while one runs.
"""

from __future__ import annotations

import psutil

from airflow_jrs.spark.conf import command_line_marks


def find_job_processes(namespace: str, job_id: str) -> list[psutil.Process]:
    """Live local processes launched for this job (any fence), by their command line."""
    want_job, want_ns = command_line_marks(job_id=job_id, namespace=namespace)
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if want_job in cmdline and want_ns in cmdline:
            found.append(proc)
    return found


def process_alive(proc: psutil.Process) -> bool:
    """Still running (a zombie has ended: only its exit status waits to be read)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
