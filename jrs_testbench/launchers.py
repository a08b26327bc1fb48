"""A launcher that launches nothing, for tests that drive the protocol's own attempt.

The protocol decides whether to launch; a test that asks "did it?" needs a launcher that only
counts, so that the answer comes from :class:`~airflow_jrs.protocol.JobAttempt` and not from Spark.
"""

from __future__ import annotations

from airflow_jrs.protocol import Launch, Launcher


class Recording(Launcher):
    """Runs nothing: counts launches (the protocol's own code decides whether to launch)."""

    def __init__(self) -> None:
        self.launched = 0

    def prepare(self, launch: Launch) -> dict:
        return {"application": "recording"}

    def run(self, launch: Launch) -> None:
        self.launched += 1
