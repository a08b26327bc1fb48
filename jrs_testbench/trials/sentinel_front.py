"""The Redis of a fault trial behind Sentinel: real failovers the product must follow on its own.

Where :class:`~.redis_front.RedisFront` moves a virtual IP (one proxy per host, re-pointed), here
every host reaches the store by the one Sentinel spelling (:mod:`airflow_jrs.store.redis.sentinel`)
and finds the new primary itself, as a deployment under Sentinel does. A failover is real: the
primary is SIGKILLed, SIGSTOPped, asked to step down (``SENTINEL FAILOVER``) or, with every
server behind its own TCP proxy (``proxied``), cut off while it runs on; the sentinels elect
and promote a replica, and the old server rejoins as a replica
(:class:`jrs_testbench.redis_sentinel.EmbeddedSentinelGroup`). Nothing holds replication back:
what a failover loses is what asynchronous replication had not yet carried, as in production.

``lossy``: whether the run's ``durability`` lets a failover lose acknowledged writes. Only then
does a failover open the checker's excusing window (its run fault is logged as ``failover``);
with ``durability = replicas:1`` it is logged as ``durable_failover`` and every invariant must hold.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from types import TracebackType
from typing import Any

from airflow_jrs.settings import settings_for
from airflow_jrs.store.redis.clients import client_from_url
from jrs_testbench.redis_sentinel import EmbeddedSentinelGroup
from jrs_testbench.trials.redis_front import Failover

#: How the primary is lost, in turn.
HOWS = ("kill", "pause", "kill", "ask")
#: With every server behind its own proxy: a cut too (the primary runs on, unreachable).
PROXIED_HOWS = ("kill", "cut", "pause", "cut", "ask")


class SentinelFront:
    """A Sentinel group for one run: ``url_for`` every host is the same Sentinel URL."""

    def __init__(self, data_dir: str | Path, *, lossy: bool, proxied: bool = False) -> None:
        self.group = EmbeddedSentinelGroup(data_dir, proxied=proxied)
        self.lossy = lossy
        self._hows = itertools.cycle(PROXIED_HOWS if proxied else HOWS)
        #: every failover of the run: how, old and new primary, seconds to the first acknowledged write
        self.failovers: list[Any] = []

    def __enter__(self) -> SentinelFront:
        self.group.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.group.stop()

    def url_for(self, host: str) -> str:
        return self.group.url()

    @property
    def primary_url(self) -> str:
        return self.group.url()

    def failover(self) -> Failover:
        done = self.group.fail_over(next(self._hows))
        self.failovers.append(done)
        return Failover(took_s=done.took_s, lost_bytes=0, new_primary_port=done.new_port)

    # what the virtual-IP front does that has no meaning here
    def hold_replication(self) -> None:
        """Nothing to hold: a Sentinel failover loses what replication had not carried yet."""

    def add_replica(self) -> None:
        """The old primary rejoined as a replica in :meth:`failover`."""

    def heal(self, host: str | None = None) -> None:
        """No proxy to heal."""


def check_client(url: str, timeout: float) -> Any:
    """A client for the checker and the drivers' reads, bounded by ``timeout``: a plain URL's, or
    one that follows the sentinels' primary."""
    settings = settings_for("check", output_root="", spec_root="", connect_timeout=timeout, read_timeout=timeout)
    return client_from_url(url, settings)
