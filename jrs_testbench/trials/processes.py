"""Finding a job's stand-ins the way the operator finds spark-submit: by command line."""

from __future__ import annotations

import psutil


def find_standins(namespace: str, job_id: str, pid: int | None = None) -> list[psutil.Process]:
    """Live stand-ins of the job, any fence: by command line (as the operator finds spark-submit),
    plus the pid a predecessor amended into its intent when its command line says it is ours."""
    want = (f"spark.jrs.job_id={job_id}", f"spark.jrs.namespace={namespace}")
    found: dict[int, psutil.Process] = {}
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if all(w in cmdline for w in want):
            found[proc.pid] = proc
    if pid is not None and pid not in found:
        try:
            proc = psutil.Process(pid)
            if all(w in proc.cmdline() for w in want):
                found[pid] = proc
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return [p for p in found.values() if alive(p)]


def alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
