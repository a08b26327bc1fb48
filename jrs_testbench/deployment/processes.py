"""The local deployment's processes: who holds a port, whether a component runs, signalling a group.

Kept apart from :mod:`.local` (the deployment itself) and shared with :mod:`.celery`.
"""

from __future__ import annotations

import os
from typing import Any


def port_holder(port: int) -> str | None:
    """``None`` if ``port`` can be bound on every interface now, else who holds it: ``pid N
    (command)`` when this user may see the process, else a plain ``another process``."""
    import socket

    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind: TIME_WAIT is no holder
        try:
            s.bind(("0.0.0.0", port))
            return None
        except OSError:
            pass
    try:
        import psutil

        for conn in psutil.net_connections(kind="tcp"):
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
                try:
                    command = " ".join(" ".join(psutil.Process(conn.pid).cmdline()).split())[:160]
                except psutil.Error:
                    command = "?"
                return f"pid {conn.pid} ({command})"
    except Exception:  # psutil may not see other users' sockets: say what we know
        pass
    return "another process (not visible to this user: try `ss -ltnp`)"


def running(proc: Any) -> bool:
    try:
        return bool(proc.is_running())
    except Exception:
        return False


def signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
