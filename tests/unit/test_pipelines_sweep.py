"""The pipelines launcher's sweep: what it kills has ended when it returns, and it reaps nothing.

A ``SIGKILL`` is delivered, not obeyed at once: a JVM with many threads under load takes a while
to exit, and the gate once saw the task end with one still listed. The sweep waits for what it
killed; it must not reap the supervisor itself, whose exit code its ``Popen`` reads."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import psutil

from airflow_jrs.launch import attempt_sweep
from airflow_jrs.launch.attempt_sweep import ATTEMPT_ENV
from airflow_jrs.launch.pipelines_launcher import PipelinesLauncher


def launcher(folder: Path) -> PipelinesLauncher:
    found = PipelinesLauncher(spec_path="x", conf={}, cli_args=[], env={}, jobs=None, log=logging.getLogger("t"))  # type: ignore[arg-type]
    found._folder = str(folder)
    return found


def running(pid: int) -> bool:
    try:
        proc = psutil.Process(pid)
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_what_the_sweep_killed_has_ended_when_it_returns_and_its_own_child_keeps_its_exit_code(tmp_path):
    folder = tmp_path / "jrs-pipeline-x"
    env = {**os.environ, ATTEMPT_ENV: str(folder)}
    # a grandchild (left to init when its parent ends, as the CLI's Python is) and a direct child
    parent = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time; p = subprocess.Popen(['sleep', '600']); "
         "print(p.pid, flush=True); time.sleep(600)"],
        env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert parent.stdout is not None
    grandchild = int(parent.stdout.readline())
    launcher(folder)._sweep()
    assert not running(grandchild) and not running(parent.pid)
    assert parent.wait(10) == -9, "the sweep reaped the child: its Popen lost the exit code"


def test_a_process_that_outlives_the_wait_is_named_in_the_log(tmp_path, monkeypatch, caplog):
    folder = tmp_path / "jrs-pipeline-y"
    child = subprocess.Popen(["sleep", "600"], env={**os.environ, ATTEMPT_ENV: str(folder)})
    monkeypatch.setattr(psutil.Process, "kill", lambda self: None)  # a kill that is not obeyed
    monkeypatch.setattr(attempt_sweep, "SWEEP_WAIT", 0.2)
    try:
        with caplog.at_level(logging.WARNING):
            launcher(folder)._sweep()
        assert f"pids [{child.pid}]" in caplog.text and "outlived SIGKILL" in caplog.text
    finally:
        child.kill()
        child.wait()
