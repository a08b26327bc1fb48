"""Trial "hosts": processes with their own hostname and their own view of the process table.

Why: the product finds its own spark-submit by scanning processes and records which host an
attempt ran on. On one machine every attempt shares a hostname and sees every process, so a
retry "on another worker" would see (and could kill) its predecessor's application, which a real
second worker cannot. A :class:`HostLauncher` gives each trial host a UTS namespace (its own
``socket.gethostname()``) and a PID namespace with its own ``/proc`` (``unshare --uts --pid
--fork --mount-proc``; we run as root): a process scan on host A cannot see host B.

Each host is one long-lived namespace whose PID 1 is a tiny init (it sets the hostname and
reaps orphans). :meth:`HostLauncher.popen` starts a command *inside* it and returns an ordinary
:class:`subprocess.Popen` whose ``pid`` is the command itself (not a wrapper): the calling
thread enters the host's PID namespace for its children only (``setns``; per thread), forks,
and ``nsenter --uts --mount`` (no fork) joins the hostname and ``/proc`` before the command runs.
So ``popen.kill()`` is the SIGKILL of that one process (a task killed while its spark-submit
lives on, reparented to the host's init), ``os.killpg(popen.pid, ...)`` reaches what it started
(``start_new_session`` is on), and :meth:`HostLauncher.crash` is the loss of the whole machine:
the kernel SIGKILLs every process of a PID namespace whose init dies. A runner that forks its
attempts instead of exec-ing them uses :meth:`HostLauncher.fork` (the child lands on the host).

Where namespaces are not permitted, :attr:`HostLauncher.isolated` is False and ``popen`` runs
the command plainly (same hostname, one process table); ``JRS_TRIAL_HOST`` names the host in
both cases. Pauses (SIGSTOP past a lease TTL) are :func:`pause`, :func:`resume`, :func:`paused`.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import psutil

CLONE_NEWPID = 0x20000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWNS = 0x00020000
ENV_HOST = "JRS_TRIAL_HOST"

#: PID 1 of a host: names the host, says so, then reaps whatever is orphaned to it until killed.
_INIT = """
import os, socket, sys, time
socket.sethostname(sys.argv[1])
print("ready", flush=True)
while True:
    try:
        os.waitpid(-1, 0)
    except ChildProcessError:
        time.sleep(0.1)
