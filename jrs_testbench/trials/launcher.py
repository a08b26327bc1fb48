"""The stand-in launcher: the protocol's :class:`~airflow_jrs.protocol.launcher.Launcher` for the
fault trials, running the stand-in application (:mod:`.app`) under the REAL supervisor.

It does for the stand-in what the operator's ``Supervision`` does for spark-submit: the command
is ``python -m airflow_jrs.launch.supervisor --namespace .. --job-id .. --fence .. --ttl .. -- <app>``
(:func:`airflow_jrs.launch.supervisor.supervised_command`) with the Redis connection in
``JRS_SUPERVISOR_REDIS`` (``json`` of :attr:`JobNamespace.connection`, the host's proxied URL),
so the heartbeat, the self-fencing, the stop/cancel relay and the orphan outcome are the
product's own. ``kill`` is the protocol's stop path (:func:`~airflow_jrs.protocol.stopping.cancel_on_kill`
through the store, then terminate), the predecessor scan is the default (the product's local
scan of command lines). When ``JRS_TRIALS_REVERT`` is set the supervisor starts through
:mod:`.supervise`, which applies the revert there too.

``fork=True`` (the trials' default) runs the very same ``airflow_jrs.launch.supervisor.main`` with the
same arguments in a forked child of the task instead of a new interpreter (its imports cost
more CPU than the rest of a try; a revert applied in the task is inherited). Everything the
supervisor relies on holds as with ``exec``: its parent is the task process, the application
is its own exec'ed child carrying the job's marks, signals reach it alone.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from airflow_jrs.launch.supervisor import SUPERVISOR_ENV, supervised_command
from airflow_jrs.protocol.launcher import Launch, Launcher
from airflow_jrs.protocol.run import JobRun
from airflow_jrs.protocol.stopping import cancel_on_kill
from airflow_jrs.spark.conf import job_conf
from airflow_jrs.store import JobResult

REVERT_ENV = "JRS_TRIALS_REVERT"


class _Forked:
    """The supervisor as a forked child: the part of ``Popen`` the launcher uses."""

    def __init__(self, argv: list[str], env: dict[str, str], stderr: int | None) -> None:
        from airflow_jrs.launch import supervisor

        self.returncode: int | None = None
        self.pid = os.fork()
        if self.pid == 0:  # pragma: no cover - the child
            code = 70
            try:
                for signum in (signal.SIGTERM, signal.SIGINT):  # not the task's on_kill
                    signal.signal(signum, signal.SIG_DFL)
                null = os.open(os.devnull, os.O_RDWR)
                os.dup2(null, 0)
                os.dup2(null, 1)
                if stderr is not None:
                    os.dup2(stderr, 2)
                os.environ.update(env)
                sys.stdout = open(1, "w", closefd=False)
                code = supervisor.main(argv)
            except BaseException:
                code = 70
            finally:
                os._exit(code)

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = -1
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self) -> int:
        while self.returncode is None:
            try:
                _, status = os.waitpid(self.pid, 0)
                self.returncode = os.waitstatus_to_exitcode(status)
            except ChildProcessError:
                self.returncode = -1
            except InterruptedError:
                continue
        return self.returncode

    def terminate(self) -> None:
        if self.returncode is None:
            os.kill(self.pid, signal.SIGTERM)


class StandInFailed(RuntimeError):
    """The stand-in (or its supervisor) exited non-zero: what a failed spark-submit raises."""


class StandInLauncher(Launcher):
    """Launches :mod:`.app` for one attempt; ``app_args``: the app's plan (chunks, pace, failure)."""

    name = "stand-in"

    def __init__(
        self,
        connection: dict[str, Any],
        ttl: float,
        *,
        history: str,
        lock: str,
        app_args: list[str],
        stderr: int | None = None,
        log: logging.Logger | None = None,
        fork: bool = True,
        before_write: Callable[[], None] | None = None,
    ) -> None:
        self.connection, self.ttl, self.history, self.lock = connection, ttl, history, lock
        self.app_args, self.stderr, self.fork = app_args, stderr, fork
        self.before_write = before_write
        self.log = log or logging.getLogger("jrs_testbench.trials")
        self.command: list[str] = []
        self.proc: subprocess.Popen[bytes] | _Forked | None = None

    def prepare(self, launch: Launch) -> dict[str, Any]:
        conf = job_conf(job_id=launch.job_id, namespace=launch.namespace, fence=launch.fence, output_dir=launch.staging)
        app = [sys.executable, "-m", "jrs_testbench.trials.app"]
        for key, value in conf.items():
            app += ["--conf", f"{key}={value}"]
        app += ["--history", self.history, "--lock", self.lock, *self.app_args]
        command = supervised_command(
            app, namespace=launch.namespace, job_id=launch.job_id, fence=launch.fence, ttl=self.ttl
        )
        if os.environ.get(REVERT_ENV):  # the supervisor applies the revert too
            at = command.index("airflow_jrs.launch.supervisor")
            command[at] = "jrs_testbench.trials.supervise"
        self.command = command
        return {"application": "jrs_testbench.trials.app", "application_args": app[3:], "conf": conf}

    def run(self, launch: Launch) -> None:
        if self.fork:
            argv = self.command[self.command.index("--namespace") :]
            self.proc = _Forked(argv, {SUPERVISOR_ENV: json.dumps(self.connection)}, self.stderr)
        else:
            env = {**os.environ, SUPERVISOR_ENV: json.dumps(self.connection)}
            self.proc = subprocess.Popen(
                self.command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.stderr
            )
        code = self.proc.wait()
        if code != 0:
            raise StandInFailed(f"job {launch.job_id}: the stand-in under its supervisor exited {code}")

    def submission(self) -> tuple[int | None, str | None]:
        return (self.proc.pid if self.proc is not None else None), None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """SIGTERM the supervisor; it relays to the application (spark-submit's on_kill)."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                proc.terminate()
            except OSError:
                pass  # ended meanwhile

    def finish(self, launch: Launch, result: JobResult) -> JobResult:
        """The last call before the result write: where a trial pauses the attempt on purpose."""
        if self.before_write is not None:
            self.before_write()
        return result

    def kill(self, run: JobRun | None, fence: int | None, *, by: str = "on_kill") -> None:
        cancel_on_kill(run, fence, self.alive, self.log)  # the one stop path: the request says who asked
        self.stop()
