"""Crash an attempt at a named step: the same death as an OOM kill, nothing cleaned up.

A chaos test starts an attempt process with ``JRS_FAULT_KILL_AT=<step>``; the process calls
:func:`install_from_env` before it runs the operator, and the operator's announcement of that
step (:mod:`airflow_jrs.protocol.steps`) SIGKILLs it.
"""

from __future__ import annotations

import os
import signal

from airflow_jrs.protocol.steps import STEPS, observe_steps

ENV = "JRS_FAULT_KILL_AT"


def kill_at(step: str) -> None:
    """SIGKILL this process when the operators reach ``step``."""
    if step not in STEPS:
        raise ValueError(f"unknown step {step!r}; the operators announce {list(STEPS)}")

    def observer(reached: str) -> None:
        if reached == step:
            os.kill(os.getpid(), signal.SIGKILL)

    observe_steps(observer)


def install_from_env() -> str | None:
    """Arm :func:`kill_at` from ``JRS_FAULT_KILL_AT`` when it is set; returns the step."""
    step = os.environ.get(ENV) or None
    if step:
        kill_at(step)
    return step
