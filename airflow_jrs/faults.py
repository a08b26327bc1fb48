"""Named crash points for fault-injection tests (off unless ``JRS_FAULT_KILL_AT`` is set).

The chaos tests need to kill an attempt at exact moments ("Spark finished, result not yet
written") as well as at random times; a SIGKILL from outside cannot hit a window of a few
microseconds reliably. ``crash_point("after_spark")`` SIGKILLs the current process when
``JRS_FAULT_KILL_AT=after_spark``: the same death as an OOM kill, nothing cleaned up.
"""

from __future__ import annotations

import os
import signal

POINTS = ("after_lease", "after_intent", "after_spark", "after_result", "cleanup_before_clean")


def crash_point(name: str) -> None:
    if os.environ.get("JRS_FAULT_KILL_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
