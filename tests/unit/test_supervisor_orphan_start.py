"""spark-submit never starts once its supervisor is gone (found by the fault trials: seed 1, trial 283).

The supervisor arms ``PR_SET_PDEATHSIG`` in the child between fork and exec, so spark-submit dies
with it. A supervisor SIGKILLed between the fork and the ``prctl`` is already dead when the signal
is armed: it never comes, and spark-submit ran on with no heartbeat while a successor computed
beside it (the trials' application saw the other one's lock). The child now checks that its parent
is still the supervisor and exits with ``LOST_BEFORE_START`` otherwise. Both cases with real
processes: the one whose parent is the supervisor runs, the one whose supervisor is gone does not.
"""

from __future__ import annotations

import os
import subprocess
import sys
from functools import partial
from pathlib import Path

from airflow_jrs.launch import supervisor


def _launch(tmp_path: Path, supervisor_pid: int) -> tuple[int, bool]:
    ran = tmp_path / "ran"
    proc = subprocess.Popen(
        [sys.executable, "-c", f"open({str(ran)!r}, 'w').close()"],
        preexec_fn=partial(supervisor._die_with_parent, supervisor_pid),
    )
    return proc.wait(timeout=60), ran.exists()


def test_the_launch_runs_while_its_supervisor_is_its_parent(tmp_path: Path) -> None:
    assert _launch(tmp_path, os.getpid()) == (0, True)


def test_the_launch_does_not_start_when_its_supervisor_died_before_the_death_signal_was_armed(
    tmp_path: Path,
) -> None:
    # The child's parent is not the supervisor it was forked for: that one died (it was reparented).
    gone = os.getpid() + 4_000_000
    assert _launch(tmp_path, gone) == (supervisor.LOST_BEFORE_START, False)
