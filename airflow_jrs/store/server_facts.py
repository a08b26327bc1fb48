"""What a store's server promises, in the terms ``doctor`` judges: part of the namespace contract.

The store's guarantees rest on settings of the server it cannot enforce (a fence that survives a
crash, results that are never evicted, a failover that keeps acknowledged writes). Each backend
reads them its own way (Redis: ``CONFIG GET``, ``INFO``, the sentinels; :mod:`airflow_jrs.store.redis.server`)
and answers with these facts, so that ``airflow-jrs doctor`` judges any backend by one rule and
sends no command of its own. A fact a backend cannot know is ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServerFacts:
    """Settings of the server; ``None`` where the server would not say."""

    version: str | None
    mode: str | None
    appendonly: str | None
    appendfsync: str | None
    maxmemory_policy: str | None
    config_readable: bool

    @property
    def fencing_durable(self) -> bool | None:
        """Does an acknowledged fence survive a crash? ``None`` when unknown."""
        if self.appendonly == "no":
            return False
        if self.appendonly is None or self.appendfsync is None:
            return None
        return self.appendonly == "yes" and self.appendfsync == "always"


@dataclass(frozen=True)
class Namespaces:
    """The namespaces a bounded SCAN saw on a server; ``complete`` is False when it stopped early."""

    names: list[str]
    complete: bool


@dataclass(frozen=True)
class FailoverFacts:
    """What ``doctor`` says of a Sentinel-managed store: the primary the sentinels name now,
    its healthy replicas, and the primary's write guard (``None``: CONFIG GET refused)."""

    primary: tuple[str, int]
    replicas: list[tuple[str, int]]
    min_replicas_to_write: int | None
    min_replicas_max_lag: int | None
