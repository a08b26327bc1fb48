"""The errors a PySpark driver can raise, and the root of airflow-jrs's error tree.

They live here so the driver helpers import the standard library only: ``airflow_jrs.exceptions``
re-exports both and documents the whole tree (catch them from there). ``JrsError`` is the root
because a driver error must be a ``JrsError`` like every other, and the driver must not import
what the rest of the tree needs.
"""

from __future__ import annotations


class JrsError(Exception):
    """Base class of every airflow-jrs error (the tree: :mod:`airflow_jrs.exceptions`)."""


class CorruptCommitMarkerError(JrsError, ValueError):
    """A commit marker exists but is not a valid marker document; ``path`` names it."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path
