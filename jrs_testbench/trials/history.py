"""The history log: what every process of a trial run did, and when, in one file.

Jepsen's lesson: check what happened, not what the code meant to do. Attempts, stand-ins, the
fault injector and the Redis restarter are separate processes that cannot share memory, so each
appends JSON lines to one file. ``O_APPEND`` with one ``write`` per line keeps lines whole and
unmixed across processes; ``time.monotonic_ns()`` is ``CLOCK_MONOTONIC``, one clock for every
process on a Linux host, so lines from different processes can be ordered by time.

Timestamps bound the real moment an action took effect, which is what makes the checker sound:
an event logged *before* a call is a lower bound of when the call took effect (``launch``,
``result_write_begin``), one logged *after* it an upper bound (``lease_acquired``,
``result_written``, ``work_start``). The checker only ever compares a lower bound with an
upper bound in the direction that cannot produce a false alarm.

Record fields: ``t`` (monotonic ns), ``pid`` (as the writer's PID namespace numbers it: a trial
host has its own), ``host`` (``JRS_TRIAL_HOST``, when set), ``trial``, ``job``, ``fence`` (when
known), ``try`` (which try of the trial wrote it, when known), ``event`` and event-specific fields.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class HistoryLog:
    """An append-only handle on the log for one process (open it after ``fork``)."""

    def __init__(self, path: str | os.PathLike[str], *, trial: int | None = None, job: str | None = None) -> None:
        self.path = str(path)
        self.trial = trial
        self.job = job
        self.fence: int | None = None
        self.extra: dict[str, Any] = {}
        host = os.environ.get("JRS_TRIAL_HOST")
        if host:
            self.extra["host"] = host
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def log(self, event: str, **fields: Any) -> int:
        """Append one line; returns its timestamp."""
        t = time.monotonic_ns()
        record: dict[str, Any] = {"t": t, "pid": os.getpid(), "event": event}
        if self.trial is not None:
            record["trial"] = self.trial
        if self.job is not None:
            record["job"] = self.job
        if self.fence is not None and "fence" not in fields:
            record["fence"] = self.fence
        record.update(self.extra)
        record.update(fields)
        os.write(self._fd, (json.dumps(record, separators=(",", ":")) + "\n").encode())
        return t

    def close(self) -> None:
        os.close(self._fd)


def read_history(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Every record in file order. A line that does not parse is yielded as ``{"event": "torn"}``
    so the checker can count it instead of silently reading less history than was written."""
    with Path(path).open("rb") as fh:
        for raw in fh:
            try:
                yield json.loads(raw)
            except ValueError:
                yield {"event": "torn", "t": 0, "raw": raw[:200].decode(errors="replace")}