"""

_libc = ctypes.CDLL(None, use_errno=True)
_spawn_lock = threading.Lock()  # one thread at a time switches its pid namespace for children


def _setns(fd: int, nstype: int) -> None:
    if _libc.setns(fd, nstype) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns failed: {os.strerror(err)}")


class HostLauncher:
    """One trial host. ``start()`` (or the context manager) creates its namespaces."""

    def __init__(self, name: str, *, isolate: bool = True) -> None:
        if not name or len(name) > 64 or not all(c.isalnum() or c in "-." for c in name):
            raise ValueError(f"host name {name!r}: use 1-64 letters, digits, '-' or '.' (a valid hostname)")
        self.name = name
        self._want = isolate
        self.isolated = False
        self.why_not_isolated: str | None = None
        self._unshare: subprocess.Popen[bytes] | None = None
        self.init_pid: int | None = None  # the host's PID 1, as this (outer) namespace numbers it
        self._started: list[subprocess.Popen[Any]] = []  # reaped by crash(): see there

    def start(self) -> HostLauncher:
        if self.init_pid is not None or not self._want:
            if not self._want:
                self.why_not_isolated = "isolation not asked for (isolate=False)"
            return self
        unshare, nsenter = shutil.which("unshare"), shutil.which("nsenter")
        if not (unshare and nsenter):
            self.why_not_isolated = "unshare/nsenter not found (util-linux): hosts share this machine's view"
            return self
        argv = [unshare, "--uts", "--pid", "--fork", "--mount-proc", "--kill-child", "--"]
        argv += [sys.executable, "-I", "-S", "-c", _INIT, self.name]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != b"ready":
            _, err = proc.communicate(timeout=10)
            self.why_not_isolated = f"unshare refused ({err.decode(errors='replace').strip()}): not root?"
            return self
        children = psutil.Process(proc.pid).children()
        if len(children) != 1:
            proc.kill()
            proc.wait()
            raise RuntimeError(f"host {self.name}: unshare has {len(children)} children, expected its init")
        self._unshare, self.init_pid, self.isolated = proc, children[0].pid, True
        return self

    def env(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """``env`` (default: this process's) plus ``JRS_TRIAL_HOST``."""
        return {**(os.environ if env is None else env), ENV_HOST: self.name}

    def popen(self, argv: Sequence[str], env: Mapping[str, str] | None = None, **kwargs: Any) -> subprocess.Popen[Any]:
        """Start ``argv`` on this host; ``kwargs`` go to :class:`subprocess.Popen` (``start_new_session``
        defaults to True so that ``os.killpg(p.pid, ...)`` reaches what the command starts)."""
        kwargs.setdefault("start_new_session", True)
        if not self.isolated:
            return subprocess.Popen(list(argv), env=self.env(env), **kwargs)
        if self.init_pid is None or not psutil.pid_exists(self.init_pid):
            raise RuntimeError(f"host {self.name} is down (crashed or not started): start a new HostLauncher")
        cwd = os.fspath(kwargs.pop("cwd", None) or os.getcwd())
        wrapped = ["nsenter", f"--target={self.init_pid}", "--uts", "--mount", f"--wd={cwd}", "--", *argv]
        with _spawn_lock:
            own = os.open("/proc/thread-self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
            theirs = os.open(f"/proc/{self.init_pid}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
            try:
                _setns(theirs, CLONE_NEWPID)  # this thread's children are born on the host
                try:
                    proc = subprocess.Popen(wrapped, env=self.env(env), **kwargs)
                    self._started = [p for p in self._started if p.returncode is None] + [proc]
                    return proc
                finally:
                    _setns(own, CLONE_NEWPID)
            finally:
                os.close(own)
                os.close(theirs)

    def fork(self) -> int:
        """``os.fork()`` onto this host, for runners that run an attempt in a forked child.

        Returns 0 in the child, which is then fully on the host (its hostname, its ``/proc``, a
        PID of the host's namespace, ``JRS_TRIAL_HOST`` set, the same working directory), and
        the child's pid (as this namespace numbers it) in the parent, which reaps it as usual.
        Call it from a thread that may switch namespaces briefly (any thread: the switch is
        per thread and undone before this returns in the parent).
        """
        if not self.isolated:
            pid = os.fork()
            if pid == 0:
                os.environ[ENV_HOST] = self.name
            return pid
        if self.init_pid is None or not psutil.pid_exists(self.init_pid):
            raise RuntimeError(f"host {self.name} is down (crashed or not started): start a new HostLauncher")
        cwd = os.getcwd()
        names = ("pid", "uts", "mnt")
        with _spawn_lock:
            own = os.open("/proc/thread-self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
            fds = {n: os.open(f"/proc/{self.init_pid}/ns/{n}", os.O_RDONLY | os.O_CLOEXEC) for n in names}
            try:
                _setns(fds["pid"], CLONE_NEWPID)
                pid = os.fork()
                if pid == 0:
                    try:  # single-threaded now: a mount namespace can be entered
                        _setns(fds["uts"], CLONE_NEWUTS)
                        _setns(fds["mnt"], CLONE_NEWNS)
                        os.chdir(cwd)
                        os.environ[ENV_HOST] = self.name
                    except BaseException:
                        traceback.print_exc()
                        os._exit(125)
                else:
                    _setns(own, CLONE_NEWPID)
            finally:
                for fd in (own, *fds.values()):
                    os.close(fd)
        return pid

    def pids(self) -> list[int]:
        """Every live process of the host (outer pids), its init included."""
        if not self.isolated or self.init_pid is None:
            return []
        try:
            mine = os.readlink(f"/proc/{self.init_pid}/ns/pid")
        except OSError:
            return []
        found = []
        for proc in psutil.process_iter():
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{proc.pid}/ns/pid") == mine:
                    found.append(proc.pid)
        return found

    def crash(self, *, wait: bool = True, timeout: float = 30.0) -> None:
        """Lose the machine: SIGKILL the host's init, and with it every process on the host.

        The dying init waits until every process of its namespace is reaped, and the processes
        :meth:`popen` and :meth:`fork` started are *this* process's children. With ``wait``, the
        ``popen`` ones are reaped here (``poll``; their ``returncode`` becomes -9) until the host
        is gone; a runner that reaps its forked children itself passes ``wait=False`` (the kernel
        still kills everything at once; only the namespace's end is not awaited).
        """
        if self.init_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.init_pid, signal.SIGKILL)
        if not wait:
            self.init_pid = None  # no further popen/fork onto a lost host
            return
        if self._unshare is not None:
            deadline = time.monotonic() + timeout
            while self._unshare.poll() is None:
                for proc in self._started:
                    proc.poll()
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"host {self.name} did not end {timeout}s after its init's SIGKILL: a process of it "
                        f"started elsewhere than popen() is not reaped by its parent (pids {self.pids()})"
                    )
                time.sleep(0.01)
            for stream in (self._unshare.stdout, self._unshare.stderr):
                if stream is not None:
                    stream.close()
        for proc in self._started:
            proc.poll()
        self.init_pid, self._unshare, self._started = None, None, []

    def __enter__(self) -> HostLauncher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.crash()


def _pid(target: int | subprocess.Popen[Any] | psutil.Process) -> int:
    return target if isinstance(target, int) else int(target.pid)


def _signal(pid: int, signum: int, group: bool) -> None:
    if group:
        os.killpg(pid, signum)  # the target leads its group (HostLauncher.popen's start_new_session)
    else:
        os.kill(pid, signum)


def pause(target: int | subprocess.Popen[Any] | psutil.Process, *, group: bool = False) -> None:
    """SIGSTOP ``target`` (with ``group``, the process group it leads): a GC pause or a frozen VM
    that outlives its lease. Raises ProcessLookupError when it already ended."""
    _signal(_pid(target), signal.SIGSTOP, group)


def resume(target: int | subprocess.Popen[Any] | psutil.Process, *, group: bool = False) -> None:
    """SIGCONT what :func:`pause` stopped; a target that ended meanwhile is no error."""
    with contextlib.suppress(ProcessLookupError):
        _signal(_pid(target), signal.SIGCONT, group)


@contextlib.contextmanager
def paused(target: int | subprocess.Popen[Any] | psutil.Process, *, group: bool = False) -> Iterator[None]:
    """Stopped for the ``with`` block (the caller decides how long: e.g. until its lease is gone)."""
    pause(target, group=group)
    try:
        yield
    finally:
        resume(target, group=group)


# -- this runner worker's hosts -------------------------------------------------------------
#: prctl option: orphaned descendants are re-parented to this process (and reaped by it).
PR_SET_CHILD_SUBREAPER = 36
#: This worker's trial hosts (:func:`start_hosts`): one UTS/PID namespace each.
HOST_LAUNCHERS: dict[str, HostLauncher] = {}


def start_hosts(names: Sequence[str]) -> str | None:
    """Start this worker's hosts; returns why they are not isolated, if they are not."""
    for name in names:
        HOST_LAUNCHERS[name] = HostLauncher(name).start()
    why = {h.why_not_isolated for h in HOST_LAUNCHERS.values() if not h.isolated}
    return "; ".join(sorted(w for w in why if w)) or None


def stop_hosts() -> None:
    for host in HOST_LAUNCHERS.values():
        with contextlib.suppress(Exception):
            host.crash(wait=False)
    HOST_LAUNCHERS.clear()


def become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def fork_on(target: Callable[[dict[str, Any]], int], spec: dict[str, Any], stderr: str,
          host: HostLauncher | None = None) -> int:  # fmt: skip
    """``target(spec)`` in a forked child, on ``host`` (its hostname, PID namespace and ``/proc``)."""
    pid = host.fork() if host is not None else os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 4
        try:
            null = os.open(os.devnull, os.O_RDWR)
            err = os.open(stderr, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.dup2(null, 0)
            os.dup2(null, 1)
            os.dup2(err, 2)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            code = target(spec)
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    return pid
